"""Fan-out: run each host's probe batch in ONE exec (paramiko SSH, or /bin/sh locally) under a deadline.

SSH honours ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump), verifies host keys against
known_hosts (trust-on-first-use only when asked), and never lets one slow or dead host hold up the run.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.checks.probes import Probe, ProbeStream, build_script, new_stream
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult

__all__ = ["LOCAL", "FanoutOptions", "Target", "collect", "collect_host"]

#: Target.address of the node ascend-check itself runs on (no SSH).
LOCAL = "local"


@dataclass
class Target:
    """A host to check, as the inventory or --hosts named it; None fields fall back to ~/.ssh/config."""

    name: str
    address: str | None = None
    port: int | None = None
    user: str | None = None
    key_file: str | None = None
    known_hosts_file: str | None = None
    proxy_jump: str | None = None
    groups: list[str] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.address == LOCAL


@dataclass
class FanoutOptions:
    concurrency: int = 32
    probe_timeout_s: float = 10.0
    host_deadline_s: float = 60.0
    connect_timeout_s: float = 10.0
    trust_on_first_use: bool = False
    known_hosts_file: str | None = None
    ssh_config_file: str | None = None


def collect(
    targets: Sequence[Target],
    plan: Callable[[Target], tuple[list[Probe], str]],
    options: FanoutOptions,
    progress: Callable[[HostSnapshot], None] | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> list[HostSnapshot]:
    """Run every target's batch with bounded concurrency; `plan(target)` gives (probes, training user).

    Results come back in target order; `progress` is called as each host finishes. `while_waiting` runs
    in the calling thread once every host has started (the hosts mostly wait on their nodes).
    """

    def one(target: Target) -> HostSnapshot:
        probes, user = plan(target)
        snap = collect_host(target, probes, options, user=user)
        if progress is not None:
            progress(snap)
        return snap

    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(options.concurrency, len(targets)))) as pool:
        futures = [pool.submit(one, t) for t in targets]
        if while_waiting is not None:
            while_waiting()
        return [f.result() for f in futures]


def collect_host(
    target: Target, probes: Sequence[Probe], options: FanoutOptions, *, user: str = "root"
) -> HostSnapshot:
    """One host's snapshot. Never raises for the host's faults: they land in `.reachable`/`.error`."""
    started = time.monotonic()
    script, nonce = build_script(probes, default_timeout_s=options.probe_timeout_s, user=user)
    stream = new_stream(nonce, probes, default_timeout_s=options.probe_timeout_s)
    snap = HostSnapshot(
        name=target.name, address=target.address, groups=list(target.groups), vars=dict(target.vars)
    )
    deadline = started + options.host_deadline_s
    try:
        if target.is_local:
            _run_local(script, stream, deadline)
        else:
            _run_ssh(target, script, stream, deadline, options)
    except _Unreachable as exc:
        snap.reachable = False
        snap.error = str(exc)
    if snap.reachable and not stream.complete:
        snap.error = snap.error or (
            f"the probe batch did not finish within the host deadline of {options.host_deadline_s:g} s"
        )
        stream.finish(snap.error)
    snap.probes = dict(stream.results)
    if snap.reachable and not stream.complete:
        _mark_missing(snap, probes, snap.error)
    snap.collect_s = round(time.monotonic() - started, 3)
    return snap


def _mark_missing(snap: HostSnapshot, probes: Sequence[Probe], why: str) -> None:
    """Probes that never reported get a timed-out result, so their checks fail naming the command."""
    for probe in probes:
        if probe.foreach is not None and any(k.startswith(probe.id + ".") for k in snap.probes):
            continue
        if probe.id not in snap.probes:
            snap.probes[probe.id] = ProbeResult(
                command=probe.command, rc=-1, stderr=why, timed_out=True, timeout_s=probe.timeout_s
            )


class _Unreachable(Exception):
    pass


def _run_local(script: str, stream: ProbeStream, deadline: float) -> None:
    proc = subprocess.Popen(
        ["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(script.encode(), timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        # The whole batch ran out of time: stop it and keep what it had already printed. `timeout`
        # puts each probe in a process group of its own, so the whole tree goes, not one group.
        _kill_tree(proc.pid)
        out, _ = proc.communicate()
    stream.feed(out)


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        # The shell first: with its child gone first it would go on and report the probe as finished.
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


# ---------------------------------------------------------------- SSH

_known_hosts_lock = threading.Lock()
_parsed_lock = threading.Lock()
_parsed: dict[tuple[str, str], tuple[tuple[int, int], object]] = {}


def _parsed_file(kind: str, path: Path, parse: Callable[[Path], object], empty: Callable[[], object]):
    """`parse(path)`, once per file version (mtime and size) for the whole fan-out, not once per host:
    a known_hosts of a few thousand lines parsed for each of 32 hosts costs more than the checks."""
    try:
        st = path.stat()
    except OSError:
        return empty()
    stamp = (st.st_mtime_ns, st.st_size)
    with _parsed_lock:
        hit = _parsed.get((kind, str(path)))
        if hit is None or hit[0] != stamp:
            hit = (stamp, parse(path))
            _parsed[(kind, str(path))] = hit
        return hit[1]


def _ssh_config(options: FanoutOptions):
    import paramiko

    def parse(path: Path):
        config = paramiko.SSHConfig()
        with path.open() as fh:
            config.parse(fh)
        return config

    path = Path(options.ssh_config_file or Path.home() / ".ssh" / "config")
    return _parsed_file("ssh_config", path, parse, paramiko.SSHConfig)


def _known_keys(path: Path, hostkey_name: str) -> dict:
    """The key types and keys `path` (a known_hosts file) records for `hostkey_name` (hashed names too)."""
    import paramiko

    keys = _parsed_file("known_hosts", path, lambda p: paramiko.HostKeys(str(p)), paramiko.HostKeys)
    return dict(keys.lookup(hostkey_name) or {})


def _endpoint(spec: str) -> Target:
    """`[user@]host[:port]` (a ProxyJump hop or a --hosts entry) as a Target."""
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):  # [v6addr]:port
        host, _, rest = hostport[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") else None
    elif hostport.count(":") == 1:
        host, p = hostport.split(":")
        port = int(p)
    return Target(name=host, address=host, port=port, user=user or None)


class _TrustOnFirstUse:
    """Accept an unknown host key once and record it, so the next run verifies it."""

    def __init__(self, path: Path):
        self.path = path

    def missing_host_key(self, client, hostname, key):  # paramiko's MissingHostKeyPolicy protocol
        client.get_host_keys().add(hostname, key.get_name(), key)
        with _known_hosts_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def _connect(target: Target, options: FanoutOptions, deadline: float, hops: int = 0):
    """An authenticated paramiko client to `target`, through its ProxyJump hops if any."""
    import paramiko

    if hops > 8:
        raise _Unreachable(f"{target.name}: ProxyJump chain longer than 8 hops (a loop?)")
    cfg = _ssh_config(options).lookup(target.address or target.name)
    hostname = cfg.get("hostname", target.address or target.name)
    port = target.port or int(cfg.get("port", 22))
    user = target.user or cfg.get("user") or getpass.getuser()
    keys = (
        [target.key_file] if target.key_file else [os.path.expanduser(k) for k in cfg.get("identityfile", [])]
    )
    jump = target.proxy_jump or cfg.get("proxyjump")
    known = target.known_hosts_file or options.known_hosts_file
    where = f"{user}@{hostname}:{port}"

    sock = None
    jump_client = None
    if jump and jump.lower() != "none":
        first, _, rest = jump.partition(",")
        hop = _endpoint(first.strip())
        hop.proxy_jump = rest.strip() or None
        jump_client = _connect(hop, options, deadline, hops + 1)
        try:
            sock = jump_client.get_transport().open_channel(
                "direct-tcpip",
                (hostname, port),
                ("127.0.0.1", 0),
                timeout=_left(deadline, options.connect_timeout_s),
            )
        except (paramiko.SSHException, OSError) as exc:
            jump_client.close()
            raise _Unreachable(f"cannot reach {where} through ProxyJump {first.strip()}: {exc}") from None

    client = paramiko.SSHClient()
    known_path = Path(os.path.expanduser(known)) if known else Path.home() / ".ssh" / "known_hosts"
    # Only this host's entries, as paramiko would find them in the user's known_hosts and then the
    # inventory's (where both know a key type, the user's file wins, as in paramiko's own lookup).
    hostkey_name = hostname if port == 22 else f"[{hostname}]:{port}"
    sources = [known_path] if known else []
    sources.append(Path.home() / ".ssh" / "known_hosts")
    for source in sources:
        for keytype, key in _known_keys(source, hostkey_name).items():
            client.get_host_keys().add(hostkey_name, keytype, key)
    client.set_missing_host_key_policy(
        _TrustOnFirstUse(known_path) if options.trust_on_first_use else paramiko.RejectPolicy()
    )
    timeout = _left(deadline, options.connect_timeout_s)
    try:
        client.connect(
            hostname,
            port=port,
            username=user,
            key_filename=keys or None,
            sock=sock,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            look_for_keys=not keys,
            allow_agent=True,
        )
    except paramiko.BadHostKeyException as exc:
        raise _Unreachable(
            f"{where}: host key does not match known_hosts ({exc}); refusing to connect "
            "(hint: if the host was reinstalled, remove its old key with ssh-keygen -R)"
        ) from None
    except paramiko.SSHException as exc:
        msg = str(exc)
        if "not found in known_hosts" in msg:
            msg += " (hint: add it with ssh-keyscan, or pass --trust-on-first-use)"
        raise _Unreachable(f"{where}: {msg}") from None
    except (OSError, EOFError) as exc:
        raise _Unreachable(
            f"{where}: {exc.strerror or exc}" if isinstance(exc, OSError) else f"{where}: {exc}"
        ) from None
    if jump_client is not None:
        client._ascend_jump = jump_client  # keep the hop alive as long as the client
    return client


def _left(deadline: float, cap: float) -> float:
    return max(0.1, min(cap, deadline - time.monotonic()))


def _run_ssh(
    target: Target, script: str, stream: ProbeStream, deadline: float, options: FanoutOptions
) -> None:
    import paramiko

    client = _connect(target, options, deadline)
    try:
        chan = client.get_transport().open_session(timeout=_left(deadline, options.connect_timeout_s))
        chan.exec_command("/bin/sh -s")
        chan.sendall(script.encode())
        chan.shutdown_write()
        while not stream.complete:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            chan.settimeout(min(left, 1.0))
            try:
                data = chan.recv(65536)
            except TimeoutError:
                continue
            except socket.timeout:  # noqa: UP041 - paramiko raises the socket alias on old Pythons
                continue
            if not data:
                break
            stream.feed(data)
        chan.close()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        if not stream.results:
            raise _Unreachable(f"{target.name}: connection lost: {exc}") from None
    finally:
        jump = getattr(client, "_ascend_jump", None)
        client.close()
        if jump is not None:
            jump.close()
