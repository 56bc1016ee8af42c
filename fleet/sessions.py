"""Sessions to the nodes of a job: one per node, SSH through fleet/transport.py (or this machine itself),
to run a short command (`run`: fleet/command.py's one result shape), start a long one (fleet/job.py runs
a job on them) and copy files; either as another user, through fleet/become.py.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from ascend_ready.errors import ConfigError, HostUnreachable
from ascend_ready.fleet.become import Become
from ascend_ready.fleet.command import GRACE_S, TIMEOUT_RC, UNREACHABLE_RC, CommandResult, bounded
from ascend_ready.fleet.transport import (
    FanoutOptions,
    Target,
    _import_paramiko,
    _kill_session,
    _kill_tree,
    ssh_client,
)

__all__ = ["LocalSession", "Remote", "Session", "SshSession", "open_sessions"]


class Remote:
    """A command running on a node: poll for output, send to its stdin, close."""

    def poll(self) -> tuple[bytes, bytes, int | None, str | None]:  # out, err, exit code, lost reason
        raise NotImplementedError

    def send(self, data: bytes) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Session:
    """One node's connection: run a short command, start a long one, copy files. `login_user` is whom the
    connection runs as; `user=` on run/start becomes another (fleet/become.py)."""

    name: str
    login_user: str | None = None

    def as_user(self, command: str, user: str | None) -> str:
        """`command` (a shell command line) as `user` where that is not the login user."""
        return Become(user or "").command(command, self.login_user)

    def run(self, command: str, timeout_s: float, *, user: str | None = None) -> CommandResult:
        """A short shell command, stdout and stderr apart; stopped on the node after `timeout_s` (then
        rc 124 and timed_out); a node that cannot be reached answers rc 255 (UNREACHABLE_RC), its reason
        in stderr, as ssh(1) does."""
        raise NotImplementedError

    def start(self, command: str) -> Remote:
        raise NotImplementedError

    def put_file(self, local: Path, remote: str) -> None:
        raise NotImplementedError

    def exists(self, remote: str) -> bool:
        raise NotImplementedError

    def walk(self, remote: str) -> list[str]:
        """Paths of the files under `remote` (relative), [] when it does not exist."""
        raise NotImplementedError

    def get_file(self, remote: str, local: Path) -> None:
        raise NotImplementedError


def put_failed(node: str, remote: str, exc: OSError) -> ConfigError:
    """The error of a copy onto a node that failed (ops-launch): names the node, the path and the cause."""
    why = exc.strerror or str(exc) or type(exc).__name__
    if why == "Failure":  # SFTP's SSH_FX_FAILURE: the server does not say (a read-only mount, a full disk)
        why = "the SFTP server answered 'Failure' (a read-only or full file system)"
    return ConfigError(f"{node}: cannot write {remote}: {why}",
                       hint="give a --node-output-dir the node's user may write, with room")


class LocalRemote(Remote):
    def __init__(self, command: str):
        # exec: the PID is the command's own (the node guard's, once its shell execs it), as over SSH
        self.proc = subprocess.Popen(["/bin/sh", "-c", f"exec {command}"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        for stream in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)

    @staticmethod
    def _drain(stream) -> bytes:
        chunks = []
        while True:
            try:
                data = os.read(stream.fileno(), 1 << 16)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def poll(self):
        rc = self.proc.poll()  # first: output read after it is all the output there is
        out, err = self._drain(self.proc.stdout), self._drain(self.proc.stderr)
        return out, err, (rc if not out and not err else None), None

    def send(self, data: bytes) -> bool:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError, OSError):
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()


class LocalSession(Session):
    """The controller itself as a node (`--hosts local`, and the tests of the launch machinery)."""

    def __init__(self, name: str):
        self.name = name
        self.login_user = getpass.getuser()

    def run(self, command: str, timeout_s: float, *, user: str | None = None) -> CommandResult:
        # a session of its own: at the time limit the whole of it goes, as the batch's does (transport)
        proc = subprocess.Popen(["/bin/sh", "-c", self.as_user(command, user)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            _kill_session(proc.pid)
            out, err = proc.communicate()
            return CommandResult(TIMEOUT_RC, out.decode(errors="replace"), err.decode(errors="replace"), True)
        return CommandResult(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))

    def start(self, command: str) -> Remote:
        return LocalRemote(command)

    def put_file(self, local: Path, remote: str) -> None:
        try:
            Path(remote).parent.mkdir(parents=True, exist_ok=True)
            if Path(local).resolve() != Path(remote).resolve():
                shutil.copyfile(local, remote)
        except OSError as exc:
            raise put_failed(self.name, remote, exc) from None

    def exists(self, remote: str) -> bool:
        return Path(remote).exists()

    def walk(self, remote: str) -> list[str]:
        root = Path(remote)
        if not root.is_dir():
            return []
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def get_file(self, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(remote, local)


class SshRemote(Remote):
    def __init__(self, client, command: str):
        self.transport = client.get_transport()
        self.chan = self.transport.open_session(timeout=10)
        self.chan.settimeout(5.0)  # sends to a node that stopped reading must not hang the controller
        self.chan.exec_command(command)

    def poll(self):
        chan = self.chan
        out = chan.recv(1 << 16) if chan.recv_ready() else b""
        err = chan.recv_stderr(1 << 16) if chan.recv_stderr_ready() else b""
        if out or err:
            return out, err, None, None
        if chan.exit_status_ready():
            return b"", b"", chan.recv_exit_status(), None
        if not self.transport.is_active():
            return b"", b"", None, "the SSH connection dropped"
        if chan.closed:
            return b"", b"", None, "the SSH channel closed without an exit status"
        return b"", b"", None, None

    def send(self, data: bytes) -> bool:
        try:
            self.chan.sendall(data)
            return True
        except Exception:  # socket.timeout, EOFError, paramiko.SSHException: the channel is gone
            return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.chan.close()


class SshSession(Session):
    def __init__(self, name: str, client):
        self.name, self.client = name, client
        self.login_user = getattr(client, "_ascend_user", None)
        self._sftp = None
        client.get_transport().set_keepalive(5)

    @property
    def sftp(self):
        if self._sftp is None:
            self._sftp = self.client.open_sftp()
            self._sftp.get_channel().settimeout(60.0)  # a node gone mid-copy fails the copy, not the run
        return self._sftp

    def run(self, command: str, timeout_s: float, *, user: str | None = None) -> CommandResult:
        try:
            return self._run(command, timeout_s, user)
        except (OSError, EOFError, _import_paramiko().SSHException) as exc:
            # a node cut off mid-job ("Timeout opening channel.", a closed connection) answers as ssh(1)
            # does, rc 255, so every caller (a claim release reaching the other nodes) gets a result
            return CommandResult(UNREACHABLE_RC, "", f"unreachable: {type(exc).__name__}: {exc}")

    def _run(self, command: str, timeout_s: float, user: str | None) -> CommandResult:
        chan = self.client.get_transport().open_session(timeout=10)
        # the node stops it at timeout_s (bounded); the controller waits the node's grace on top
        chan.exec_command(bounded(self.as_user(command, user), timeout_s))
        chan.shutdown_write()
        deadline, out, err = time.monotonic() + timeout_s + GRACE_S + 2, [], []

        def drain() -> None:
            while chan.recv_ready():
                out.append(chan.recv(1 << 16))
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(1 << 16))

        while time.monotonic() < deadline:
            drain()
            if chan.exit_status_ready():
                drain()
                rc = chan.recv_exit_status()
                return CommandResult(rc, b"".join(out).decode(errors="replace"),
                                     b"".join(err).decode(errors="replace"), rc in (TIMEOUT_RC, 137))
            time.sleep(0.02)
        chan.close()
        return CommandResult(TIMEOUT_RC, b"".join(out).decode(errors="replace"),
                             b"".join(err).decode(errors="replace"), True)

    def start(self, command: str) -> Remote:
        return SshRemote(self.client, command)

    def _mkdirs(self, remote: str) -> None:
        parts = PurePosixPath(remote).parts
        for i in range(2, len(parts) + 1):
            path = str(PurePosixPath(*parts[:i]))
            try:
                self.sftp.stat(path)
            except OSError:
                self.sftp.mkdir(path)

    def put_file(self, local: Path, remote: str) -> None:
        # Aside, then renamed: where `remote` is `local` after all (a share not detected), a put straight
        # onto it would truncate the very file it reads.
        aside = f"{remote}.ascend-train-{secrets.token_hex(4)}"
        try:
            self._mkdirs(str(PurePosixPath(remote).parent))
            self.sftp.put(str(local), aside)
            self.sftp.posix_rename(aside, remote)
        except OSError as exc:  # SFTP's bare "Failure" on a read-only file system, EACCES, ENOSPC
            raise put_failed(self.name, remote, exc) from None

    def exists(self, remote: str) -> bool:
        try:
            self.sftp.stat(remote)
            return True
        except OSError:
            return False

    def walk(self, remote: str) -> list[str]:
        out: list[str] = []

        def visit(rel: str) -> None:
            try:
                entries = self.sftp.listdir_attr(f"{remote}/{rel}" if rel else remote)
            except OSError:
                return
            for e in entries:
                sub = f"{rel}/{e.filename}" if rel else e.filename
                if stat.S_ISDIR(e.st_mode or 0):
                    visit(sub)
                elif stat.S_ISREG(e.st_mode or 0):
                    out.append(sub)

        visit("")
        return sorted(out)

    def get_file(self, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        self.sftp.get(remote, str(local))


@contextlib.contextmanager
def open_sessions(targets: Sequence[Target], options: FanoutOptions) -> Iterator[dict[str, Session]]:
    """A session per target, opened in parallel; HostUnreachable naming the first host that is not."""
    with contextlib.ExitStack() as stack:
        remote = [t for t in targets if not t.is_local]

        def connect(t: Target):
            return t.name, stack.enter_context(ssh_client(t, options))

        sessions: dict[str, Session] = {t.name: LocalSession(t.name) for t in targets if t.is_local}
        if remote:
            with ThreadPoolExecutor(max_workers=min(32, len(remote))) as pool:
                futures = [pool.submit(connect, t) for t in remote]
                errors = []
                for fut in futures:
                    try:
                        name, client = fut.result()
                        sessions[name] = SshSession(name, client)
                    except HostUnreachable as exc:
                        errors.append(exc)
            if errors:
                first = errors[0]
                raise HostUnreachable(
                    "cannot reach " + "; ".join(e.message for e in errors) + "; nothing was started",
                    hint=first.hint or "check the host's SSH access (ascend-check -i INVENTORY shows it)",
                )
        yield {t.name: sessions[t.name] for t in targets}
