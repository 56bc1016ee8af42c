"""A minimal in-process SSH server (paramiko) for the transport tests: public-key auth, `exec` through
/bin/sh on this machine, and `direct-tcpip` forwarding so it can serve as a ProxyJump hop."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from pathlib import Path

import paramiko


class _Server(paramiko.ServerInterface):
    def __init__(self, allowed: paramiko.PKey, user: str):
        self.allowed, self.user = allowed, user
        self.forwards: list[tuple[str, int]] = []

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        ok = username == self.user and key.get_base64() == self.allowed.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return (
            paramiko.OPEN_SUCCEEDED
            if kind in ("session", "direct-tcpip")
            else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        )

    def check_channel_direct_tcpip_request(self, chanid, origin, destination):
        self.forwards.append(destination)
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel, command):
        threading.Thread(target=_exec, args=(channel, command.decode()), daemon=True).start()
        return True


def _exec(channel: paramiko.Channel, command: str) -> None:
    proc = subprocess.Popen(
        command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    def feed():
        try:
            while data := channel.recv(65536):
                proc.stdin.write(data)
            proc.stdin.close()
        except (OSError, EOFError, ValueError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    try:
        while data := proc.stdout.read1(65536):
            channel.sendall(data)
        channel.sendall_stderr(proc.stderr.read())
        channel.send_exit_status(proc.wait())
    except (OSError, EOFError):
        proc.kill()
    finally:
        with contextlib.suppress(OSError, EOFError):  # the client may have closed the transport first
            channel.close()


def _pump(chan: paramiko.Channel, dest: tuple[str, int]) -> None:
    sock = socket.create_connection(dest)

    def up():
        try:
            while data := chan.recv(65536):
                sock.sendall(data)
        except OSError:
            pass
        finally:
            sock.close()

    threading.Thread(target=up, daemon=True).start()
    try:
        while data := sock.recv(65536):
            chan.sendall(data)
    except OSError:
        pass
    finally:
        chan.close()


class FakeSshd:
    """`with FakeSshd(tmp_path) as sshd:` -> sshd.port, sshd.host_key, sshd.client_key_path, sshd.user."""

    def __init__(self, directory: Path, user: str = "tester"):
        self.user = user
        self.host_key = paramiko.ECDSAKey.generate()
        self.client_key = paramiko.ECDSAKey.generate()
        self.client_key_path = Path(directory) / "id_ecdsa"
        self.client_key.write_private_key_file(str(self.client_key_path))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.servers: list[_Server] = []
        self._transports: list[paramiko.Transport] = []

    def known_hosts_line(self, host: str = "127.0.0.1", key: paramiko.PKey | None = None) -> str:
        key = key or self.host_key
        return f"[{host}]:{self.port} {key.get_name()} {key.get_base64()}\n"

    def __enter__(self) -> FakeSshd:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        for t in self._transports:
            t.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        self._transports.append(transport)
        transport.add_server_key(self.host_key)
        server = _Server(self.client_key, self.user)
        self.servers.append(server)
        try:
            transport.start_server(server=server)
        except (paramiko.SSHException, EOFError, OSError):
            return
        while transport.is_active():
            chan = transport.accept(1)
            if chan is None:
                continue
            if server.forwards:
                dest = server.forwards.pop(0)
                threading.Thread(target=_pump, args=(chan, dest), daemon=True).start()


class StoppedSshd:
    """`with StoppedSshd(tmp_path) as sshd:` a FakeSshd in a process of its own, SIGSTOPped once it
    listens: the kernel still accepts TCP connections, but no SSH banner ever comes, as from a hung
    sshd on a node."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def __enter__(self) -> StoppedSshd:
        import os
        import signal
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.directory)], stdout=subprocess.PIPE, text=True
        )
        self.port = int(self.proc.stdout.readline())
        self.user = "tester"
        self.client_key_path = self.directory / "id_ecdsa"
        os.kill(self.proc.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc) -> None:
        import os
        import signal

        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


if __name__ == "__main__":
    import sys
    import time

    with FakeSshd(Path(sys.argv[1])) as server:
        print(server.port, flush=True)
        while True:
            time.sleep(60)
