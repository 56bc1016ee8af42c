"""Node profiles (hardware x OS identity) of the simulated cluster, read from profiles.yaml.

A profile name is "<hardware>-<os>" (e.g. `a2-centos76`); see profiles.yaml for the parts.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from ascend_ready.errors import ConfigError

HERE = Path(__file__).resolve().parent
OSFILES = HERE / "osfiles"
PYENV_VERSIONS = Path(os.environ.get("ASCEND_SIM_PYENV_VERSIONS", "/root/.pyenv/versions"))


@dataclass(frozen=True)
class OsSpec:
    name: str
    description: str
    python: str  # "system" (Debian's python3) or a pyenv version such as "3.6.15"
    hide: tuple[str, ...]
    glibc: str | None
    knobs: tuple[tuple[str, str], ...] = ()  # kernel-knob values at boot that differ from knobs.DEFAULTS
    knob_choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # where the OS kernel offers other modes
    ldd_line: str | None = None  # first line of `ldd --version`
    ldd_year: str | None = None  # its copyright year
    kernel: str | None = None  # `uname -r`, "{arch}" standing for the machine
    kernel_version: str | None = None  # `uname -v`
    python_shipped: str | None = None  # the python3 the real OS ships (the record; `python` is what runs)

    @property
    def files(self) -> Path:
        return OSFILES / self.name / "root"

    def kernel_release(self, arch: str | None = None) -> str | None:
        """`uname -r` on this OS: "3.10.0-957.el7.x86_64"; None where the node keeps the host's."""
        return None if self.kernel is None else self.kernel.replace("{arch}", arch or os.uname().machine)

    @property
    def python_series(self) -> str | None:
        """"3.6" for "3.6.15"; None for the system interpreter."""
        return None if self.python == "system" else ".".join(self.python.split(".")[:2])

    def python_home(self) -> Path | None:
        """The host's interpreter tree to lend the node; None when it uses the system one or it is absent."""
        if self.python == "system":
            return None
        home = PYENV_VERSIONS / self.python
        return home if (home / "bin" / f"python{self.python_series}").exists() else None


@dataclass(frozen=True)
class Profile:
    name: str
    hardware: str  # a key of ascend_ready.sim.hw.HARDWARE
    os: OsSpec


@functools.cache
def _data() -> dict:
    return yaml.safe_load((HERE / "profiles.yaml").read_text())


def default_profile() -> str:
    return _data()["default"]


def names() -> list[str]:
    data = _data()
    return [f"{hw}-{os_name}" for hw in data["hardware"] for os_name in data["os"]]


def get(name: str) -> Profile:
    data = _data()
    hw, _, os_name = name.partition("-")
    if hw not in data["hardware"] or os_name not in data["os"]:
        raise ConfigError(f"unknown profile {name!r}", hint=f"choose from: {', '.join(names())}")
    spec = data["os"][os_name]
    return Profile(name=name, hardware=data["hardware"][hw], os=OsSpec(
        name=os_name, description=spec["description"], python=str(spec["python"]),
        hide=tuple(spec.get("hide") or ()), glibc=spec.get("glibc"),
        knobs=tuple(sorted((spec.get("knobs") or {}).items())),
        knob_choices=tuple(sorted((k, tuple(v)) for k, v in (spec.get("knob_choices") or {}).items())),
        ldd_line=(spec.get("ldd") or {}).get("line"), ldd_year=(spec.get("ldd") or {}).get("year"),
        kernel=spec.get("kernel"), kernel_version=spec.get("kernel_version"),
        python_shipped=spec.get("python_shipped")))


def os_specs() -> list[OsSpec]:
    """Every OS a profile can play (one OsSpec each)."""
    hw = next(iter(_data()["hardware"]))
    return [get(f"{hw}-{name}").os for name in _data()["os"]]


def assign(count: int, spec: str | None) -> list[Profile]:
    """Profiles for `count` nodes: a comma list cycles over the nodes (node i gets entry i mod len)."""
    wanted = [s.strip() for s in (spec or default_profile()).split(",") if s.strip()]
    if not wanted:
        raise ConfigError("empty --profile", hint=f"choose from: {', '.join(names())}")
    resolved = [get(n) for n in wanted]
    return [resolved[i % len(resolved)] for i in range(count)]
