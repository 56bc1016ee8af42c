"""Parsers of the Python side of a node: `pip list`, `pip show`, and the torch/torch_npu version probe.

The probe is `TORCH_VERSIONS_PROBE` (run with the training interpreter: `python3 -c "$PROBE"`); it
works on Python 3.6+ without importing torch (importing torch_npu needs CANN and takes seconds) and
prints one `name=version` line per package, `name=NOT_INSTALLED` when absent, plus `python=X.Y.Z`:

    python=3.10.13
    torch=2.1.0
    torch_npu=2.1.0.post10
"""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import content, text_lines
from ascend_ready.checks.parsers.base import Line, ParsedModel, fail, parser

#: The probe whose output kind "torch-versions" reads (Python 3.6 compatible: no f-strings needed by
#: old targets, importlib.metadata with a pkg_resources fallback).
TORCH_VERSIONS_PROBE = r"""
import sys
try:
    from importlib.metadata import version as _v, PackageNotFoundError as _E
except ImportError:
    import pkg_resources
    _E = pkg_resources.DistributionNotFound
    def _v(name):
        return pkg_resources.get_distribution(name).version
print("python=%d.%d.%d" % sys.version_info[:3])
for name in ("torch", "torch_npu", "transformers", "trl", "accelerate", "deepspeed", "mindspeed"):
    try:
        print("%s=%s" % (name, _v(name)))
    except _E:
        print("%s=NOT_INSTALLED" % name)
""".strip()

_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
#: PEP 440 public + local versions, and the legacy forms pip still lists
_VERSION_RE = re.compile(r"^v?\d+(?:\.\d+)*(?:[._-]?(?:a|b|rc|alpha|beta|c|pre|preview)\.?\d*)?"
                         r"(?:[._-]?(?:post|rev|r)\.?\d*)?(?:[._-]?dev\.?\d*)?(?:\+[A-Za-z0-9.]+)?$", re.I)
_ECHO_RE = re.compile(r"^(?:\$ )?(?:sudo )?(?:python\d?(?:\.\d+)? -m )?"
                      r"pip\d?(?:\.\d+)? (?:list|show|freeze)\b")


def normalize_name(name: str) -> str:
    """PEP 503 name: `torch-npu`, `torch_npu`, `Torch.NPU` -> `torch-npu`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _version(kind: str, value: str, line: Line) -> str:
    if not _VERSION_RE.match(value):
        raise fail(kind, f"not a package version: {value!r}", line)
    return value


class PipList(ParsedModel):
    """`pip list` (any `| grep` of it, or `--format=freeze`): installed distributions by normalized name."""

    packages: dict[str, str]
    #: editable installs' project locations (`pip list` third column), by normalized name
    locations: dict[str, str]

    def version(self, name: str) -> str | None:
        return self.packages.get(normalize_name(name))


@parser("pip-list")
def parse_pip_list(text: str) -> PipList:
    """Parse `pip list`; header, `----` rule and echoed `pip list | grep ...` lines are skipped."""
    kind = "pip-list"
    packages: dict[str, str] = {}
    locations: dict[str, str] = {}
    for line in content(text_lines(kind, text)):
        stripped = line.strip()
        if _ECHO_RE.match(stripped) or re.fullmatch(r"Package\s+Version(\s+.*)?", stripped) \
                or re.fullmatch(r"-+(\s+-+)*", stripped):
            continue
        if stripped.startswith(("WARNING:", "DEPRECATION:", "[notice]")):
            continue
        # `pip list --format=freeze` / `pip freeze` lines: name==version
        cells = stripped.split("==", 1) if "==" in stripped else stripped.split()
        if len(cells) not in (2, 3, 4) or not _NAME_RE.match(cells[0]):
            raise fail(kind, "expected 'name  version [location]'", line)
        name = normalize_name(cells[0])
        if name in packages:
            raise fail(kind, f"{cells[0]} listed twice", line)
        packages[name] = _version(kind, cells[1], line)
        if len(cells) > 2:
            locations[name] = " ".join(cells[2:])
    if not packages:
        raise fail(kind, "no packages listed", hint="the package is not installed, or pip ran in another env")
    return PipList(packages=packages, locations=locations)


class PipShow(ParsedModel):
    """`pip show NAME [NAME ...]`: one entry per package, by normalized name."""

    packages: dict[str, dict[str, str]]

    def version(self, name: str) -> str | None:
        return self.packages.get(normalize_name(name), {}).get("Version")


@parser("pip-show")
def parse_pip_show(text: str) -> PipShow:
    kind = "pip-show"
    packages: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    last_key = None
    for line in content(text_lines(kind, text)):
        if _ECHO_RE.match(line.strip()):
            continue
        if line.strip() == "---":
            current = None
            continue
        if line[:1].isspace() and current is not None and last_key is not None:
            current[last_key] += "\n" + line.strip()  # folded License/Description lines
            continue
        key, sep, value = line.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z-]*", key):
            raise fail(kind, "expected 'Field: value'", line)
        if key == "Name":
            if not _NAME_RE.match(value.strip()):
                raise fail(kind, f"not a package name: {value.strip()!r}", line)
            current = packages.setdefault(normalize_name(value.strip()), {})
        elif current is None:
            raise fail(kind, f"{key!r} before 'Name:'", line)
        elif key == "Version":
            _version(kind, value.strip(), line)
        current[key] = value.strip()
        last_key = key
    for name, fields in packages.items():
        if "Version" not in fields:
            raise fail(kind, f"package {name} has no 'Version:'")
    if not packages:
        raise fail(kind, "no 'Name:' entries")
    return PipShow(packages=packages)


class TorchNpuVersion(ParsedModel):
    """A torch_npu version split into what compatibility checks compare."""

    #: the torch release it is built for: `2.1.0`
    torch_release: str
    post: int | None
    #: nightly build date `20241009` (from `.devYYYYMMDD`)
    dev_date: str | None
    #: `+gitXXXX` / `+cpu` local label
    local: str | None


_TORCH_NPU_RE = re.compile(r"^(?P<rel>\d+\.\d+(?:\.\d+)?)(?:rc\d+)?(?:\.post(?P<post>\d+))?"
                           r"(?:\.dev(?P<dev>\d{8}))?(?:\+(?P<local>[A-Za-z0-9.]+))?$")


def split_torch_npu_version(version: str) -> TorchNpuVersion | None:
    """`2.1.0.post8.dev20241009` -> (2.1.0, 8, 20241009); None if not of the torch_npu form."""
    match = _TORCH_NPU_RE.match(version)
    if not match:
        return None
    return TorchNpuVersion(torch_release=match["rel"], post=int(match["post"]) if match["post"] else None,
                           dev_date=match["dev"], local=match["local"])


def major_minor(version: str) -> str | None:
    """`2.1.0.post8` -> `2.1`; `2.5.1+cpu` -> `2.5`."""
    match = re.match(r"^v?(\d+)\.(\d+)", version)
    return f"{match[1]}.{match[2]}" if match else None


class TorchVersions(ParsedModel):
    """Output of TORCH_VERSIONS_PROBE: None for packages that are not installed."""

    python: str | None
    packages: dict[str, str | None]
    torch_npu: TorchNpuVersion | None

    def version(self, name: str) -> str | None:
        return self.packages.get(normalize_name(name))


@parser("torch-versions")
def parse_torch_versions(text: str) -> TorchVersions:
    kind = "torch-versions"
    python = None
    packages: dict[str, str | None] = {}
    for line in content(text_lines(kind, text)):
        name, sep, value = line.strip().partition("=")
        if not sep or not _NAME_RE.match(name):
            raise fail(kind, "expected 'name=version' (output of TORCH_VERSIONS_PROBE)", line)
        if name == "python":
            if not re.fullmatch(r"\d+\.\d+\.\d+", value):
                raise fail(kind, f"unreadable python version {value!r}", line)
            python = value
            continue
        key = normalize_name(name)
        if key in packages:
            raise fail(kind, f"{name} printed twice", line)
        packages[key] = None if value == "NOT_INSTALLED" else _version(kind, value, line)
    if "torch" not in packages:
        raise fail(kind, "no 'torch=' line", hint="run TORCH_VERSIONS_PROBE with the training interpreter")
    npu = packages.get("torch-npu")
    return TorchVersions(python=python, packages=packages,
                         torch_npu=None if npu is None else split_torch_npu_version(npu))
