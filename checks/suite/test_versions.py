"""Version checks: the stack is installed, forms a valid row of the compatibility matrix, and the
training user's environment finds it."""

from __future__ import annotations

from ascend_ready.checks.registry import check, evidence

_REINSTALL = "ansible-playbook playbooks/site.yml --limit <host>"
_VERSION_PROBES = [
    "driver-version",
    "firmware-version",
    "toolkit-version",
    "cann-components",
    "python-packages",
]


def installed_stack(host) -> tuple[dict[str, str | None], list[str]]:
    """component -> installed version (None: not installed), and the evidence lines it came from."""
    v = host.versions
    stack: dict[str, str | None] = {
        "driver": None,
        "firmware": None,
        "cann": None,
        "ops": None,
        "nnal": None,
        "torch": None,
        "torch_npu": None,
    }
    lines = []
    if v.driver is not None:
        stack["driver"] = v.driver.version
        lines.append(f"driver/version.info: Version={v.driver.version}")
    if v.firmware is not None:
        stack["firmware"] = v.firmware.version
        lines.append(f"firmware/version.info: Version={v.firmware.version}")
    if v.toolkit is not None:
        info, path = v.toolkit
        stack["cann"] = info.version
        lines.append(f"{path}: version={info.version}")
    for comp, (version, path) in v.components.items():
        stack[comp] = version
        lines.append(f"{path}: version={version}")
    python, dists = v.python
    for name, key in (("torch", "torch"), ("torch-npu", "torch_npu")):
        if name in dists:
            stack[key] = dists[name].version
            d = dists[name]
            lines.append(f"python {python} ({host.profile.python}): {d.name} {d.version} in {d.location}")
    return stack, lines


@check(
    "versions.installed",
    title="driver, firmware, CANN toolkit, ops/kernels, NNAL, torch and torch_npu are installed",
    severity="critical",
    probes=_VERSION_PROBES,
    fix="Install the missing components from the compatibility matrix",
    command=_REINSTALL,
)
def test_installed(host):
    stack, lines = installed_stack(host)
    evidence(lines)
    missing = [name for name, version in stack.items() if version is None]
    assert not missing, f"not installed: {', '.join(missing)}"


@check(
    "versions.stack",
    title="the installed versions form a valid stack of the compatibility matrix",
    severity="critical",
    probes=_VERSION_PROBES,
    fix="Install the versions the matrix names for this stack (ascend-matrix resolve shows the full stack)",
    command=_REINSTALL,
    disruptive=True,
)
def test_stack(host):
    from ascend_ready.provision.judge import judge

    stack, lines = installed_stack(host)
    evidence(lines)
    python, _dists = host.versions.python
    known = {
        k: v for k, v in stack.items() if k in ("driver", "firmware", "cann", "torch", "torch_npu") and v
    }
    assert known, "nothing of the stack is installed"
    verdict = judge({**known, "python": python, "product": host.profile.matrix_product})
    evidence(f"matrix: {f.component} {f.installed}: {f.reason}" for f in verdict.findings)
    assert verdict.valid, "; ".join(
        f"{f.component} is {f.installed}, should be {f.expected or 'another version'} ({f.reason})"
        for f in verdict.findings
    )


@check(
    "versions.set_env",
    title="the CANN set_env.sh scripts are present",
    severity="major",
    probes=["set-env", "toolkit-version"],
    fix="Reinstall the CANN toolkit (it writes set_env.sh)",
    command=_REINSTALL,
)
def test_set_env(host):
    scripts = host.versions.set_env
    evidence(scripts)
    toolkit = [s for s in scripts if s.endswith(("/ascend-toolkit/set_env.sh", "/cann/set_env.sh"))]
    assert toolkit, f"no ascend-toolkit/set_env.sh or cann/set_env.sh under {host.profile.ascend_root}"


@check(
    "versions.user_libs",
    title="the training user's environment finds the Ascend libraries",
    severity="critical",
    probes=["user-libs"],
    fix="Source set_env.sh from the training user's profile (e.g. /etc/profile.d/ascend.sh)",
    command="echo 'source /usr/local/Ascend/ascend-toolkit/set_env.sh' >> /etc/profile.d/ascend.sh",
)
def test_user_libs(host):
    path, libs = host.versions.user_libs
    evidence(f"LD_LIBRARY_PATH={path}", *(f"{lib}: {where or 'not found'}" for lib, where in libs.items()))
    missing = [lib for lib in host.profile.required_libs if not libs.get(lib)]
    assert not missing, f"{host.profile.training_user}'s LD_LIBRARY_PATH does not find {', '.join(missing)}"


@check(
    "versions.torch_npu_import",
    title="torch_npu imports and sees every chip",
    severity="critical",
    tier="full",
    probes=["torch-import", "npu-smi-info"],
    fix="Run the training interpreter (--python, the venv) as the training user and fix the error it prints",
    command="su - <user> -c \"<python> -c 'import torch, torch_npu; print(torch.npu.device_count())'\"",
)
def test_torch_npu_import(host):
    text = host.stdout("torch-import")
    evidence(text)
    values = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    python = host.profile.python
    assert values.get("npu_available") == "True", f"torch.npu.is_available() is False in {python}"
    chips = len(host.npu_smi.chips)
    assert values.get("device_count") == str(chips), (
        f"torch_npu sees {values.get('device_count')} device(s), npu-smi lists {chips}"
    )
