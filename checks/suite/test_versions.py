"""Version checks: the stack is installed, forms a valid row of the compatibility matrix, and the
training user's environment finds it."""

from __future__ import annotations

from ascend_ready import __version__
from ascend_ready.checks.registry import check, evidence
from ascend_ready.checks.remediation import PLAYBOOK
from ascend_ready.checks.resources import (
    CannComponents,
    DriverVersion,
    FirmwareVersion,
    NpuSmi,
    PythonPackages,
    SetEnv,
    Toolkit,
    TorchImport,
    TrainingEnv,
    UserLibs,
)
from ascend_ready.checks.resources.stack import installed_stack
from ascend_ready.provision import training_sets

_REINSTALL = PLAYBOOK + " --limit <host>"
_STACK = [DriverVersion, FirmwareVersion, Toolkit, CannComponents, PythonPackages]


@check(
    "versions.installed",
    title="driver, firmware, CANN toolkit, ops/kernels, NNAL, torch and torch_npu are installed",
    severity="critical",
    reads=_STACK,
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
    reads=_STACK,
    fix="Install the versions the matrix names for this stack (ascend-matrix resolve shows the full stack)",
    command=_REINSTALL,
    disruptive=True,
)
def test_stack(host):
    from ascend_ready.provision.judge import judge

    stack, lines = installed_stack(host)
    evidence(lines)
    python = host.python_packages.packages.python
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
    reads=[SetEnv, Toolkit],
    fix="Reinstall the CANN toolkit (it writes set_env.sh)",
    command=_REINSTALL,
)
def test_set_env(host):
    scripts = host.set_env.scripts
    evidence(scripts)
    # The installed toolkit's layout names the script training sources: cann/ from CANN 8.5,
    # ascend-toolkit/ before; with no toolkit (versions.installed says so) either one will do.
    installed = host.toolkit.installed
    layouts = {"cann": ("/cann/set_env.sh",), "ascend-toolkit": ("/ascend-toolkit/set_env.sh",)}
    wanted = layouts.get(installed[0].layout) if installed else None
    if installed:
        evidence(f"{installed[1]}: path={installed[0].path} ({installed[0].layout} layout)")
    wanted = wanted or ("/ascend-toolkit/set_env.sh", "/cann/set_env.sh")
    found = [s for s in scripts if s.endswith(wanted)]
    assert found, f"no {' or '.join(w.lstrip('/') for w in wanted)} under {host.profile.ascend_root}"


@check(
    "versions.user_libs",
    title="the training user's environment finds the Ascend libraries",
    severity="critical",
    reads=[UserLibs],
    fix="Source set_env.sh from the training user's profile (e.g. /etc/profile.d/ascend.sh)",
    command="echo 'source /usr/local/Ascend/ascend-toolkit/set_env.sh' >> /etc/profile.d/ascend.sh",
)
def test_user_libs(host):
    found = host.user_libs.libs
    path, libs = found.ld_library_path, found.libs
    evidence(f"LD_LIBRARY_PATH={path}", *(f"{lib}: {where or 'not found'}" for lib, where in libs.items()))
    missing = [lib for lib in host.profile.required_libs if not libs.get(lib)]
    assert not missing, f"{host.profile.training_user}'s LD_LIBRARY_PATH does not find {', '.join(missing)}"


@check(
    "versions.torch_npu_import",
    title="torch_npu imports and sees every chip",
    severity="critical",
    tier="full",
    reads=[TorchImport, NpuSmi],
    fix="Run the training interpreter (--python, the venv) as the training user and fix the error it prints",
    command="su - <user> -c \"<python> -c 'import torch, torch_npu; print(torch.npu.device_count())'\"",
)
def test_torch_npu_import(host):
    evidence(host.torch_import.text)
    result = host.torch_import.result
    python = host.profile.python
    assert result.npu_available, f"torch.npu.is_available() is False in {python}"
    chips = len(host.npu_smi.chips)
    count = "an unknown number of" if result.device_count is None else result.device_count
    assert result.device_count == chips, f"torch_npu sees {count} device(s), npu-smi lists {chips}"


@check(
    "versions.training_env",
    title="the training venv imports ascend-ready of the controller's version and what the job needs",
    severity="critical",
    reads=[TrainingEnv],
    fix=(
        "Provision the training venv: python_env installs ascend-ready of the controller's version, its node "
        "extra and the training set of the stack's torch (python_env_training, on by default; the wheels are "
        "listed by `ascend-matrix packages`, the sets in provision/training_sets.yml)"
    ),
    command=_REINSTALL + " --tags python_env",
)
def test_training_env(host):
    env = host.training_env.env
    evidence(
        f"interpreter: {env.executable}",
        *(f"{name}: {'found' if found else 'missing'}" for name, found in env.modules.items()),
        f"ascend_ready: {env.ascend_ready or 'cannot import (' + (env.ascend_ready_error or '?') + ')'}",
    )
    missing = [name for name, found in env.modules.items() if not found]
    assert not missing, f"{env.executable} cannot import {', '.join(missing)}"
    assert env.ascend_ready is not None, (
        f"{env.executable} cannot import ascend_ready: {env.ascend_ready_error}"
    )
    assert env.ascend_ready == __version__, (
        f"{env.executable} has ascend-ready {env.ascend_ready}, this controller {__version__}: "
        "the job would run other code than the one that judged it"
    )
    # The training set of the venv's torch line: what python_env installed, what declares support for it.
    torch = env.versions.get("torch")
    found = training_sets.set_for(torch) if torch else None
    if found is None:
        return  # a torch line the sets do not record (a controller's own venv): nothing to judge against
    assert not found.none, f"torch {torch}: no training set exists: {found.none}"
    evidence(f"training set of torch {found.torch}: " + ", ".join(found.requirements(optional=True)))
    wrong = [f"{name} {env.versions[name] or 'missing'} (the set holds {want})"
             for name, want in found.packages.items() if name in env.versions
             and env.versions[name] != want and (name not in training_sets.OPTIONAL or env.versions[name])]
    assert not wrong, f"{env.executable} (torch {torch}) has {', '.join(wrong)}: provision/training_sets.yml"
