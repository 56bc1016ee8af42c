"""Snapshots: every raw command output a host's checks read, as collected, so judging never needs the network.

On-disk layout (`ascend-check collect -o DIR`, read back by `ascend-check --snapshot DIR`):

    DIR/manifest.json              Snapshot without the outputs: schema_version, created_at, tool
                                   version, the tier/select/skip it was collected for, and per host:
                                   address, groups, vars, the resolved profile, reachable, error,
                                   and per probe: command, rc, duration_s, timed_out, timeout_s
                                   (and not_run, for a probe that was never started)
    DIR/<host>/<probe>.out         the probe's stdout, byte for byte
    DIR/<host>/<probe>.err         its stderr (only when non-empty)
    DIR/<host>/<probe>.meta.json   command, rc, duration_s, timed_out, timeout_s (also in manifest)

Fields added since schema_version 1 first shipped (`not_run`, `profile`, `tier`, `select`, `skip`) are
optional, so snapshots written before them still load.

Per-device probes are named `<probe>.<key>` (e.g. `hccn-link.3`, `npu-smi-health.0.0`).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.errors import ConfigError

__all__ = [
    "SNAPSHOT_SCHEMA_VERSION",
    "HostSnapshot",
    "ProbeResult",
    "Snapshot",
    "load_snapshot",
    "save_snapshot",
]

SNAPSHOT_SCHEMA_VERSION = 1
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProbeResult(_Model):
    """What one probe printed and how it ended."""

    command: str = Field(description="the command as run on the node")
    rc: int = Field(description="exit status; 124/137 when `timeout` stopped it")
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = Field(False, description="stopped by its own time limit or by the host deadline")
    timeout_s: float | None = Field(None, description="the time limit it ran under")
    not_run: str | None = Field(
        None,
        description="why the probe was never started (e.g. 'host deadline of 60 s', '`hccn_tool` timed "
        "out earlier in this batch'); null when it ran. Its checks report an error naming the command",
    )


class HostSnapshot(_Model):
    """All probes of one host, plus how the host was reached."""

    name: str
    address: str | None = None
    groups: list[str] = Field(default_factory=list)
    vars: dict[str, str] = Field(default_factory=dict, description="inventory variables that affect checks")
    profile: HardwareProfile | None = Field(
        None,
        description="the hardware profile the host was collected for, as resolved then (inventory, "
        "--profile, group overrides, training user and interpreter); judging uses it unless told "
        "otherwise. Absent in snapshots of older versions: then it is resolved from vars",
    )
    reachable: bool = True
    error: str | None = Field(None, description="why the host could not be reached or the batch failed")
    collect_s: float = 0.0
    probes: dict[str, ProbeResult] = Field(default_factory=dict)


class Snapshot(_Model):
    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    tool_version: str = ""
    tier: Literal["quick", "full", "burn-in"] | None = Field(
        None, description="--tier the snapshot was collected for (judging defaults to it)"
    )
    select: list[str] | None = Field(
        None, description="--select globs it was collected for (judging defaults to them)"
    )
    skip: list[str] | None = Field(
        None, description="--skip globs it was collected for (judging defaults to them)"
    )
    hosts: dict[str, HostSnapshot] = Field(default_factory=dict)


def _safe(name: str, what: str) -> str:
    if not _SAFE.match(name) or name in (".", ".."):
        raise ConfigError(
            f"{what} {name!r} cannot be used as a file name in a snapshot",
            hint="host and probe names may use letters, digits, '.', '_' and '-'",
        )
    return name


def save_snapshot(snap: Snapshot, directory: Path) -> None:
    """Write `snap` in the documented layout; the directory may exist but must not hold another snapshot."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    manifest = snap.model_dump(mode="json")
    for host_name, host in snap.hosts.items():
        hdir = directory / _safe(host_name, "host")
        hdir.mkdir(exist_ok=True)
        for probe_id, result in host.probes.items():
            _safe(probe_id, "probe")
            # not_run only where set: a probe that ran has the same meta.json as before the field.
            drop = {"stdout", "stderr"} | (set() if result.not_run else {"not_run"})
            meta = result.model_dump(mode="json", exclude=drop)
            (hdir / f"{probe_id}.out").write_text(result.stdout)
            if result.stderr:
                (hdir / f"{probe_id}.err").write_text(result.stderr)
            (hdir / f"{probe_id}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
            manifest["hosts"][host_name]["probes"][probe_id] = meta
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


_RECOLLECT = "the snapshot is damaged or not one: collect it again with `ascend-check collect -o DIR`"


def _not_text(path: Path, exc: UnicodeDecodeError) -> ConfigError:
    # collect saves outputs as UTF-8 text (undecodable bytes replaced), so other bytes mean damage
    return ConfigError(f"{path} is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})",
                       hint=_RECOLLECT)


def load_snapshot(directory: Path) -> Snapshot:
    """Read a snapshot directory; a missing or malformed one is a ConfigError that says what is wrong."""
    from ascend_ready.paths import check_input_path

    directory = Path(directory)
    check_input_path(directory, "the snapshot directory", directory=True,
                     hint="give a directory `ascend-check collect -o DIR` wrote")
    path = directory / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            f"{directory} is not a snapshot: no manifest.json",
            hint="create one with `ascend-check collect -o DIR`",
        ) from None
    except UnicodeDecodeError as exc:
        raise _not_text(path, exc) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", hint=_RECOLLECT) from None
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SNAPSHOT_SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: unsupported snapshot schema_version "
            f"{manifest.get('schema_version') if isinstance(manifest, dict) else None!r}",
            hint=f"this ascend-check reads schema_version {SNAPSHOT_SCHEMA_VERSION}",
        )
    for host_name, host in (manifest.get("hosts") or {}).items():
        hdir = directory / _safe(host_name, "host")
        for probe_id, meta in (host.get("probes") or {}).items():
            _safe(probe_id, "probe")
            out, err = hdir / f"{probe_id}.out", hdir / f"{probe_id}.err"
            try:
                meta["stdout"] = out.read_text()
                meta["stderr"] = err.read_text() if err.exists() else ""
            except FileNotFoundError:
                raise ConfigError(
                    f"snapshot {directory} lists {host_name}/{probe_id} but {out} is missing", hint=_RECOLLECT
                ) from None
            except UnicodeDecodeError as exc:
                raise _not_text(err if "stdout" in meta else out, exc) from None
            except OSError as exc:
                raise ConfigError(f"cannot read {out}: {exc.strerror or exc}", hint=_RECOLLECT) from None
    try:
        return Snapshot.model_validate(manifest)
    except ValidationError as exc:
        from ascend_ready.errors import validation_lines

        lines = validation_lines(exc, Snapshot)
        raise ConfigError(f"{path} is not a valid snapshot manifest:\n  " + "\n  ".join(lines),
                          hint=_RECOLLECT) from None
