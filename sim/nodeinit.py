"""Boots one simulated node: new namespaces, overlay root, /proc, /sys and /dev views, then the supervisor.

Run by the host as `python -m ascend_ready.sim.nodeinit BOOT_JSON`; prints the node's PID (as the host
sees it) once the node's PID 1 is running its supervisor. Stdlib only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import stat
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
SYS_PIVOT_ROOT = 155  # x86_64
LENT_PYTHON_CONF = "/etc/ld.so.conf.d/ascend-sim-python.conf"
MASKED_PROC = ("kmsg", "kcore", "keys", "timer_list", "sched_debug", "latency_stats")

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str | Path, fstype: str | None = None, flags: int = 0,
          data: str | None = None) -> None:
    _check(_libc.mount(source and source.encode(), str(target).encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {source} on {target}")


def bind(source: str | Path, target: str | Path, *, readonly: bool = False) -> None:
    mount(str(source), target, None, MS_BIND)
    if readonly:  # a bind only becomes read-only through a remount of that bind
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def pivot_into(new_root: Path) -> None:
    """Make new_root the root and drop every host mount (pivot_root(".", ".") then detach the old root)."""
    os.chdir(new_root)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def _mknod(path: Path, major: int, minor: int, mode: int, uid: int = 0, gid: int = 0) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chown(path, uid, gid)
    os.chmod(path, mode)  # mknod's mode is filtered by the umask


def _ids(root: Path, name: str | None, db: str) -> int:
    if not name:
        return 0
    for line in (root / "etc" / db).read_text().splitlines():
        parts = line.split(":")
        if parts[0] == name:
            return int(parts[2])
    return 0  # the owner does not exist yet on this node (e.g. before the driver adds HwHiAiUser)


INSTALL_INFO = "etc/ascend_install.info"


def _install_info(root: Path) -> dict[str, str]:
    try:
        text = (root / INSTALL_INFO).read_text()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def device_owner(root: Path, device: dict) -> tuple[str | None, str | None, int]:
    """Owner, group and mode of a device node as the installed driver leaves it.

    The real driver's host_sys_init.sh (changeDavinciModeOnce, run at install and at every boot) sets
    /dev/davinciN, davinci_manager, hisi_hdc and devmm_svm to its run user and group from
    /etc/ascend_install.info (UserName/UserGroup, default HwHiAiUser) with mode 660, or 666 when installed
    --install-for-all. Without a driver the nodes stay root's (a real node would have none at all).
    """
    info = _install_info(root)
    driver = info.get("Driver_Install_Path_Param")
    if not driver or not (root / driver.lstrip("/") / "driver" / "version.info").is_file():
        return None, None, device.get("mode", 0o660)
    mode = 0o666 if info.get("Driver_Install_For_All") == "yes" else device.get("mode", 0o660)
    return (info.get("UserName") or device.get("owner"), info.get("UserGroup") or device.get("group"), mode)


def populate_dev(root: Path, devices: list[dict], *, previous: list[dict] = ()) -> None:
    """Create the hardware's device nodes (/dev/davinci0, /dev/davinci_manager...) in a node's /dev,
    owned as the installed driver sets them (device_owner), removing those of `previous` (the last list)
    that the hardware no longer has."""
    dev = root / "dev"
    gone = {d["path"] for d in previous} - {d["path"] for d in devices}
    for path in sorted(gone):
        (dev / path.removeprefix("/dev/")).unlink(missing_ok=True)
    for d in devices:
        path = dev / d["path"].removeprefix("/dev/")
        path.parent.mkdir(parents=True, exist_ok=True)
        owner, group, mode = device_owner(root, d)
        _mknod(path, d["major"], d["minor"], mode, _ids(root, owner, "passwd"), _ids(root, group, "group"))


def _setup_dev(root: Path, devices: list[dict]) -> None:
    dev = root / "dev"
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k")
    for name, major, minor, mode in (("null", 1, 3, 0o666), ("zero", 1, 5, 0o666), ("full", 1, 7, 0o666),
                                     ("random", 1, 8, 0o666), ("urandom", 1, 9, 0o666),
                                     ("tty", 5, 0, 0o666), ("fuse", 10, 229, 0o666)):
        _mknod(dev / name, major, minor, mode)
    for name in ("pts", "shm", "mqueue"):
        (dev / name).mkdir()
    mount("devpts", dev / "pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
    mount("tmpfs", dev / "shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    os.symlink("pts/ptmx", dev / "ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, dev / name)
    populate_dev(root, devices)


def _setup_proc(root: Path) -> None:
    proc = root / "proc"
    mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # /proc/sys is the host kernel's: read-only except the node's own net.* (its netns); PID 1 later
    # binds the knob files (ascend_ready.sim.knobs) over the few entries we tune.
    sys_dir = proc / "sys"
    bind(sys_dir, sys_dir)
    bind(sys_dir / "net", sys_dir / "net")
    mount(None, sys_dir, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in ("sysrq-trigger", "irq", "bus", "fs"):
        if (proc / name).exists():
            bind(proc / name, proc / name, readonly=True)
    # Host-kernel views a namespace does not scope; /proc/kmsg reads would even consume the host's log.
    for name in MASKED_PROC:
        if (proc / name).exists():
            bind("/dev/null", proc / name)


def _setup_sys(root: Path, boot: dict) -> None:
    sys_dir = root / "sys"
    # Mounted in the node's netns, so /sys/class/net shows the node's own interfaces.
    mount("sysfs", sys_dir, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    simdir = Path(boot["simdir"])
    fake_roots = sorted(p for p in (simdir / "sysfs" / "devices").glob("pci*") if p.is_dir())
    if fake_roots:
        # The fake PCI tree replaces the real one: a tmpfs over /sys/devices holds binds of the real
        # children (except pci*) from a second sysfs, plus the fake root ports.
        stage = Path(boot["node_dir"]) / "sysfs-stage"
        stage.mkdir(exist_ok=True)
        mount("sysfs", stage, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        devices = sys_dir / "devices"
        mount("tmpfs", devices, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755")
        for child in sorted((stage / "devices").iterdir()):
            if child.name.startswith("pci"):
                continue
            if child.is_dir() and not child.is_symlink():
                (devices / child.name).mkdir()
                bind(child, devices / child.name)
            else:
                (devices / child.name).touch()
                bind(child, devices / child.name)
        for port in fake_roots:
            (devices / port.name).mkdir()
            bind(port, devices / port.name, readonly=True)
        mount(None, devices, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        pci_devices = simdir / "sysfs" / "bus" / "pci" / "devices"
        if pci_devices.is_dir():
            bind(pci_devices, sys_dir / "bus" / "pci" / "devices", readonly=True)
    fake_nodes = simdir / "sysfs" / "devices" / "system" / "node"
    if fake_nodes.is_dir() and (sys_dir / "devices" / "system" / "node").is_dir():
        # The presented host's NUMA nodes (sim/hw/numa.py) in place of the kernel's single one.
        bind(fake_nodes, sys_dir / "devices" / "system" / "node", readonly=True)


# Syscalls that reach host-kernel state no namespace isolates; a node gets EPERM for them, as in a container.
BLOCKED_SYSCALLS = {
    103: "syslog",  # the host's kernel log (read and clear); the node's dmesg is the fake one
    227: "clock_settime", 159: "adjtimex", 164: "settimeofday", 305: "clock_adjtime",
    175: "init_module", 313: "finit_module", 176: "delete_module",
    167: "swapon", 168: "swapoff", 246: "kexec_load", 320: "kexec_file_load",
}
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def confine_syscalls() -> None:
    """Install a seccomp filter (inherited by every process of the node) that fails BLOCKED_SYSCALLS."""
    ld_abs, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    nrs = sorted(BLOCKED_SYSCALLS) + sorted(X32_SYSCALL_BIT | n for n in BLOCKED_SYSCALLS)
    prog = [(ld_abs, 0, 0, 4), (jeq, 1, 0, AUDIT_ARCH_X86_64), (ret, 0, 0, SECCOMP_RET_ALLOW),
            (ld_abs, 0, 0, 0)]
    for i, nr in enumerate(nrs):
        prog.append((jeq, len(nrs) - i, 0, nr))  # match: jump to the deny at the end
    prog += [(ret, 0, 0, SECCOMP_RET_ALLOW), (ret, 0, 0, deny)]
    filters = (_SockFilter * len(prog))(*[_SockFilter(*p) for p in prog])
    fprog = _SockFprog(len(prog), filters)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def boot_node(boot: dict) -> None:
    """In the node's fresh namespaces (this process is PID 1): build its filesystem view, then exec."""
    root = Path(boot["root"])
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("overlay", root, "overlay", 0,
          f"lowerdir={boot['lower']},upperdir={boot['upper']},workdir={boot['work']}")
    _setup_proc(root)
    _setup_sys(root, boot)
    _setup_dev(root, boot.get("devices", []))
    mount("tmpfs", root / "run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    (root / "run" / "sshd").mkdir(mode=0o755)
    for src, dst, ro in boot.get("binds", []):
        bind(src, root / dst.lstrip("/"), readonly=ro)
    _check(_libc.sethostname(boot["hostname"].encode(), len(boot["hostname"])), "sethostname")
    pivot_into(root)
    os.umask(0o022)
    if os.path.exists(LENT_PYTHON_CONF):  # the loader must learn where the lent libpython lives
        os.spawnv(os.P_WAIT, "/sbin/ldconfig", ["ldconfig"])
    confine_syscalls()
    os.execve(boot["init"][0], boot["init"], boot["env"])


def launch(boot: dict) -> int:
    """Start one node; its PID as the host sees it. Raises RuntimeError with the reason of a failed boot.

    Runs in a forked helper process because unshare(CLONE_NEWPID) applies to the caller's later children.
    """
    unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWPID)
    rfd, wfd = os.pipe()  # the child reports a failed boot on it; a successful exec closes it (CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        os.setsid()
        # The node outlives this launcher: it must not hold the host's pipes open.
        console = os.open(boot["console"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(console, 1)
        os.dup2(console, 2)
        try:
            boot_node(boot)
        except BaseException as exc:  # anything that stops the boot is reported to the host, then exit
            os.write(wfd, f"{type(exc).__name__}: {exc}".encode())
        os._exit(1)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as fh:
        failure = fh.read().decode()
    if failure:
        os.waitpid(pid, 0)
        raise RuntimeError(failure)
    return pid


def main() -> None:
    """Boot every node named on the command line in parallel; print one JSON line per node, in order."""
    helpers = []
    for path in sys.argv[1:]:
        rfd, wfd = os.pipe()
        helper = os.fork()
        if helper == 0:
            os.close(rfd)
            try:
                reply = {"pid": launch(json.loads(Path(path).read_text()))}
            except RuntimeError as exc:  # the node's own report
                reply = {"error": str(exc)}
            except BaseException as exc:  # reported to the host, which cleans up
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(wfd, json.dumps(reply).encode())
            os._exit(0)
        os.close(wfd)
        helpers.append((path, helper, rfd))
    failed = False
    for path, helper, rfd in helpers:
        with os.fdopen(rfd, "rb") as fh:
            raw = fh.read()
        os.waitpid(helper, 0)
        reply = json.loads(raw) if raw else {"error": "launcher died"}
        failed = failed or "error" in reply
        print(json.dumps({"boot": path, **reply}), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
