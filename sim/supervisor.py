"""PID 1 of a simulated node: serves the kernel-knob files, runs sshd (restarting it), reaps zombies,
and reboots the node when `shutdown -r` / `reboot` inside it asks (SIGUSR1).

Runs inside the node with the private interpreter (stdlib only, Python 3.11); SIGTERM stops the node.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid

SSHD = ["/usr/sbin/sshd", "-D", "-e"]
RESTART_DELAY_S = 0.2
IDLE_WAKEUP_S = 5.0  # a missed SIGCHLD (coalesced with another) is caught at the latest then
WAITED = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}
# A reboot: `shutdown -r` returns at once (as systemd's does, so Ansible's reboot module sees rc 0), then
# every process goes, the runtime state goes back to the boot defaults, what is persisted is applied
# again (as systemd-sysctl and systemd-tmpfiles do), and sshd comes back after BOOT_DELAY_S.
REBOOT_GRACE_S = 0.5
BOOT_DELAY_S = 2.0
BOOT_ID = "/proc/sys/kernel/random/boot_id"
BOOT_ID_FILE = "/var/lib/ascend-sim/boot_id"  # in the node's simdir; bound over BOOT_ID
#: runtime settings a reboot resets (read once at the first boot): the knob files and the netns's
#: sysctls the playbooks tune
BOOT_DEFAULTS = ("/proc/sys/kernel/numa_balancing", "/sys/kernel/mm/transparent_hugepage/enabled",
                 "/sys/kernel/mm/transparent_hugepage/defrag", "/proc/sys/net/ipv4/ip_local_reserved_ports")
BOOT_DEFAULTS_FILE = "/var/lib/ascend-sim/boot-defaults.json"
#: /run is a tmpfs: emptied by a reboot except the simulator's own entries
RUN_KEPT = {"ascend-sim", "sshd"}
SHUTDOWN = "/usr/sbin/shutdown"
SHUTDOWN_SCRIPT = """#!/bin/sh
# ascend-sim: reboot the simulated node (PID 1, the supervisor, restarts it); nothing else is simulated.
case "$(basename "$0") $*" in
  reboot*|*" -r"*|*--reboot*) kill -USR1 1 ;;
  *) echo "ascend-sim: only a reboot (shutdown -r, reboot) is simulated" >&2; exit 1 ;;
esac
"""
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
        self.boots = 0

    def start_sshd(self) -> None:
        self.sshd = subprocess.Popen(SSHD, stdin=subprocess.DEVNULL)
        log(f"sshd started (pid {self.sshd.pid})")

    def on_signal(self, signum, _frame) -> None:
        if signum not in (signal.SIGCHLD, signal.SIGUSR1):
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
        self.boot()
        self.start_sshd()
        while not self.stopping:
            info = signal.sigtimedwait(WAITED, IDLE_WAKEUP_S)
            if info is not None and info.si_signo == signal.SIGUSR1:
                self.reboot()
                continue
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

    def boot(self) -> None:
        """What a boot gives the node: a new boot id, the reboot command, and (after the first) the
        runtime defaults with the persisted settings applied over them."""
        self.boots += 1
        with open(BOOT_ID_FILE, "w") as fh:  # in place: the bind over BOOT_ID shows the same file
            fh.write(f"{uuid.uuid4()}\n")
        if self.boots == 1:
            _bind(BOOT_ID_FILE, BOOT_ID)
            if not os.path.exists(SHUTDOWN):
                for path in (SHUTDOWN, "/usr/sbin/reboot"):
                    with open(path, "w") as fh:
                        fh.write(SHUTDOWN_SCRIPT)
                    os.chmod(path, 0o755)
            if not os.path.exists(BOOT_DEFAULTS_FILE):
                with open(BOOT_DEFAULTS_FILE, "w") as fh:
                    json.dump({p: _read(p) for p in BOOT_DEFAULTS if _read(p) is not None}, fh)
            return
        with open(BOOT_DEFAULTS_FILE) as fh:
            for path, value in json.load(fh).items():
                _write(path, value)
        for name in os.listdir("/run"):
            if name not in RUN_KEPT:
                subprocess.run(["rm", "-rf", "--one-file-system", os.path.join("/run", name)], check=False)
        apply_persisted()

    def reboot(self) -> None:
        log("reboot requested")
        time.sleep(REBOOT_GRACE_S)  # shutdown -r returns before the connection that ran it drops
        self.stop_others()
        self.sshd = None
        self.boot()
        log(f"rebooted (boot {self.boots})")
        time.sleep(BOOT_DELAY_S)
        self.start_sshd()

    def stop_others(self) -> None:
        """SIGTERM, then SIGKILL after 2 s, every other process of this PID namespace."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            os.kill(-1, sig)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                self.reap()
                if not _others_alive():
                    return
                time.sleep(0.05)

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


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return None
    # a choice file reads `always madvise [never]`: the value is the bracketed word
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else text


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(value)
    except OSError as exc:
        log(f"boot: cannot set {path}: {exc}")


def _bind(source: str, target: str) -> None:
    from ascend_ready.sim.nodeinit import bind

    try:
        bind(source, target, readonly=True)
    except OSError as exc:
        log(f"cannot bind {source} over {target}: {exc}")


def apply_persisted() -> None:
    """What systemd applies at boot: sysctl.d and sysctl.conf (systemd-sysctl), `w` lines of tmpfiles.d."""
    for conf in [*sorted(glob.glob("/etc/sysctl.d/*.conf")), "/etc/sysctl.conf"]:
        if os.path.exists(conf):
            subprocess.run(["sysctl", "-q", "-e", "-p", conf], check=False, stdout=subprocess.DEVNULL)
    for conf in sorted(glob.glob("/etc/tmpfiles.d/*.conf")):
        with open(conf) as fh:
            for line in fh:
                fields = line.split(None, 6)
                if len(fields) == 7 and fields[0] in ("w", "w+"):
                    _write(fields[1], fields[6].strip())


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
