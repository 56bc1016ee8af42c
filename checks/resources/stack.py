"""The installed software stack of a node as one mapping, read from the version resources: what
versions.* and fleet.stack judge (component -> version, and the lines it came from)."""

from __future__ import annotations

__all__ = ["installed_stack"]


def installed_stack(host) -> tuple[dict[str, str | None], list[str]]:
    """component -> installed version (None: not installed), and the evidence lines it came from."""
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
    driver, firmware, toolkit = host.driver_version.info, host.firmware_version.info, host.toolkit.installed
    if driver is not None:
        stack["driver"] = driver.version
        lines.append(f"driver/version.info: Version={driver.version}")
    if firmware is not None:
        stack["firmware"] = firmware.version
        lines.append(f"firmware/version.info: Version={firmware.version}")
    if toolkit is not None:
        info, path = toolkit
        stack["cann"] = info.version
        lines.append(f"{path}: version={info.version}")
    for comp, found in host.cann_components.components.items():
        stack[comp] = found.version
        lines.append(f"{found.path}: version={found.version}")
    packages = host.python_packages.packages
    python, dists = packages.python, packages.dists
    for name, key in (("torch", "torch"), ("torch-npu", "torch_npu")):
        if name in dists:
            stack[key] = dists[name].version
            d = dists[name]
            lines.append(f"python {python} ({host.profile.python}): {d.name} {d.version} in {d.location}")
    return stack, lines
