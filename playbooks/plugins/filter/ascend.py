"""Jinja filters of the ascend-ready roles: read vendor version files, pick install actions, judge health.

Each filter is a thin wrapper over ascend_ready (the matrix's version order, the checks' parsers),
so the playbooks and ascend-check judge the same facts the same way.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

# Ansible imports every filter file in each forked worker that templates a filter, so only the
# standard-library version order loads here; the checks' parsers load in the filters that need them.
try:
    from ascend_ready.provision import versions as _versions
except ImportError as _exc:  # pragma: no cover - depends on the controller's environment
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None



def _need_package() -> None:
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(
            f"the ascend-ready filters need the ascend_ready package in the controller's Python "
            f"({_IMPORT_ERROR}); run ansible-playbook from its environment (pip install -e .)")


def key_values(text: str | None) -> dict[str, str]:
    """KEY=value lines of a version or install-info file (quotes stripped); {} for no text."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def install_action(installed: str | None, wanted: str) -> str:
    """'install' (nothing there), 'skip' (same version), 'upgrade' (wanted is newer) or 'downgrade'."""
    _need_package()
    if not wanted:
        raise AnsibleFilterError("ascend_install_action: no wanted version given")
    if not installed or str(installed).strip().lower() in ("none", ""):
        return "install"
    try:
        have, want = _versions.version_key(str(installed)), _versions.version_key(str(wanted))
    except ValueError as exc:
        raise AnsibleFilterError(f"ascend_install_action: {exc}") from None
    if have == want:
        return "skip"
    return "upgrade" if want > have else "downgrade"


def install_plan(grep_output: str | None, files: dict, wanted: dict) -> dict[str, dict[str, str]]:
    """{name: {installed, action}} for the version files `files` ({name: path}) read in one go with
    `grep -s -H '' PATH...` ("path:KEY=value" lines), against `wanted` ({name: version}).

    The version is the file's Version= (driver, firmware) or version= (CANN install-info) entry; a file
    that is missing or has none means nothing is installed.
    """
    lines: dict[str, list[str]] = {}
    for line in (grep_output or "").splitlines():
        path, sep, rest = line.partition(":")
        if sep:
            lines.setdefault(path, []).append(rest)
    plan = {}
    for name, path in files.items():
        kv = {k.lower(): v for k, v in key_values("\n".join(lines.get(path, []))).items()}
        installed = kv.get("version", "")
        action = install_action(installed, wanted[name]) if wanted.get(name) else ""
        plan[name] = {"installed": installed, "action": action}
    return plan


def version_lt(a: str, b: str) -> bool:
    """a < b in the matrix's version order (glibc 2.17 < 2.28; 23.0.rc3 < 23.0.0)."""
    _need_package()
    try:
        return _versions.version_key(str(a)) < _versions.version_key(str(b))
    except ValueError as exc:
        raise AnsibleFilterError(f"ascend_version_lt: {exc}") from None


def npu_product(lspci_n: str) -> str:
    """Matrix product id of the NPUs in `lspci -n` output (the checks' lspci parser and NPU id table); ''
    when none; error when products are mixed or a line cannot be read."""
    _need_package()
    from ascend_ready.checks.parsers.lspci import matrix_product, parse_lspci
    from ascend_ready.errors import AscendReadyError

    if not (lspci_n or "").strip():
        return ""
    try:
        devices = parse_lspci(lspci_n).devices
    except AscendReadyError as exc:
        raise AnsibleFilterError(f"ascend_npu_product: {exc.message}") from None
    seen = {matrix_product(d.device_id) for d in devices if d.is_ascend_npu} - {None}
    if len(seen) > 1:
        raise AnsibleFilterError(f"ascend_npu_product: mixed NPU products in one node: "
                                 f"{', '.join(sorted(seen))}")
    return seen.pop() if seen else ""


def unhealthy_chips(npu_smi_info: str) -> list[str]:
    """'NPU 3 chip 0: Alarm' for every chip `npu-smi info` does not show as OK; fails on unreadable text."""
    _need_package()
    from ascend_ready.checks.parsers.npu_smi_info import parse_npu_smi_info
    from ascend_ready.errors import AscendReadyError

    try:

        info = parse_npu_smi_info(npu_smi_info or "")
    except AscendReadyError as exc:
        raise AnsibleFilterError(f"cannot judge NPU health: {exc.message}") from None
    return [f"NPU {npu.id} chip {chip.chip_id}: {chip.health}"
            for npu in info.npus for chip in npu.chips if chip.health != "OK"]


def hccn_settings(read: str) -> list[str]:
    """The hccn role's read (main.yml) as the lines it compares with what it wants: the `conf ...` line as
    read, then per device `ID ADDRESS NETMASK GATEWAY NETDETECT` from the `@@hccn ID ip|gateway|netdetect`
    sections of hccn_tool's output, read by the checks' parsers. A value not set, or output a parser
    cannot read (no hccn_tool yet, a device that failed), is empty there: the line differs and is set."""
    _need_package()
    from ascend_ready.checks.parsers.hccn import parse_hccn_gateway, parse_hccn_ip, parse_hccn_netdetect
    from ascend_ready.errors import AscendReadyError

    out: list[str] = []
    sections: dict[tuple[str, str], list[str]] = {}
    devices: list[str] = []
    section = None
    for line in (read or "").splitlines():
        if line.startswith("@@hccn "):
            _, device, what = line.split(" ", 2)
            section = sections.setdefault((device, what.strip()), [])
            if device not in devices:
                devices.append(device)
        elif section is None:
            out.append(line)
        else:
            section.append(line)

    def values(device: str, what: str, parse, *fields: str) -> list[str]:
        try:
            model = parse("\n".join(sections.get((device, what), [])))
        except AscendReadyError:
            return [""] * len(fields)
        return [getattr(model, f) or "" for f in fields]

    for device in devices:
        address, netmask = values(device, "ip", parse_hccn_ip, "address", "netmask")
        (gateway,) = values(device, "gateway", parse_hccn_gateway, "gateway")
        (netdetect,) = values(device, "netdetect", parse_hccn_netdetect, "address")
        out.append(f"{device} {address} {netmask} {gateway} {netdetect}")
    return out


def check_failures(report_json: str, hosts, strict: bool = False) -> dict[str, list[str]]:
    """Per host of `hosts`, the 'check_id: message' lines of an `ascend-check --format json` report that
    fail it (fail and error; warn too when strict); ['unreachable: why'] for a host it could not judge.

    The report covers every node at once: parsing it here, once, keeps the per-node verdict cheap.
    """
    try:
        report = json.loads(report_json)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"ascend_check_failures: not an ascend-check JSON report ({exc})") from None
    bad_status = {"fail", "error"} | ({"warn"} if strict else set())
    known = {h.get("name"): h for h in report.get("hosts", [])}
    out = {}
    for host in hosts:
        status = known.get(host)
        if status is None or not status.get("reachable", False):
            why = (status or {}).get("error") or "not in the report"
            out[host] = [f"unreachable: {why}"]
            continue
        out[host] = [f"{r.get('check_id')}: {r.get('message', '')}" for r in report.get("results", [])
                     if r.get("host") == host and r.get("status") in bad_status]
    return out


def cann_requirements(requirements, python: str | None = None) -> list[str]:
    """CANN's Python dependencies as python_env installs them for the node's Python: the list given (the
    role's default is the CANN guide's) with ascend_ready.provision.packages.cann_requirements' rule, the
    one `ascend-matrix packages` lists by (numpy's < 2.0 cap dropped on Python 3.13+)."""
    _need_package()
    from ascend_ready.provision.packages import cann_requirements as for_python

    return for_python(str(python) if python else None, [str(r) for r in requirements])


def training_requirements(enabled, torch=None) -> list[str]:
    """What python_env installs for the training job where `enabled` (else nothing): ascend-ready of the
    controller's version (installed with --no-deps: the controller's ansible-core and paramiko stay off the
    node), then each requirement of its node extra, the training packages pinned to the training set of
    `torch` (the stack's), as `ascend-matrix packages` lists them."""
    if not enabled:
        return []
    _need_package()
    from ascend_ready.errors import MatrixError
    from ascend_ready.provision.packages import training_requirements as listed

    try:
        return listed(torch=str(torch) if torch else None)
    except MatrixError as exc:
        raise AnsibleFilterError(f"{exc.message} ({exc.hint})") from None


def node_profile(spec: str | None, groups=()) -> str:
    """The hardware profile ascend-check judges a node by from the controller (`spec`: the inventory's
    ascend_check_profile, a bundled name or a file here; empty: ascend-check's default) with the overrides
    of the node's groups applied, as the YAML python_env leaves on the node: its own ascend-check (the
    single-node preflight of ascend-train) then judges by the same thresholds."""
    _need_package()
    import yaml

    from ascend_ready.checks.profile import load_profile
    from ascend_ready.errors import ConfigError

    try:
        profile = load_profile(str(spec) if spec else None).for_groups([str(g) for g in groups])
    except ConfigError as exc:
        raise AnsibleFilterError(f"ascend_check_profile: {exc.message}") from None
    return yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False)


class FilterModule:
    def filters(self):
        return {
            "ascend_kv": key_values,
            "ascend_install_action": install_action,
            "ascend_install_plan": install_plan,
            "ascend_version_lt": version_lt,
            "ascend_npu_product": npu_product,
            "ascend_unhealthy_chips": unhealthy_chips,
            "ascend_check_failures": check_failures,
            "ascend_hccn_settings": hccn_settings,
            "ascend_cann_requirements": cann_requirements,
            "ascend_training_requirements": training_requirements,
            "ascend_node_profile": node_profile,
        }
