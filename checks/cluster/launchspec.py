"""The launch spec: the preflight's one answer to "which nodes and devices are good right now".

`ascend-check ... --launch-spec FILE` writes it; `ascend-train` reads it and refuses one that is stale,
that has no healthy host, or whose versions no longer match the nodes. Versioned and schema-published
like the report (`ascend-check schema launch-spec`); a newer version keeps reading older files.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.errors import AscendReadyError, ConfigError, ExitCode

__all__ = [
    "LAUNCH_SPEC_SCHEMA_VERSION",
    "LaunchSpec",
    "LaunchSpecHost",
    "LaunchSpecRefused",
    "load_launch_spec",
]

LAUNCH_SPEC_SCHEMA_VERSION = 1
Verdict = Literal["pass", "warn", "fail", "error", "unreachable"]
#: verdicts a host may carry and still be started
STARTABLE: tuple[str, ...] = ("pass", "warn")


class LaunchSpecRefused(AscendReadyError):
    """The launch spec may not be used now (stale, failed hosts only, versions changed): exit 1."""

    exit_code = ExitCode.FAILED


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchSpecHost(_Model):
    """One node as the preflight judged it, and how the job reaches it."""

    address: str = Field(description="SSH address of the node (inventory ansible_host or name)")
    verdict: Verdict = Field(description="the worst check result of the node")
    failed_checks: list[str] = Field(default_factory=list, description="ids of checks that failed or errored")
    devices: list[int] = Field(
        default_factory=list, description="healthy device ids (ASCEND_RT_VISIBLE_DEVICES)"
    )
    excluded_devices: list[int] = Field(default_factory=list, description="devices left out, and why below")
    exclusion_reasons: dict[str, str] = Field(default_factory=dict, description="device id -> reason")
    nic: str | None = Field(None, description="host NIC with the route to the master (HCCL_SOCKET_IFNAME)")
    ip: str | None = Field(None, description="this node's address on that NIC (HCCL_IF_IP)")
    fingerprint: dict[str, str] = Field(default_factory=dict, description="versions and settings as read")

    @property
    def startable(self) -> bool:
        return self.verdict in STARTABLE


class LaunchSpec(_Model):
    schema_version: int = LAUNCH_SPEC_SCHEMA_VERSION
    tool_version: str = ""
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    valid_s: int = Field(3600, ge=1, description="seconds after created_at until the spec is stale")
    profile: str | None = Field(None, description="the hardware profile the hosts were judged against")
    tier: str = "quick"
    master_addr: str | None = Field(None, description="rank 0's node address (MASTER_ADDR)")
    master_port: int = Field(29500, ge=1, le=65535, description="MASTER_PORT")
    hosts: dict[str, LaunchSpecHost] = Field(default_factory=dict, description="inventory name -> node")
    fleet_deviations: list[str] = Field(default_factory=list, description="fleet.* findings, one line each")
    rank_table: dict | None = Field(None, description="HCCL rank table (hccl.json) of the healthy devices")

    @property
    def expires_at(self) -> datetime:
        return self.created_at + timedelta(seconds=self.valid_s)

    def startable_hosts(self) -> dict[str, LaunchSpecHost]:
        return {name: h for name, h in self.hosts.items() if h.startable}

    def usable(self, now: datetime | None = None) -> dict[str, LaunchSpecHost]:
        """The hosts to start on; LaunchSpecRefused when the spec is stale or no host may start."""
        now = now or datetime.now(UTC)
        if now > self.expires_at:
            age = int((now - self.created_at).total_seconds())
            raise LaunchSpecRefused(
                f"the launch spec was made {age} s ago and was valid for {self.valid_s} s "
                f"(until {self.expires_at.isoformat(timespec='seconds')})",
                hint="run the preflight again: ascend-check -i INVENTORY --launch-spec FILE",
            )
        hosts = self.startable_hosts()
        if not hosts:
            bad = ", ".join(f"{n} ({h.verdict}: {', '.join(h.failed_checks) or 'see the report'})"
                            for n, h in sorted(self.hosts.items()))
            raise LaunchSpecRefused(f"no host of the launch spec passed the preflight: {bad}",
                                    hint="fix the failed checks (ascend-check list shows each fix), then "
                                         "run the preflight again")
        if self.master_addr and self.master_addr not in {h.address for h in hosts.values()} | set(hosts):
            raise LaunchSpecRefused(f"the master {self.master_addr} is not a host that passed the preflight",
                                    hint="make the spec again, or name another --master")
        return hosts

    def check_versions(self, current: Mapping[str, Mapping[str, str]]) -> None:
        """Refuse when a node's fingerprint (read again now) differs from the one the spec recorded."""
        changed = []
        for name, host in sorted(self.startable_hosts().items()):
            now = current.get(name)
            if now is None:
                changed.append(f"{name}: could not be read again")
                continue
            for field, then in sorted(host.fingerprint.items()):
                if str(now.get(field)) != then:
                    changed.append(f"{name}: {field} was {then}, is now {now.get(field, '(not read)')}")
        if changed:
            raise LaunchSpecRefused("the nodes changed since the launch spec was made: " + "; ".join(changed),
                                    hint="run the preflight again to make a spec of the nodes as they are")


def load_launch_spec(path: str | Path) -> LaunchSpec:
    """Read and validate a launch spec; a missing, unreadable or malformed file is a ConfigError (exit 2)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the launch spec {path}: {exc.strerror}",
                          hint="pass the file `ascend-check --launch-spec FILE` wrote") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"the launch spec {path} is not UTF-8 text",
                          hint="pass the JSON file `ascend-check --launch-spec FILE` wrote") from None
    try:
        spec = LaunchSpec.model_validate_json(text)
    except ValidationError as exc:
        lines = [f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()[:8]]
        raise ConfigError(f"the launch spec {path} is not valid:\n  " + "\n  ".join(lines),
                          hint="make it again with this version of ascend-check") from None
    if spec.schema_version > LAUNCH_SPEC_SCHEMA_VERSION:
        raise ConfigError(f"the launch spec {path} has schema version {spec.schema_version}; "
                          f"this ascend-ready reads up to {LAUNCH_SPEC_SCHEMA_VERSION}",
                          hint="upgrade ascend-ready on the controller")
    return spec
