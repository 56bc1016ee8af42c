"""PID 1 of a simulated node: serves the kernel-knob files, runs sshd (restarting it), reaps zombies.

Runs inside the node with the private interpreter (stdlib only, Python 3.11); SIGTERM stops the node.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time

SSHD = ["/usr/sbin/sshd", "-D", "-e"]
RESTART_DELAY_S = 0.2
IDLE_WAKEUP_S = 5.0  # a missed SIGCHLD (coalesced with another) is caught at the latest then
WAITED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
# What systemd gives a server's services (sshd included, and through it every login before pam_limits
# applies /etc/security/limits.d): nofile 1024/524288, memlock 8 MiB, instead of whatever the host has.
# Without CAP_SYS_RESOURCE (a container host) no hard limit can exceed the host's, so pam_limits cannot
# raise to a limits.d value above it (setrlimit EPERM, as above fs.nr_open). Where the host's hard limit
# is below the server's, sshd gets soft = hard = the host's (the most a limits.d raise could give); a
# login without a limits.d nofile line still starts at soft 1024 (pam_limits).
SERVER_LIMITS = {resource.RLIMIT_NOFILE: (1024, 524288), resource.RLIMIT_MEMLOCK: (8 << 20, 8 << 20)}


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} supervisor: {msg}", file=sys.stderr, flush=True)


class Supervisor:
    def __init__(self) -> None:
        self.stopping = False
        self.sshd: subprocess.Popen | None = None
        self.restarts = 0

    def start_sshd(self) -> None:
        self.sshd = subprocess.Popen(SSHD, stdin=subprocess.DEVNULL)
        log(f"sshd started (pid {self.sshd.pid})")

    def on_signal(self, signum, _frame) -> None:
        if signum != signal.SIGCHLD:
            self.stopping = True

    def reap(self) -> None:
        """Collect every exited child (PID 1 inherits all orphans); notice when sshd is gone."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.sshd is not None and pid == self.sshd.pid:
                self.sshd.returncode = os.waitstatus_to_exitcode(status)
                log(f"sshd exited ({self.sshd.returncode})")
                self.sshd = None

    def run(self) -> int:
        # Signals are taken synchronously (sigtimedwait), so they are blocked before any thread starts:
        # the knob server's thread inherits the mask and can never swallow a SIGCHLD or SIGTERM.
        # Handlers stay installed because PID 1 of a namespace drops signals left at SIG_DFL.
        for sig in WAITED:
            signal.signal(sig, self.on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)
        apply_server_limits()  # inherited by sshd and everything it starts
        self.start_knobs()
        self.start_sshd()
        while not self.stopping:
            info = signal.sigtimedwait(WAITED, IDLE_WAKEUP_S)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.stopping = True
            self.reap()
            if self.sshd is None and not self.stopping:
                time.sleep(RESTART_DELAY_S)
                self.restarts += 1
                self.start_sshd()
        return self.shutdown()

    def start_knobs(self) -> None:
        mountpoint = os.environ.get("ASCEND_SIM_KNOBS_MOUNT")
        if not mountpoint:
            return
        from ascend_ready.sim import knobs  # in-node FUSE server; imported only where it is used

        try:
            choices = json.loads(os.environ.get("ASCEND_SIM_KNOB_CHOICES") or "{}")
            knobs.serve_in_background(mountpoint, os.environ["ASCEND_SIM_KNOBS_STATE"], choices)
        except OSError as exc:
            # The host's own knob files stay visible but read-only: writes fail, none reaches the host.
            log(f"knob files unavailable: {exc}")

    def shutdown(self) -> int:
        log("stopping")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, WAITED)
        os.kill(-1, signal.SIGTERM)  # every other process of this PID namespace
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            self.reap()
            if not _others_alive():
                break
            time.sleep(0.05)
        return 0


def apply_server_limits() -> None:
    for res, (soft, hard) in SERVER_LIMITS.items():
        cur_hard = resource.getrlimit(res)[1]
        if cur_hard != resource.RLIM_INFINITY and cur_hard < hard:
            soft = hard = cur_hard
        resource.setrlimit(res, (soft, hard))


def _others_alive() -> bool:
    return any(p.isdigit() and p != "1" for p in os.listdir("/proc"))


if __name__ == "__main__":
    sys.exit(Supervisor().run())
