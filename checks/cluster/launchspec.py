"""The launch spec: the preflight's one answer to "which nodes and devices are good right now".

`ascend-check ... --launch-spec FILE` writes it; `ascend-train` reads it and refuses one that is stale,
that has no healthy host, or whose versions no longer match the nodes. Versioned and schema-published
like the report (`ascend-check schema launch-spec`); a newer version keeps reading older files.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from ascend_ready.checks.catalog import plan
from ascend_ready.checks.cluster.launch_routes import nothing_passed, refuse_unrouted
from ascend_ready.checks.cluster.port_plan import PortPlan
from ascend_ready.checks.cluster.ranktable import build_rank_table, healthy_devices, table_hosts
from ascend_ready.checks.collect import collect
from ascend_ready.checks.parsers.cann_python import parse_training_env
from ascend_ready.checks.parsers.ip_route import nic_toward, parse_ip_addr, parse_ip_route_get
from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import TRAINING_CHECKS
from ascend_ready.checks.report import write_atomic
from ascend_ready.checks.resources import (
    CannComponents,
    DriverVersion,
    FirmwareVersion,
    Host,
    PythonPackages,
    Toolkit,
    probe_ids,
)
from ascend_ready.checks.resources.stack import installed_stack
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import AscendReadyError, ConfigError, ExitCode, ParseError, validation_lines
from ascend_ready.fleet.transport import Target

if TYPE_CHECKING:
    from ascend_ready.checks.report import Report
    from ascend_ready.fleet.transport import Target

__all__ = [
    "LAUNCH_SPEC_SCHEMA_VERSION",
    "AsdSetting",
    "LaunchSpec",
    "LaunchSpecHost",
    "LaunchSpecRefused",
    "asd_setting",
    "load_launch_spec",
    "require_covered",
    "spec_from_report",
    "write_launch_spec",
]

#: 2: what the preflight covered (select, skip, selected_checks; per host judged_checks and training_checks),
#: the waived checks and a content digest. 3: the job's port and role plan (`ports`, optional; the copy a
#: launch writes into its log dir has it). 4: whether the job runs torch_npu's silent-data-corruption
#: detection (`asd`, optional; the launch's copy has it). Every version in READ_VERSIONS still reads.
LAUNCH_SPEC_SCHEMA_VERSION = 4
READ_VERSIONS: tuple[int, ...] = (1, 2, 3, 4)
#: a created_at this far ahead of the controller's clock is refused (two clocks a little apart are not)
CLOCK_SKEW_S = 300
Verdict = Literal["pass", "warn", "fail", "error", "unreachable"]
#: verdicts a host may carry and still be started
STARTABLE: tuple[str, ...] = ("pass", "warn")


class LaunchSpecRefused(AscendReadyError):
    """The launch spec may not be used now (stale, failed hosts only, versions changed): exit 1."""

    exit_code = ExitCode.FAILED


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: torch_npu's in-training detection (Ascend Extension for PyTorch >= 7.1): `NPU_ASD_CONFIG=enable:true,...`
#: checks gradient feature values (BF16 and FP32 only) and, with with_checksum:true, the matmuls of a rank
#: that struck out (BF16 only): docs/en/environment_variable_reference/NPU_ASD_CONFIG.md of Ascend/pytorch
ASD_VARIABLE = "NPU_ASD_CONFIG"
ASD_DTYPES = ("bf16", "fp32")


class AsdSetting(_Model):
    """Whether the job runs torch_npu's silent-data-corruption detection, as its environment sets it."""

    npu_asd_config: str | None = Field(None, description="NPU_ASD_CONFIG as the job's environment gives it "
                                       "(None: unset)")
    enabled: bool = Field(False, description="enable:true in it")
    with_checksum: bool = Field(False, description="with_checksum:true in it (the matmul checksum: BF16)")
    precision: str = Field(description="the job's training dtype (bf16, fp32; auto as the device resolves)")
    warning: str | None = Field(None, description="what the launch said about it, where anything")


def asd_setting(env: Mapping[str, str], precision: str, device: str = "npu") -> AsdSetting:
    """The job's NPU_ASD_CONFIG judged for its dtype: a warning where a BF16/FP32 job on NPUs runs without
    it, or where it does not parse (`key:value` items, comma-separated, as torch_npu reads them)."""
    dtype = precision if precision != "auto" else ("bf16" if device in ("npu", "auto") else "fp32")
    value = env.get(ASD_VARIABLE)
    items: dict[str, str] = {}
    bad = []
    for item in (value or "").split(","):
        key, sep, val = item.strip().partition(":")
        if item.strip() and not (sep and key):
            bad.append(item.strip())
        elif sep:
            items[key.strip()] = val.strip().lower()
    out = AsdSetting(npu_asd_config=value, enabled=items.get("enable") == "true",
                     with_checksum=items.get("with_checksum") == "true", precision=dtype)
    example = f"{ASD_VARIABLE}=enable:true,with_checksum:true"
    if bad:
        out.warning = (f"{ASD_VARIABLE}={value!r}: cannot read {', '.join(map(repr, bad))} (items are "
                       f"key:value, comma-separated, e.g. {example})")
    elif device in ("npu", "auto") and dtype in ASD_DTYPES and not out.enabled:
        said = "is not set" if value is None else f"does not enable it ({value!r})"
        out.warning = (f"this {dtype} job runs without torch_npu's silent-data-corruption detection: "
                       f"{ASD_VARIABLE} {said}; set it in the job's environment (launch.hccl.extra_env: "
                       f"{{{ASD_VARIABLE}: 'enable:true,with_checksum:true'}}), torch_npu >= 7.1")
    elif out.with_checksum and dtype != "bf16":
        out.warning = f"{ASD_VARIABLE}: with_checksum checks BF16 matmuls only; this job trains in {dtype}"
    return out


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
    fingerprint_user: str | None = Field(
        None, description="the training user whose environment the fingerprint was read in (and is re-read)"
    )
    fingerprint_python: str | None = Field(None, description="the interpreter the fingerprint's packages are")
    ssh_port: int | None = Field(None, description="SSH port (None: ssh_config, else 22)")
    ssh_user: str | None = Field(None, description="SSH login user (None: ssh_config, else the local user)")
    ssh_key_file: str | None = Field(None, description="SSH identity file on the controller")
    known_hosts_file: str | None = Field(None, description="known_hosts file to verify the host key against")
    proxy_jump: str | None = Field(None, description="ProxyJump hops, as in ssh_config")
    training_user: str | None = Field(
        None, description="user the job runs as, where the inventory names one (None: the SSH user)"
    )
    python: str | None = Field(
        None, description="the training venv's interpreter on the node, where the inventory names one"
    )
    judged_checks: list[str] | None = Field(
        None, description="ids of the checks the preflight judged on this host (None: schema 1, not recorded)"
    )
    training_checks: list[str] | None = Field(
        None, description="the checks this host's profile requires judged before training (None: schema 1)"
    )

    @property
    def startable(self) -> bool:
        return self.verdict in STARTABLE

    def target(self, name: str) -> Target:
        """How to reach this host over SSH (unset fields fall back to ssh_config, as for ascend-check)."""

        return Target(name=name, address=self.address, port=self.ssh_port, user=self.ssh_user,
                      key_file=self.ssh_key_file, known_hosts_file=self.known_hosts_file,
                      proxy_jump=self.proxy_jump)


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
    checked: bool = Field(
        True, description="False: made without a preflight (--skip-preflight); no host was validated"
    )
    select: list[str] = Field(default_factory=list, description="the preflight's --select globs (empty: all)")
    skip: list[str] = Field(default_factory=list, description="the preflight's --skip globs")
    selected_checks: list[str] | None = Field(
        None, description="ids of the checks the preflight's tier and selection chose (None: schema 1)"
    )
    waived: list[str] = Field(
        default_factory=list, description="checks the operator waived (ascend-check --waive): a launch does "
        "not require them judged, and prints them"
    )
    digest: str | None = Field(
        None, description="sha256 of the spec's content as ascend-check wrote it: a spec edited by hand is "
        "refused (schema 2 on; set on every write)"
    )
    ports: PortPlan | None = Field(
        None, description="the job's port and role plan (schema 3; written by the launch into its own copy "
        "of the spec, <run dir>/logs/<run id>/launch-spec.json)"
    )
    asd: AsdSetting | None = Field(
        None, description="torch_npu's silent-data-corruption detection for the job (NPU_ASD_CONFIG; schema "
        "4, written by the launch into its copy of the spec)"
    )

    @model_serializer(mode="wrap")
    def _with_digest(self, handler, info):
        data = handler(self)
        if isinstance(data, dict) and self.schema_version >= 2 and not (info.context or {}).get("bare"):
            data["digest"] = self.content_digest()
        return data

    def content_digest(self) -> str:
        """sha256 of everything but the digest, as JSON with sorted keys (what a write records)."""

        # a field added later and unset is left out, so the digest of an older spec still holds
        exclude = {"digest"} | {name for name in ("ports", "asd") if getattr(self, name) is None}
        body = self.model_dump(mode="json", exclude=exclude, context={"bare": True})
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def expires_at(self) -> datetime:
        return self.created_at + timedelta(seconds=self.valid_s)

    def startable_hosts(self) -> dict[str, LaunchSpecHost]:
        return {name: h for name, h in self.hosts.items() if h.startable}

    def usable(self, now: datetime | None = None) -> dict[str, LaunchSpecHost]:
        """The hosts to start on; LaunchSpecRefused when the spec is stale or no host may start."""
        now = now or datetime.now(UTC)
        if self.created_at - now > timedelta(seconds=CLOCK_SKEW_S):
            raise LaunchSpecRefused(
                f"the launch spec says it was made at {self.created_at.isoformat(timespec='seconds')}, "
                f"{int((self.created_at - now).total_seconds())} s after this controller's clock "
                f"({now.isoformat(timespec='seconds')})",
                hint="check the clocks (date -u here and where ascend-check ran), then make the spec again: "
                "ascend-check -i INVENTORY --launch-spec FILE",
            )
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
        addresses = {h.address for h in hosts.values()} | {h.ip for h in hosts.values() if h.ip} | set(hosts)
        if self.master_addr and self.master_addr not in addresses:
            raise LaunchSpecRefused(f"the master {self.master_addr} is not a host that passed the preflight",
                                    hint="make the spec again, or name another --master")
        return hosts

    def require_covered(self, waive: Sequence[str] = ()) -> list[str]:
        """Refuse (LaunchSpecRefused) unless the preflight judged, on every host to start, each check the
        host's profile requires for training, less the waived ones; the waived checks, for the launch to
        print. A schema-1 spec recorded no coverage: it is refused as not judged."""
        waived = sorted({*self.waived, *waive})
        require_covered({n: (set(h.judged_checks or ()), h.training_checks)
                         for n, h in self.startable_hosts().items()}, waived, "the launch spec's preflight",
                        narrowed=narrowing(self.tier, self.select, self.skip, self.schema_version))
        return waived

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


def narrowing(tier: str, select: Sequence[str], skip: Sequence[str], schema_version: int) -> str:
    """How the preflight was narrowed, in its own flags (empty: it was not)."""
    if schema_version < 2:
        return "made by an ascend-check that did not record what it judged: schema 1"
    flags = [f"--select {g!r}" for g in select] + [f"--skip {g!r}" for g in skip]
    return " ".join([f"--tier {tier}", *flags]) if flags else ""


def require_covered(hosts: Mapping[str, tuple[set[str], Sequence[str] | None]], waived: Sequence[str],
                    what: str, *, narrowed: str = "") -> None:
    """Refuse (LaunchSpecRefused, exit 1) when `what` did not judge, on some host of `hosts` (name ->
    (ids judged there, ids its profile requires for training; None: the default profile's)), a required
    check that is not `waived`, naming the checks per host (hosts missing the same ones share a line)."""

    missing: dict[tuple[str, ...], list[str]] = {}
    for name, (judged, required) in sorted(hosts.items()):
        gap = tuple(sorted(set(TRAINING_CHECKS if required is None else required) - judged - set(waived)))
        if gap:
            missing.setdefault(gap, []).append(name)
    if not missing:
        return
    lines = "; ".join(f"{', '.join(names)}: {', '.join(gap)}" for gap, names in missing.items())
    raise LaunchSpecRefused(
        f"{what} did not judge every check training needs{f' ({narrowed})' if narrowed else ''}; "
        f"not judged on {lines}",
        hint="run the whole preflight (ascend-check -i INVENTORY --launch-spec FILE, no --select/--skip), "
        "or waive what you must: --waive CHECK (repeatable); --skip-preflight starts with no gate at all",
    )


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
    remake = "make it again: ascend-check -i INVENTORY --launch-spec FILE"
    version = _schema_version(text)
    if version not in READ_VERSIONS:
        newer = isinstance(version, int) and version > LAUNCH_SPEC_SCHEMA_VERSION
        raise ConfigError(f"the launch spec {path} has schema version {version!r}; this ascend-ready reads "
                          f"{', '.join(map(str, READ_VERSIONS))}",
                          hint=("upgrade ascend-ready on the controller, or " if newer else "") + remake)
    try:
        spec = LaunchSpec.model_validate_json(text)
    except ValidationError as exc:

        raise ConfigError(f"the launch spec {path} is not valid:\n  "
                          + "\n  ".join(validation_lines(exc, LaunchSpec)[:8]), hint=remake) from None
    if spec.schema_version >= 2 and spec.digest != spec.content_digest():
        raise LaunchSpecRefused(
            f"the launch spec {path} was changed after ascend-check wrote it "
            f"({'no digest' if spec.digest is None else 'its content digest does not match'})",
            hint=remake + " (a spec edited by hand is never trusted; --skip-preflight starts with no gate)")
    return spec


def _schema_version(text: str) -> object:
    """The file's schema_version as written (1 where absent: the first version had the default)."""

    try:
        data = json.loads(text)
    except ValueError:
        return LAUNCH_SPEC_SCHEMA_VERSION  # not JSON: validation says so, naming the place
    return data.get("schema_version", 1) if isinstance(data, dict) else LAUNCH_SPEC_SCHEMA_VERSION


#: verdict of a host, worst last: unreachable beats every check result
_VERDICT_ORDER: tuple[str, ...] = ("pass", "warn", "error", "fail", "unreachable")


def spec_from_report(
    report: Report | None,
    targets: Sequence[Target],
    *,
    master_addr: str,
    routes: Mapping[str, str],
    addrs: Mapping[str, str] | None = None,
    master_port: int = 29500,
    devices: Mapping[str, tuple[list[int], dict[str, str]]] | None = None,
    fingerprints: Mapping[str, Mapping[str, str]] | None = None,
    training: Mapping[str, tuple[str | None, str | None]] | None = None,
    valid_s: int = 3600,
    profile: str | None = None,
    waived: Sequence[str] = (),
) -> LaunchSpec:
    """The launch spec of `targets` as the preflight `report` judged them (None: not judged, made for
    --skip-preflight: every reachable host is `warn` and the spec says `checked: false`).

    Each host's NIC and address are those of its route to the master: `routes[name]` is the output of
    `ip -o route get MASTER_ADDR` on it; on the master itself that route is local (through `lo`), so
    the NIC is the one `addrs[name]` (`ip -o addr show to MASTER_ADDR`) shows holding the address.
    `devices[name]` is (healthy device ids, excluded id -> reason), e.g. from `healthy_devices`;
    `training[name]` the (training user, interpreter) where the inventory names them.
    """

    addrs, devices, fingerprints, training = addrs or {}, devices or {}, fingerprints or {}, training or {}
    judged = {h.name: h for h in report.hosts} if report is not None else {}
    hosts: dict[str, LaunchSpecHost] = {}
    for t in targets:
        status = judged.get(t.name)
        failed: list[str] = []
        if report is None:
            verdict = "warn"
        elif status is None:
            verdict, failed = "error", ["(the host is not in the preflight report)"]
        elif not status.reachable:
            verdict = "unreachable"
        else:
            mine = [r for r in report.results if r.host == t.name and r.status != "skip"]
            verdict = max((r.status for r in mine), key=_VERDICT_ORDER.index, default="error")
            failed = [r.check_id for r in mine if r.status in ("fail", "error")]
            if not mine:
                failed = ["(no check judged the host)"]
        nic = ip = None
        if t.name in routes:
            route = parse_ip_route_get(routes[t.name])
            held = parse_ip_addr(addrs[t.name]) if route.is_local and t.name in addrs else None
            toward = nic_toward(master_addr, route, held)
            if toward is None:
                raise ConfigError(f"{t.name}: the master address {master_addr} is local, but no NIC "
                                  "holds it in `ip -o addr show`",
                                  hint="give the master's address on its cluster network")
            nic, ip = toward
        healthy, excluded = devices.get(t.name, ([], {}))
        user, python = training.get(t.name, (None, None))
        hosts[t.name] = LaunchSpecHost(
            address=t.address or t.name, verdict=verdict, failed_checks=failed, devices=list(healthy),
            excluded_devices=sorted(int(d) for d in excluded), exclusion_reasons=dict(excluded),
            nic=nic, ip=ip, fingerprint=dict(fingerprints.get(t.name, {})), ssh_port=t.port,
            ssh_user=t.user, ssh_key_file=t.key_file, known_hosts_file=t.known_hosts_file,
            proxy_jump=t.proxy_jump, training_user=user, python=python,
            judged_checks=sorted(report.judged(t.name)) if report is not None else None,
            training_checks=status.training_checks if status is not None else None,
        )
    return LaunchSpec(
        tool_version=report.tool_version if report is not None else "",
        valid_s=valid_s, profile=profile or (report.profile if report is not None else None) or None,
        tier=report.tier if report is not None else "quick", master_addr=master_addr,
        master_port=master_port, hosts=hosts, checked=report is not None,
        select=list(report.select) if report is not None else [],
        skip=list(report.skip) if report is not None else [],
        selected_checks=report.selected_checks if report is not None else None,
        waived=sorted(set(waived)),
    )


#: what a launch spec fingerprints per node, and re-reads at launch: the software stack (fleet.stack)
def fingerprint_hosts(snapshot, profiles: Mapping[str, object]) -> dict[str, dict[str, str]]:
    """component -> version of every reachable host of `snapshot` (what fleet.stack compares)."""

    out: dict[str, dict[str, str]] = {}
    for name, snap in snapshot.hosts.items():
        if not snap.reachable:
            continue
        try:
            stack, _ = installed_stack(Host(snap, profiles[name]))
        except AscendReadyError:
            continue  # not read: check_versions names the host when the spec is used
        out[name] = {k: v or "(not installed)" for k, v in stack.items()}
    return out


def stack_probe_ids() -> set[str]:

    return set(probe_ids([DriverVersion, FirmwareVersion, Toolkit, CannComponents, PythonPackages]))


def current_fingerprints(targets: Sequence[Target], fanout, profiles: Mapping[str, object]) -> dict:
    """Read every target's stack again now (one batch each): what `LaunchSpec.check_versions` compares."""

    wanted = stack_probe_ids()
    hosts = collect(list(targets), lambda t: (plan(profiles[t.name], wanted), profiles[t.name].training_user),
                    fanout)
    return fingerprint_hosts(Snapshot(hosts={h.name: h for h in hosts}), profiles)


def training_interpreter(host) -> str | None:
    """The training interpreter's path as the training-env probe read it on the node (None: not read, or
    unreadable: versions.training_env says why)."""

    res = host.probes.get("training-env") if host is not None else None
    if res is None or res.rc != 0:
        return None
    try:
        return parse_training_env(res.stdout).executable
    except ParseError:
        return None


def make_launch_spec(report: Report, snapshot, targets: Sequence[Target], fanout, *,
                     valid_s: int = 3600, master_port: int = 29500, waived: Sequence[str] = (),
                     note: Callable[[str], None] = lambda line: None) -> LaunchSpec:
    """The launch spec `ascend-check --launch-spec FILE` writes after a live run: per host its verdict,
    healthy devices, stack fingerprint and the NIC with the route to the master (the first host that
    passed, as the node resolves it), and the HCCL rank table of the healthy devices where their device
    IPs were read (else `note` says why there is none)."""

    profiles = {name: h.profile for name, h in snapshot.hosts.items() if h.profile is not None}
    passed = [t for t in targets if any(r.host == t.name for r in report.results)
              and all(r.status in ("pass", "warn", "skip") for r in report.results if r.host == t.name)]
    if not passed:  # hook (ops-launch, launch_routes.py): say what the results really are

        message, hint = nothing_passed(report, targets)
        raise LaunchSpecRefused(message, hint=hint)
    master = passed[0].address or passed[0].name

    q = shlex.quote(master)
    probes = [Probe("route", shell=f"ip -o route get {q}"), Probe("addr", shell=f"ip -o addr show to {q}")]
    reachable = [t for t in targets if t.name in snapshot.hosts and snapshot.hosts[t.name].reachable]
    routes, addrs, route_errors = {}, {}, {}
    for snap in collect(reachable, lambda t: (list(probes), "root"), fanout):
        for pid, into in (("route", routes), ("addr", addrs)):
            res = snap.probes.get(pid)
            if res is not None and res.rc == 0 and res.stdout.strip():
                into[snap.name] = res.stdout
            elif res is not None and pid == "route":
                route_errors[snap.name] = res.stderr or res.stdout
    devices = {name: healthy_devices(h) for name, h in snapshot.hosts.items()}
    # The stack is read in this run's batch when the selected checks read it, else once more now.
    have = all(stack_probe_ids() <= set(h.probes) for h in snapshot.hosts.values() if h.reachable)
    fingerprints = (fingerprint_hosts(snapshot, profiles) if have else
                    current_fingerprints([t for t in reachable if t.name in profiles], fanout, profiles))
    spec = spec_from_report(report, targets, master_addr=master, routes=routes, addrs=addrs,
                            master_port=master_port, devices=devices, fingerprints=fingerprints,
                            valid_s=valid_s, waived=waived)
    # hook (ops-launch, launch_routes.py): a host without a route toward the master may not start

    for line in refuse_unrouted(spec, route_errors):
        note(f"not startable: {line}")
    for name, host in spec.hosts.items():
        if name in profiles:  # whose environment the stack was read in: the launch reads it there again
            host.fingerprint_user = profiles[name].training_user
            host.fingerprint_python = profiles[name].python
        # the interpreter the gate judged (versions.training_env), as the node expanded its path: the job
        # runs there, not in the controller's own
        host.python = host.python or training_interpreter(snapshot.hosts.get(name))
    startable = spec.startable_hosts()
    servers, left_out = table_hosts(snapshot, {n: (h.ip or h.address, h.devices)
                                               for n, h in startable.items()})
    if servers and len(servers) == len(startable):
        spec.rank_table = build_rank_table(servers)
    elif startable:
        read = [n for n in startable if any(p.startswith("hccn-ip.") for p in snapshot.hosts[n].probes)]
        kept = {s.name for s in servers}
        why = "; ".join(f"{n} ({'; '.join(w)})" for n, w in left_out.items() if n not in kept and n in read)
        note("no rank table: " + (why or "the selected checks read no device IP")
             + " (hccl.ip reads device IPs, npu.* the healthy devices; or write the table alone: "
             "--rank-table FILE)")
    return spec


def write_launch_spec(path: Path, report: Report, snapshot, targets: Sequence[Target], fanout, *,
                      valid_s: int = 3600, waived: Sequence[str] = (),
                      note: Callable[[str], None] = lambda line: None) -> LaunchSpec:
    """`ascend-check --launch-spec FILE`: make the spec (make_launch_spec) and write it; `note` gets what
    it says on the way and the line naming the file."""

    spec = make_launch_spec(report, snapshot, targets, fanout, valid_s=valid_s, waived=waived,
                            note=lambda line: note(f"launch spec: {line}"))
    write_atomic(path, spec.model_dump_json(indent=1) + "\n")
    note(f"launch spec: {path} ({len(spec.startable_hosts())} of {len(spec.hosts)} host(s) may start, "
         f"valid {valid_s} s)")
    return spec
