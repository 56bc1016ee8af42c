"""The per-node guard of a multi-node job: runs torchrun, and stops every process of the job on this node
when the controller says so, goes silent, or disconnects, so no process is left holding a device.

Started by the controller over SSH (training/multinode.py) as
    python -m ascend_ready.fleet.node_guard --job ID [--heartbeat-timeout S] [--grace S] -- COMMAND...
Every process of the job carries ASCEND_TRAIN_JOB=ID in its environment; that marker, not the process
tree, finds them (torchrun starts each worker in a session of its own, and orphans move to PID 1).

Protocol on the SSH channel. stdin, from the controller: `hb` (heartbeat) and `stop` lines; EOF counts
as `stop`. stderr, to the controller: `@@guard ack` for each heartbeat, `@@guard KEY text` status lines.
stdout: the job's own output (stdout and stderr together). Exit code: the job's, or 143 once stopped.
Standard library only: it must start in well under a second on a loaded node.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

JOB_ENV = "ASCEND_TRAIN_JOB"
PREFIX = "@@guard"
STOPPED_RC = 143  # 128 + SIGTERM, as a shell reports a job stopped by TERM


_say_lock = threading.Lock()


def say(key: str, text: str = "") -> None:
    """One status line for the controller on stderr (`@@guard KEY text`), whole, from either thread."""
    line = (f"{PREFIX} {key} {text}".rstrip() + "\n").encode()
    with _say_lock, contextlib.suppress(OSError):  # the controller gone (EPIPE) must not stop the teardown
        os.write(2, line)


def job_pids(job: str, proc_dir: str = "/proc") -> list[int]:
    """PIDs of the processes whose environment carries ASCEND_TRAIN_JOB=job (this guard excluded)."""
    marker = f"{JOB_ENV}={job}".encode()
    me = os.getpid()
    found = []
    for entry in os.listdir(proc_dir):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"{proc_dir}/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:  # gone, a zombie, or not ours to read
            continue
        if marker in env.split(b"\0"):
            found.append(int(entry))
    return sorted(found)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_job(job: str, grace_s: float, child: subprocess.Popen | None = None) -> list[int]:
    """TERM every process of the job, KILL what is left after `grace_s`; returns the PIDs still alive."""
    _signal_all(job_pids(job), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if child is not None:
            child.poll()  # reap it, or it stays a zombie with an unreadable environ... and a PID
        if not job_pids(job):
            return []
        time.sleep(0.1)
    _signal_all(job_pids(job), signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    left = job_pids(job)
    while left and time.monotonic() < deadline:
        if child is not None:
            child.poll()
        time.sleep(0.1)
        left = job_pids(job)
    return left


class _Controller:
    """What the controller said last: heartbeats refresh `seen`; `stop` or EOF sets `stop_reason`."""

    def __init__(self) -> None:
        self.seen = time.monotonic()
        self.stop_reason: str | None = None
        self.event = threading.Event()

    def listen(self, stream) -> None:
        for raw in stream:
            word = raw.strip()
            if word == b"hb":
                self.seen = time.monotonic()
                say("ack")
            elif word == b"stop":
                self.stop("the controller stopped the job")
                return
        self.stop("the controller's connection closed")

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.event.set()


def run(command: list[str], job: str, heartbeat_timeout_s: float, grace_s: float, stdin=None) -> int:
    controller = _Controller()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: controller.stop(f"the guard got signal {signum}"))
    env = {**os.environ, JOB_ENV: job}
    try:
        child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    except OSError as exc:
        say("error", f"cannot start {command[0]}: {exc.strerror or exc}")
        return 127
    say("started", f"pid {child.pid} on {os.uname().nodename}")
    threading.Thread(target=controller.listen, args=(stdin or sys.stdin.buffer,), daemon=True).start()
    rc = None
    try:
        while True:
            rc = child.poll()
            if rc is not None:
                break
            if controller.event.wait(0.2):
                break
            if heartbeat_timeout_s and time.monotonic() - controller.seen > heartbeat_timeout_s:
                controller.stop(f"no heartbeat from the controller for {heartbeat_timeout_s:g} s")
                break
        if rc is None:
            say("stopping", controller.stop_reason or "")
    finally:
        # Whatever ended the wait, and after a clean exit too: no process of the job outlives the guard.
        left = stop_job(job, grace_s, child)
    if left:
        say("left", " ".join(map(str, left)))
    else:
        say("clean", f"no process of job {job} is left")
    if rc is None:
        child.poll()
        return STOPPED_RC
    say("exit", str(rc))
    return 128 - rc if rc < 0 else rc  # killed by signal N: 128 + N, as a shell reports it


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ascend_ready.fleet.node_guard")
    ap.add_argument("--job", required=True, help="job id: the ASCEND_TRAIN_JOB marker of its processes")
    ap.add_argument("--heartbeat-timeout", type=float, default=30.0,
                    help="stop the job when the controller sends no heartbeat for this long (0: never)")
    ap.add_argument("--grace", type=float, default=10.0, help="seconds between TERM and KILL")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command to run after --")
    return run(command, args.job, args.heartbeat_timeout, args.grace)


if __name__ == "__main__":
    # os._exit: the stdin listener is a daemon thread blocked in a read; a normal interpreter shutdown
    # can abort on it (SIGABRT) while it holds the stdin buffer's lock.
    code = main()
    sys.stdout.flush()
    os._exit(code)
