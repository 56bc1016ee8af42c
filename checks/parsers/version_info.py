"""Parsers of the Ascend version files: driver and firmware `version.info`, CANN
`ascend_toolkit_install.info` (the old `ascend-toolkit/<ver>` and the CANN 8.5 `cann-<ver>` layouts),
`ascend_nnae_install.info`, and `/etc/ascend_install.info`.

All are `key=value` lines; bracketed lists (`[V100R001C13,V100R001C19],[V100R001C30]`) are read into
lists of groups, and a group of two versions is a range (`compatible_version_fw=[7.0.0,7.1.99]`).
"""

from __future__ import annotations

import re
from typing import Literal

from ascend_ready.checks.parsers._common import key_values, strip_preamble, text_lines
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

_GROUP_RE = re.compile(r"\[([^\[\]]*)\]")


def bracket_groups(kind: str, value: str, line: Line) -> list[list[str]]:
    """`[a,b],[c]` -> [["a", "b"], ["c"]]; anything outside brackets but commas is a ParseError."""
    if _GROUP_RE.sub("", value).replace(",", "").strip():
        raise fail(kind, f"expected a list of [..] groups, got {value!r}", line)
    groups = [[item.strip() for item in group.split(",") if item.strip()]
              for group in _GROUP_RE.findall(value)]
    if not groups:
        raise fail(kind, f"empty version list {value!r}", line)
    return groups


class VersionRange(ParsedModel):
    """An inclusive range as the vendor writes it; a trailing dot (`23.0.rc3.`) means "and its builds"."""

    low: str
    high: str


def _ranges(kind: str, value: str, line: Line) -> list[VersionRange]:
    out = []
    for group in bracket_groups(kind, value, line):
        if len(group) != 2:
            raise fail(kind, f"expected [low,high] ranges, got {value!r}", line)
        out.append(VersionRange(low=group[0], high=group[1]))
    return out


def _pairs(kind: str, text: str, required: tuple[str, ...]) -> tuple[dict[str, str], dict[str, Line]]:
    lines = strip_preamble(text_lines(kind, text), _COMMANDS)
    values: dict[str, str] = {}
    where: dict[str, Line] = {}
    for key, value, line in key_values(kind, lines, "="):
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", key):
            raise fail(kind, f"unexpected key {key!r}", line)
        if key.lower() in {k.lower() for k in values}:
            raise fail(kind, f"{key} set twice", line)
        values[key] = value
        where[key.lower()] = line
    lower = {k.lower(): k for k in values}
    missing = [key for key in required if key.lower() not in lower or not values[lower[key.lower()]]]
    if missing:
        last = max(where.values(), key=lambda line: line.no, default=None)
        raise fail(kind, "missing " + ", ".join(f"'{key}='" for key in missing) + " (file cut off?)", last,
                   hint="pass the whole file (`cat` it), not an excerpt")
    return values, where


#: commands typed without a prompt above a file's content (`cat /usr/local/Ascend/driver/version.info`)
_COMMANDS = ("cat", "more", "head", "tail")


def _get(values: dict[str, str], key: str) -> str | None:
    """Case-insensitive lookup: the driver writes `Version=`/`Innerversion=`, CANN `version=`."""
    for k, v in values.items():
        if k.lower() == key.lower():
            return v or None
    return None


class DriverVersionInfo(ParsedModel):
    """`/usr/local/Ascend/driver/version.info`."""

    version: str
    package_version: str | None
    innerversion: str | None
    ascendhal_version: str | None
    #: CANN innerversion families this driver supports (`V100R001C15`)
    compatible_version: list[str]
    #: firmware versions this driver accepts
    compatible_version_fw: list[VersionRange]
    fields: dict[str, str]


def _not_other_file(kind: str, values: dict[str, str], where: dict[str, Line], *foreign: str) -> None:
    """Keys that belong to another version file mean the wrong file was passed."""
    for key in foreign:
        if _get(values, key) is not None:
            raise fail(kind, f"'{key}=' belongs to another Ascend version file", where[key.lower()],
                       hint="driver: /usr/local/Ascend/driver/version.info, firmware: /usr/local/Ascend/"
                            "firmware/version.info, CANN: <install>/<arch>-linux/*_install.info")


@parser("driver-version-info")
def parse_driver_version_info(text: str) -> DriverVersionInfo:
    kind = "driver-version-info"
    values, where = _pairs(kind, text, ("Version",))
    _not_other_file(kind, values, where, "package_name", "compatible_version_drv", "firmware_version")
    compat = _get(values, "compatible_version")
    fw = _get(values, "compatible_version_fw")
    return DriverVersionInfo(
        version=_get(values, "version") or "",
        package_version=_get(values, "package_version"), innerversion=_get(values, "innerversion"),
        ascendhal_version=_get(values, "ascendhal_version"),
        compatible_version=[] if compat is None else
        [v for group in bracket_groups(kind, compat, where["compatible_version"]) for v in group],
        compatible_version_fw=[] if fw is None else _ranges(kind, fw, where["compatible_version_fw"]),
        fields=values)


class FirmwareVersionInfo(ParsedModel):
    """`/usr/local/Ascend/firmware/version.info`."""

    version: str
    package_version: str | None
    firmware_version: str | None
    #: driver versions this firmware accepts
    compatible_version_drv: list[VersionRange]
    fields: dict[str, str]


@parser("firmware-version-info")
def parse_firmware_version_info(text: str) -> FirmwareVersionInfo:
    kind = "firmware-version-info"
    values, where = _pairs(kind, text, ("Version",))
    _not_other_file(kind, values, where, "package_name", "compatible_version_fw", "ascendhal_version",
                    "Innerversion")
    drv = _get(values, "compatible_version_drv")
    return FirmwareVersionInfo(
        version=_get(values, "version") or "",
        package_version=_get(values, "package_version"), firmware_version=_get(values, "firmware_version"),
        compatible_version_drv=[] if drv is None else _ranges(kind, drv, where["compatible_version_drv"]),
        fields=values)


class CannPackageInfo(ParsedModel):
    """`ascend_toolkit_install.info` / `ascend_nnae_install.info` of a CANN package."""

    package_name: str
    version: str
    innerversion: str | None
    compatible_version: list[list[str]]
    arch: str | None
    os: str | None
    path: str | None
    #: `ascend-toolkit` (<= 8.3: /usr/local/Ascend/ascend-toolkit/<ver>/<arch>-linux),
    #: `cann` (8.5+: /usr/local/Ascend/cann-<ver>[/<arch>-linux]), `nnae`, or `other`
    layout: Literal["ascend-toolkit", "cann", "nnae", "other"]
    #: the versioned install directory without `<arch>-linux` (`/usr/local/Ascend/cann-8.5.0`)
    install_dir: str | None
    fields: dict[str, str]


def _layout(path: str | None) -> tuple[str, str | None]:
    if path is None:
        return "other", None
    base = re.sub(r"/\w+-linux$", "", path.rstrip("/"))  # aarch64-linux, x86_64-linux, old arm64-linux
    for layout, pattern in (("cann", r"/cann(?:-[^/]+)?$"), ("ascend-toolkit", r"/ascend-toolkit/[^/]+$"),
                            ("nnae", r"/nnae/[^/]+$")):
        if re.search(pattern, base):
            return layout, base
    return "other", base


#: Keys every CANN install-info file holds (8.0.T6 to 8.5.0 toolkit captures, the 8.5 vendor doc, the nnae
#: file); the last three close the file, so a file cut after a few lines misses them.
_CANN_KEYS = ("package_name", "version", "innerversion", "arch", "os", "path")


def _cann_package(kind: str, package_prefix: str):
    def parse(text: str) -> CannPackageInfo:
        values, where = _pairs(kind, text, _CANN_KEYS)
        _not_other_file(kind, values, where, "compatible_version_fw", "compatible_version_drv")
        name = _get(values, "package_name") or ""
        if not name.startswith(package_prefix):
            raise fail(kind, f"package_name {name!r} is not a {package_prefix} package",
                       where["package_name"])
        compat = _get(values, "compatible_version")
        layout, install_dir = _layout(_get(values, "path"))
        return CannPackageInfo(
            package_name=name, version=_get(values, "version") or "",
            innerversion=_get(values, "innerversion"),
            compatible_version=[] if compat is None else
            bracket_groups(kind, compat, where["compatible_version"]),
            arch=_get(values, "arch"), os=_get(values, "os"), path=_get(values, "path"), layout=layout,
            install_dir=install_dir, fields=values)

    parse.__name__ = "parse_" + kind.replace("-", "_")
    parse.__doc__ = f"Parse a CANN install-info file whose package_name starts with {package_prefix!r}."
    return parser(kind)(parse)


parse_toolkit_install_info = _cann_package("toolkit-install-info", "Ascend-cann-toolkit")
parse_nnae_install_info = _cann_package("nnae-install-info", "Ascend-cann-nnae")


class AscendInstallInfo(ParsedModel):
    """`/etc/ascend_install.info`: who installed the driver where (read by the driver's own tools)."""

    user_name: str | None
    user_group: str | None
    driver_install_path: str | None
    driver_install_status: str | None
    firmware_install_path: str | None
    fields: dict[str, str]


@parser("ascend-install-info")
def parse_ascend_install_info(text: str) -> AscendInstallInfo:
    kind = "ascend-install-info"
    values, _where = _pairs(kind, text, ())
    if not any(k.startswith(("Driver_", "Firmware_", "UserName", "UserGroup")) for k in values):
        raise fail(kind, "no Driver_*/UserName keys: not /etc/ascend_install.info")
    return AscendInstallInfo(
        user_name=_get(values, "UserName"), user_group=_get(values, "UserGroup"),
        driver_install_path=_get(values, "Driver_Install_Path_Param"),
        driver_install_status=_get(values, "Driver_Install_Status"),
        firmware_install_path=_get(values, "Firmware_Install_Path_Param"), fields=values)
