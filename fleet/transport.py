"""How a command reaches a node: one shell script per host in ONE exec (paramiko SSH, or /bin/sh on this
machine) under a deadline, its output fed to the caller as it arrives (`run_script`); `ssh_client` for
callers that hold a connection (fleet/sessions.py).

SSH honours ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump), verifies host keys against
known_hosts (trust-on-first-use only when asked), and never lets one slow or dead host hold up the run.
A host that cannot be reached raises HostUnreachable. With ansible_become, a non-root SSH user's script
runs through sudo (fleet/become.py); a sudo that refuses is such a host error too, and then nothing runs.
"""

from __future__ import annotations

import contextlib
import getpass
import importlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import psutil

from ascend_ready.errors import HostUnreachable
from ascend_ready.fleet.become import BECOME_HINT, Become

__all__ = [
    "LOCAL",
    "FanoutOptions",
    "OutputSink",
    "Target",
    "become_of",
    "endpoint",
    "prepare",
    "run_script",
    "ssh_client",
]

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
    #: ansible_become: run the probe batch through `sudo -u become_user` (root) when the SSH user is not it
    become: bool = False
    become_user: str = "root"
    #: ansible_become_password (or --ask-become-pass): sent to sudo on stdin, never on a command line
    become_password: str | None = field(default=None, repr=False, compare=False)

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
    #: --known-hosts: beats a host's own UserKnownHostsFile (inventory or ssh_config), see _connect
    known_hosts_file: str | None = None
    ssh_config_file: str | None = None


class OutputSink(Protocol):
    """What reads a script's output as it arrives (checks.probes.ProbeStream): `complete` once it has
    seen the end it waits for, so the run stops reading then; `started` once it holds something usable
    (a connection lost after that keeps what arrived; before it, the host is unreachable)."""

    @property
    def complete(self) -> bool: ...

    @property
    def started(self) -> bool: ...

    def feed(self, data: bytes) -> None: ...


Sink = TypeVar("Sink", bound=OutputSink)


def prepare(targets: Sequence[Target]) -> None:
    """Import what reaching `targets` needs once, here: not in 32 fan-out threads at once."""
    if not all(t.is_local for t in targets):
        _import_paramiko()


def run_script(
    target: Target,
    script_now: Callable[[], tuple[str, Sink]],
    deadline: float,
    options: FanoutOptions,
) -> Sink:
    """Run a shell script on `target` (as its become user where it names one) until `deadline`
    (time.monotonic()) or until the sink is complete; return the sink with what arrived.

    `script_now()` is called once connected and gives (the script, the sink its output goes to): so the
    script's own budget can be what the connection left of the deadline. HostUnreachable when the host
    cannot be reached, sudo refuses, or the connection drops before any output."""
    if target.is_local:
        return _run_local(script_now, deadline)
    return _run_ssh(target, script_now, deadline, options)


def _run_local(script_now: Callable[[], tuple[str, Sink]], deadline: float) -> Sink:
    script, stream = script_now()
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
        _kill_session(proc.pid)
        out, _ = proc.communicate()
    stream.feed(out)
    return stream


def _kill_tree(pid: int) -> None:

    try:
        root = psutil.Process(pid)
        # The shell first: with its child gone first it would go on and report the probe as finished.
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def _kill_session(sid: int) -> None:
    """Kill what is left of the session `sid` (the batch ran as its leader): a tool's child that escaped
    the process tree by a double fork is still in it, and holds the output pipe open."""

    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if pid != os.getpid() and os.getsid(pid) == sid:
                os.kill(pid, 9)


# ---------------------------------------------------------------- SSH


class _Deferred(types.ModuleType):
    """Stands in for a module until something reads one of its attributes; then the real module is
    imported (and takes its place in sys.modules) and answers. importlib's LazyLoader cannot do this
    here: the import statement itself reads the module's __spec__ and so loads it at once."""

    def __getattr__(self, name: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def _import_paramiko():
    """paramiko, without importing `invoke` (a third of paramiko's import time), which paramiko uses
    only to run an ssh_config `Match exec` command: it is imported when such a line is evaluated."""
    if "paramiko" not in sys.modules and "invoke" not in sys.modules:
        spec = importlib.util.find_spec("invoke")
        if spec is not None:
            stub = _Deferred("invoke")
            stub.__spec__ = spec
            sys.modules["invoke"] = stub
    import paramiko

    _quiet_paramiko_log()
    return paramiko


def _quiet_paramiko_log() -> None:
    """paramiko's transport thread logs a failed handshake with its traceback ("Exception (client): Error
    reading SSH protocol banner"); with no handler of ours, Python's last-resort handler printed it on
    stderr. The error reaches the user as the host's `unreachable: <reason>` instead; --debug's handlers
    on the root logger still get the record."""
    logger = logging.getLogger("paramiko")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


#: the SSH clients of the fan-out each thread works for (track_clients sets it), closed at once on Ctrl-C
_fanout = threading.local()


def track_clients(clients: set) -> None:
    """Record this thread's SSH clients in `clients` (a fan-out's shared set), for abort_clients."""
    _fanout.clients = clients


def _track(client, add: bool = True) -> None:
    """Record (or forget) a client of this thread's fan-out, so an interrupt can close it."""
    clients = getattr(_fanout, "clients", None)
    if clients is not None:
        (clients.add if add else clients.discard)(client)


def abort_clients(clients: set) -> None:
    """Close every client of an interrupted fan-out: a thread waiting for an SSH banner or a probe's
    output then returns within paramiko's 0.1 s poll instead of its connect timeout."""
    for client in list(clients):
        with contextlib.suppress(Exception):
            client.close()

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
    paramiko = _import_paramiko()

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


def endpoint(spec: str) -> Target:
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


_transport_class = None


def _fast_transport():
    """paramiko's Transport preferring AES-GCM: an AEAD cipher needs no separate MAC, and paramiko
    checks a MAC byte by byte in Python, which was most of the controller's CPU per SSH packet. The
    other ciphers stay as fallbacks for an sshd without GCM (OpenSSH < 6.2)."""
    global _transport_class
    if _transport_class is None:
        import paramiko

        gcm = tuple(c for c in paramiko.Transport._preferred_ciphers if "gcm" in c)

        class _Transport(paramiko.Transport):
            _preferred_ciphers = gcm + tuple(c for c in paramiko.Transport._preferred_ciphers if c not in gcm)

        _transport_class = _Transport
    return _transport_class


def _identities(paths: Sequence[str]) -> tuple[object | None, list[str]]:
    """(the first identity file's key, loaded once per file version for the whole fan-out; the other
    files, for paramiko to try after it). A key that cannot be loaded here (a passphrase, a format
    this paramiko lacks) stays a path, so paramiko reports it or falls back to the agent as before."""
    import paramiko

    def load(path: Path):
        try:
            return paramiko.PKey.from_path(str(path))
        # paramiko 3.2+'s from_path raises TypeError for a passphrase-protected key (cryptography's
        # "password was not provided"): the agent may hold it, and _auth_failure names it if not
        except (paramiko.SSHException, OSError, ValueError, TypeError):
            return None

    first, rest = None, []
    for path in paths:
        key = _parsed_file("identity", Path(path), load, lambda: None) if first is None else None
        if key is not None:
            first = key
        else:
            rest.append(path)
    return first, rest


def _encrypted(path: str) -> bool:
    """Whether the private key file at `path` needs a passphrase (paramiko's own test: loading it
    without one raises PasswordRequiredException, or TypeError from paramiko 3.2's from_path)."""
    import paramiko

    try:
        paramiko.PKey.from_path(path)
    except (paramiko.PasswordRequiredException, TypeError):
        return True
    except (paramiko.SSHException, OSError, ValueError):
        return False
    return False


def _auth_failure(where: str, user: str, keys: Sequence[str], exc: Exception) -> HostUnreachable:
    """The node refused every key offered: say whom as, which keys were tried (files, the agent's), which
    of them need a passphrase nothing could give, and what to do."""
    import paramiko

    files = list(keys) or [
        str(p) for p in (Path.home() / ".ssh" / n for n in ("id_rsa", "id_ecdsa", "id_ed25519")) if p.exists()
    ]
    try:
        agent = len(paramiko.Agent().get_keys()) if os.environ.get("SSH_AUTH_SOCK") else 0
    except (paramiko.SSHException, OSError):
        agent = 0
    locked = [f for f in files if _encrypted(f)]
    tried = ", ".join(files) or "no key file"
    tried += f"; {agent} key(s) of ssh-agent" if agent else "; no ssh-agent (SSH_AUTH_SOCK unset or empty)"
    if locked and not agent:
        return HostUnreachable(
            f"{where}: the key {', '.join(locked)} is passphrase-protected and no ssh-agent holds it, so no "
            f"key could be offered for {user}",
            hint=f"start an agent and add the key (eval $(ssh-agent); ssh-add {locked[0]}), then run again",
        )
    return HostUnreachable(
        f"{where}: authentication as {user} failed ({exc}); tried: {tried}",
        hint=f"check that {user} is the node's account (ansible_user / -u) and that one of these keys is in "
        f"~{user}/.ssh/authorized_keys on the node (ssh -v {where.rsplit(':', 1)[0]} shows what it accepts); "
        "a passphrase-protected key needs an ssh-agent holding it (ssh-add KEY)",
    )


def _connect(target: Target, options: FanoutOptions, deadline: float, hops: int = 0):
    """An authenticated paramiko client to `target`, through its ProxyJump hops if any."""
    import paramiko

    if hops > 8:
        raise HostUnreachable(f"{target.name}: ProxyJump chain longer than 8 hops (a loop?)")
    cfg = _ssh_config(options).lookup(target.address or target.name)
    hostname = cfg.get("hostname", target.address or target.name)
    port = target.port or int(cfg.get("port", 22))
    user = target.user or cfg.get("user") or getpass.getuser()
    keys = (
        [target.key_file] if target.key_file else [os.path.expanduser(k) for k in cfg.get("identityfile", [])]
    )
    jump = target.proxy_jump or cfg.get("proxyjump")
    # --known-hosts beats the host's own UserKnownHostsFile (inventory or ssh_config), as `ssh -o`
    # beats a config file: a flag typed for this run is the user's latest word (checks/README.md).
    known = options.known_hosts_file or target.known_hosts_file or _config_known_hosts(cfg)
    where = f"{user}@{hostname}:{port}"

    sock = None
    jump_client = None
    if jump and jump.lower() != "none":
        first, _, rest = jump.partition(",")
        hop = endpoint(first.strip())
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
            raise HostUnreachable(f"cannot reach {where} through ProxyJump {first.strip()}: {exc}") from None

    client = paramiko.SSHClient()
    _track(client)
    known_path = Path(os.path.expanduser(known)) if known else Path.home() / ".ssh" / "known_hosts"
    # Only this host's entries, as paramiko would find them in the user's known_hosts and then the
    # chosen file (where both know a key type, the user's file wins, as in paramiko's own lookup).
    hostkey_name = hostname if port == 22 else f"[{hostname}]:{port}"
    sources = [known_path] if known else []
    sources.append(Path.home() / ".ssh" / "known_hosts")
    for source in sources:
        for keytype, key in _known_keys(source, hostkey_name).items():
            client.get_host_keys().add(hostkey_name, keytype, key)
    client.set_missing_host_key_policy(
        _TrustOnFirstUse(known_path) if options.trust_on_first_use else paramiko.RejectPolicy()
    )
    pkey, key_files = _identities(keys)
    timeout = _left(deadline, options.connect_timeout_s)
    started = time.monotonic()
    try:
        client.connect(
            hostname,
            port=port,
            username=user,
            pkey=pkey,
            key_filename=key_files or None,
            sock=sock,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            look_for_keys=not keys,
            allow_agent=True,
            transport_factory=_fast_transport(),
        )
    except paramiko.BadHostKeyException as exc:
        _close(client, jump_client)
        raise HostUnreachable(
            f"{where}: host key does not match known_hosts ({exc}); refusing to connect",
            hint="if the host was reinstalled, remove its old key with ssh-keygen -R",
        ) from None
    except paramiko.AuthenticationException as exc:  # PasswordRequiredException among them
        _close(client, jump_client)
        raise _auth_failure(where, user, keys, exc) from None
    except TypeError as exc:  # paramiko 3.2+: a passphrase-protected key file it loads itself
        if "password" not in str(exc).lower():
            raise
        _close(client, jump_client)
        raise _auth_failure(where, user, keys, exc) from None
    except paramiko.SSHException as exc:
        transport = client.get_transport()
        _close(client, jump_client)
        waited = time.monotonic() - started
        if (transport is None or transport.session_id is None) and "banner" in str(exc) and (
                waited < 0.9 * timeout):
            raise _closed_before_banner(where, waited) from None
        if (transport is None or transport.session_id is None) and (
            waited >= 0.9 * timeout or "banner" in str(exc)
        ):
            # TCP was accepted but the SSH handshake never finished (a stopped or overloaded sshd):
            # paramiko then fails later with "No existing session", which says nothing useful.
            raise HostUnreachable(
                f"SSH handshake with {where} timed out after {timeout:.3g} s",
                hint="the node accepts TCP connections but its sshd does not answer: check sshd on the "
                "node (systemctl status sshd, its load), or raise --connect-timeout",
            ) from None
        msg = str(exc)
        hint = None
        if "not found in known_hosts" in msg:
            hint = "add it with ssh-keyscan, or pass --trust-on-first-use"
        raise HostUnreachable(f"{where}: {msg}", hint=hint) from None
    except (OSError, EOFError) as exc:
        _close(client, jump_client)
        raise HostUnreachable(
            f"{where}: {exc.strerror or exc}" if isinstance(exc, OSError) else f"{where}: {exc}"
        ) from None
    if jump_client is not None:
        client._ascend_jump = jump_client  # keep the hop alive as long as the client
    client._ascend_user = user  # whom the batch runs as, unless it becomes another user (become_of)
    return client


def _closed_before_banner(where: str, waited: float) -> HostUnreachable:
    """The peer accepted TCP and closed it before any SSH banner: not an sshd, or one that turned the
    connection away (MaxStartups, tcp_wrappers, a firewall that resets after the handshake)."""
    return HostUnreachable(
        f"{where} closed the connection after {waited:.2g} s without an SSH banner",
        hint="something listens on that port but is not answering as sshd: check the port (ssh -v -p PORT "
        "HOST), sshd's MaxStartups and hosts.allow on the node",
    )


def _config_known_hosts(cfg) -> str | None:
    """The first UserKnownHostsFile of the host's ssh_config entry (`none` counts as unset)."""
    files = cfg.get("userknownhostsfile")
    first = (files.split() or [None])[0] if isinstance(files, str) else None
    return None if first in (None, "none", "/dev/null") else first


def _close(client, jump_client) -> None:
    client.close()
    _track(client, add=False)
    if jump_client is not None:
        jump_client.close()
        _track(jump_client, add=False)


def _left(deadline: float, cap: float) -> float:
    return max(0.1, min(cap, deadline - time.monotonic()))


def _run_ssh(
    target: Target,
    script_now: Callable[[], tuple[str, Sink]],
    deadline: float,
    options: FanoutOptions,
) -> Sink:
    import paramiko

    client = _connect(target, options, deadline)
    script, stream = script_now()
    become = become_of(target)
    command, stdin_head = become.stdin_shell(target.name, client._ascend_user)
    became = stdin_head is None  # no sudo: nothing to wait for before the batch's own output
    try:
        chan = client.get_transport().open_session(timeout=_left(deadline, options.connect_timeout_s))
        chan.exec_command(command)
        chan.sendall((stdin_head or b"") + script.encode())
        chan.shutdown_write()
        head = b""
        while not became:
            chan.settimeout(_left(deadline, 1.0))
            try:
                data = chan.recv(1 << 16)
            except (TimeoutError, socket.timeout):  # noqa: UP041 - paramiko raises the socket alias
                if time.monotonic() >= deadline:
                    raise HostUnreachable(f"{target.name}: sudo did not answer within the host deadline "
                                          f"of {options.host_deadline_s:g} s", hint=BECOME_HINT) from None
                continue
            if not data:
                raise HostUnreachable(f"{target.name}: the become wrapper ended before sudo answered",
                                      hint=BECOME_HINT)
            head += data
            if b"\n" in head:
                line, _, rest = head.partition(b"\n")
                become.check_answer(target.name, client._ascend_user, line.decode(errors="replace"))
                became = True
                stream.feed(rest)
        while not stream.complete:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            chan.settimeout(min(left, 1.0))
            try:
                data = chan.recv(1 << 20)
            except TimeoutError:
                continue
            except socket.timeout:  # noqa: UP041 - paramiko raises the socket alias on old Pythons
                continue
            if not data:
                break
            stream.feed(data)
        chan.close()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        if not stream.started:
            raise HostUnreachable(f"{target.name}: connection lost: {exc}") from None
    finally:
        _close(client, getattr(client, "_ascend_jump", None))
    return stream


# ---------------------------------------------------------------- become (sudo)


def become_of(target: Target) -> Become:
    """How `target`'s batch becomes its become user (fleet/become.py); needed() is False without one."""
    return Become(target.become_user if target.become else "", target.become_password)


@contextlib.contextmanager
def ssh_client(target: Target, options: FanoutOptions):
    """An authenticated paramiko client to `target`, made as the probe batches make theirs (ssh_config,
    known_hosts, ProxyJump), for callers that run their own long commands or SFTP on it (ascend-train's
    multi-node launch). HostUnreachable when it cannot connect within options.connect_timeout_s; closed,
    with its ProxyJump hops, when the block ends."""
    client = _connect(target, options, time.monotonic() + options.connect_timeout_s)
    try:
        yield client
    finally:
        _close(client, getattr(client, "_ascend_jump", None))
