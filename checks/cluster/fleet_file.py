"""The fleet fingerprint file: what the controller read of every node for the fleet.* checks (`ascend-check
-i INVENTORY --fleet-fingerprints FILE`), for nodes that judge themselves (`ascend-check node`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.errors import ConfigError

__all__ = [
    "FLEET_FINGERPRINTS_VERSION",
    "FleetFingerprints",
    "load_fleet_fingerprints",
    "write_fleet_fingerprints",
]

FLEET_FINGERPRINTS_VERSION = 1


class FleetFingerprints(BaseModel):
    """What the controller read of every node for the fleet.* checks, for nodes that judge themselves."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = FLEET_FINGERPRINTS_VERSION
    created_at: str = ""
    tool_version: str = ""
    fingerprints: dict[str, dict[str, dict[str, str]]] = Field(
        default_factory=dict,
        description='"<check id>:<product>" -> node -> field -> value, as the controller read them',
    )


def write_fleet_fingerprints(snapshot, path: Path) -> FleetFingerprints:
    """Record every reachable host's fleet fingerprints of `snapshot` (profiles resolved) in `path`."""
    from ascend_ready import __version__
    from ascend_ready.checks.report import write_atomic
    from ascend_ready.checks.resources import Host
    from ascend_ready.checks.suite.test_fleet import fleet_fingerprints

    # the suite imports pytest: loaded on a write only
    from ascend_ready.checks.suite.test_sdc import sdc_fingerprints

    hosts = [Host(h, h.profile) for h in snapshot.hosts.values() if h.reachable and h.profile is not None]
    model = FleetFingerprints(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tool_version=__version__,
        fingerprints={**fleet_fingerprints(hosts), **sdc_fingerprints(hosts)},
    )
    try:
        write_atomic(path, model.model_dump_json(indent=1) + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return model


def load_fleet_fingerprints(path: str | Path) -> FleetFingerprints:
    """The fingerprint file, or a launch spec (`ascend-check --launch-spec`): its hosts' stack fingerprints
    are what fleet.stack compares, so a spec serves that check (the other fleet checks then skip)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the fleet fingerprint file {path}: {exc.strerror or exc}",
            hint="write it on the controller: ascend-check -i INVENTORY --fleet-fingerprints FILE, "
            "then copy it to the nodes",
        ) from None
    spec = _launch_spec(text)
    if spec is not None:
        return spec
    try:
        model = FleetFingerprints.model_validate_json(text)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'])) or '(file)'}: {e['msg']}" for e in exc.errors()[:5]]
        raise ConfigError(
            f"{path} is not a fleet fingerprint file:\n  " + "\n  ".join(lines),
            hint="write it again with ascend-check -i INVENTORY --fleet-fingerprints FILE",
        ) from None
    if model.schema_version > FLEET_FINGERPRINTS_VERSION:
        raise ConfigError(
            f"{path} has schema_version {model.schema_version}; this ascend-check reads up to "
            f"{FLEET_FINGERPRINTS_VERSION}",
            hint="upgrade ascend-ready on this node",
        )
    return model


def _launch_spec(text: str) -> FleetFingerprints | None:
    """A launch spec's stack fingerprints as fleet.stack's reference; None when `text` is no launch spec."""
    import json

    from ascend_ready.checks.cluster.launchspec import LaunchSpec

    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict) or "hosts" not in raw or "fingerprints" in raw:
        return None
    try:
        spec = LaunchSpec.model_validate(raw)
    except ValidationError:
        return None
    prints = {name: dict(h.fingerprint) for name, h in spec.hosts.items() if h.fingerprint}
    if not spec.profile or ", " in spec.profile or not prints:
        raise ConfigError(
            "the launch spec holds no stack fingerprints of one product's hosts (made with --skip-preflight, "
            "or for a fleet of several products)",
            hint="write a fleet fingerprint file: ascend-check -i INVENTORY --fleet-fingerprints FILE",
        )
    return FleetFingerprints(
        created_at=spec.created_at.isoformat(timespec="seconds"),
        tool_version=spec.tool_version,
        fingerprints={f"fleet.stack:{spec.profile}": prints},
    )
