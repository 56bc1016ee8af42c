"""Parsers of what ascend-check's own stack probes print about CANN and the training Python
(checks/resources/versions.py): CANN's component install files and set_env.sh scripts, the interpreter's
distributions, its library path and the torch_npu import. Each model is the parsed output
(`PythonPackagesOutput`); the resource without `Output` (checks/resources/versions.py) is what a check reads.

Each output has the one shape its probe prints; any other line is a ParseError naming it.
"""

from __future__ import annotations

import re

from pydantic import Field

from ascend_ready.checks.parsers.base import ParsedModel, fail, parser
from ascend_ready.checks.parsers.os_commands import probe_lines
from ascend_ready.checks.parsers.python_pkgs import normalize_name

__all__ = [
    "CannComponent",
    "CannComponentsOutput",
    "Distribution",
    "PythonPackagesOutput",
    "SetEnvScripts",
    "TorchImportOutput",
    "TrainingEnvOutput",
    "UserLibsOutput",
    "parse_cann_components",
    "parse_python_packages",
    "parse_set_env",
    "parse_torch_import",
    "parse_training_env",
    "parse_user_libs",
]


# ---------------------------------------------------------------- CANN components (`== FILE` + its lines)


class CannComponent(ParsedModel):
    version: str
    path: str  # the install-info file it came from


class CannComponentsOutput(ParsedModel):
    """ops/kernels (`ops`) and NNAL (`nnal`) -> version; the last file of a component wins (newest)."""

    components: dict[str, CannComponent]


_KV_RE = re.compile(r"^\s*(?P<key>[A-Za-z_][\w .-]*?)\s*[=:]\s*(?P<value>.*)$")


@parser("cann-components")
def parse_cann_components(text: str) -> CannComponentsOutput:
    kind = "cann-components"
    components: dict[str, CannComponent] = {}
    current, header, version = None, None, None

    def close() -> None:
        if current is None:
            return
        if version is None:
            raise fail(kind, f"no version line in {current}", header)
        # globs expand in order: the newest version of a component comes last
        components["nnal" if "/nnal/" in current else "ops"] = CannComponent(version=version, path=current)

    for line in probe_lines(kind, text, allow_empty=True):
        if line.startswith("== /"):
            close()
            current, header, version = line[3:].strip(), line, None
            continue
        match = _KV_RE.match(line)
        if current is None or not match:
            raise fail(kind, "expected '== /path/to/install.info' then its 'key=value' lines", line)
        # install.info files say `version=X`; nnal/atb/latest/version.info says `Ascend-cann-atb : X`
        # (then `Ascend-cann-atb Version : X.B030`, the build)
        if match["key"].lower() in ("version", "ascend-cann-atb"):
            version = match["value"].strip()
    close()
    return CannComponentsOutput(components=components)


# ---------------------------------------------------------------- the training Python's distributions


class Distribution(ParsedModel):
    name: str
    version: str
    tags: list[str]  # wheel tags from WHEEL (`cp310-cp310-manylinux_2_28_aarch64`); [] when none
    location: str


class PythonPackagesOutput(ParsedModel):
    """`python X.Y.Z` then `dist NAME VERSION TAGS|- DIR` per distribution; by normalized name."""

    python: str
    dists: dict[str, Distribution]


@parser("python-packages")
def parse_python_packages(text: str) -> PythonPackagesOutput:
    kind = "python-packages"
    python = None
    dists: dict[str, Distribution] = {}
    for line in probe_lines(kind, text):
        parts = line.split(" ")
        if parts[0] == "python" and len(parts) == 2 and python is None:
            python = parts[1]
        elif parts[0] == "dist" and len(parts) >= 5:
            # the first directory on sys.path wins, as for `import`
            dists.setdefault(
                normalize_name(parts[1]),
                Distribution(
                    name=parts[1],
                    version=parts[2],
                    tags=[] if parts[3] == "-" else parts[3].split(","),
                    location=" ".join(parts[4:]),
                ),
            )
        else:
            raise fail(kind, "expected 'python X.Y.Z' once, then 'dist NAME VERSION TAGS DIR' lines", line)
    if python is None:
        raise fail(kind, "no 'python X.Y.Z' line", probe_lines(kind, text)[0])
    return PythonPackagesOutput(python=python, dists=dists)


# ---------------------------------------------------------------- the training user's libraries


class UserLibsOutput(ParsedModel):
    """LD_LIBRARY_PATH of the training user's login shell, and library -> where it is found (None: not)."""

    ld_library_path: str
    libs: dict[str, str | None]


@parser("user-libs")
def parse_user_libs(text: str) -> UserLibsOutput:
    kind = "user-libs"
    path = None
    libs: dict[str, str | None] = {}
    for line in probe_lines(kind, text):
        parts = line.split(" ", 2)
        if line.startswith("LD_LIBRARY_PATH=") and path is None:
            path = line.split("=", 1)[1]
        elif parts[0] == "lib" and len(parts) == 3 and (parts[2] == "-" or parts[2].startswith("/")):
            libs[parts[1]] = None if parts[2] == "-" else parts[2]
        else:
            raise fail(kind, "expected 'LD_LIBRARY_PATH=...' once, then 'lib NAME PATH|-' lines", line)
    if path is None:
        raise fail(kind, "no 'LD_LIBRARY_PATH=' line", probe_lines(kind, text)[0])
    return UserLibsOutput(ld_library_path=path, libs=libs)


# ---------------------------------------------------------------- set_env.sh scripts


class SetEnvScripts(ParsedModel):
    """The CANN/NNAL set_env.sh scripts present under the install root."""

    paths: list[str]


@parser("set-env")
def parse_set_env(text: str) -> SetEnvScripts:
    kind = "set-env"
    paths = []
    for line in probe_lines(kind, text, allow_empty=True):
        path = line.strip()
        if not (path.startswith("/") and path.endswith("/set_env.sh")):
            raise fail(kind, "expected the path of a set_env.sh script", line)
        paths.append(path)
    return SetEnvScripts(paths=paths)


# ---------------------------------------------------------------- the torch_npu import


class TorchImportOutput(ParsedModel):
    """What `import torch, torch_npu` in the training interpreter reports."""

    torch: str
    torch_npu: str
    npu_available: bool
    device_count: int | None  # None: this torch_npu has no device_count()


_TORCH_KEYS = ("torch", "torch_npu", "npu_available", "device_count")


@parser("torch-import")
def parse_torch_import(text: str) -> TorchImportOutput:
    kind = "torch-import"
    values: dict[str, str] = {}
    where = {}
    lines = probe_lines(kind, text)
    for line in lines:
        key, _, value = line.strip().partition(" ")
        if key not in _TORCH_KEYS or not value or key in values:
            raise fail(
                kind, "expected one 'torch|torch_npu|npu_available|device_count VALUE' line each", line
            )
        values[key], where[key] = value.strip(), line
    missing = [k for k in _TORCH_KEYS if k not in values]
    if missing:
        raise fail(kind, f"no {missing[0]!r} line", lines[-1])
    if values["npu_available"] not in ("True", "False"):
        raise fail(
            kind, f"npu_available is {values['npu_available']!r}, not True or False", where["npu_available"]
        )
    count = values["device_count"]
    if count != "unknown" and not count.isdigit():
        raise fail(kind, f"device_count {count!r} is not a number", where["device_count"])
    return TorchImportOutput(
        torch=values["torch"],
        torch_npu=values["torch_npu"],
        npu_available=values["npu_available"] == "True",
        device_count=None if count == "unknown" else int(count),
    )


# ---------------------------------------------------------------- what the training job imports


class TrainingEnvOutput(ParsedModel):
    """`executable PATH`, then `module NAME found|missing` per module the job imports, then `ascend_ready
    VERSION` (or `ascend_ready - ERROR` where importing it failed), as the training interpreter reports."""

    executable: str
    modules: dict[str, bool]
    ascend_ready: str | None
    ascend_ready_error: str | None = None
    versions: dict[str, str | None] = Field(
        default_factory=dict, description="`dist NAME VERSION|-` lines: installed distribution versions")


@parser("training-env")
def parse_training_env(text: str) -> TrainingEnvOutput:
    kind = "training-env"
    executable = None
    modules: dict[str, bool] = {}
    versions: dict[str, str | None] = {}
    version: tuple[str | None, str | None] | None = None
    lines = probe_lines(kind, text)
    for line in lines:
        key, _, rest = line.partition(" ")
        parts = rest.split(" ")
        if key == "executable" and rest and executable is None and not modules:
            executable = rest
        elif key == "module" and executable and len(parts) == 2 and parts[1] in ("found", "missing"):
            modules[parts[0]] = parts[1] == "found"
        elif key == "ascend_ready" and modules and version is None and rest:
            version = (None, rest[2:] or "failed") if rest.startswith("- ") or rest == "-" else (rest, None)
        elif key == "dist" and version is not None and len(parts) == 2 and all(parts):
            versions[parts[0]] = None if parts[1] == "-" else parts[1]
        else:
            raise fail(kind, "expected 'executable PATH', then 'module NAME found|missing' lines, then "
                             "'ascend_ready VERSION|- ERROR', then 'dist NAME VERSION|-' lines", line)
    if version is None:
        raise fail(kind, "no 'ascend_ready' line", lines[-1])
    return TrainingEnvOutput(executable=executable, modules=modules, ascend_ready=version[0],
                             ascend_ready_error=version[1], versions=versions)
