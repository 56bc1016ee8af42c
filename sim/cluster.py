"""Bring a simulated cluster up and down: node roots, keys, namespaces, network, hardware state.

The run dir (default /run/ascend-sim, env ASCEND_SIM_RUN_DIR) records everything in cluster.json;
nodes are only ever stopped by the PIDs recorded there.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import json
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ascend_ready
from ascend_ready.errors import ConfigError, PrivilegeError, SimError
from ascend_ready.sim import base, cgroup, knobs, osident, profiles
from ascend_ready.sim.net import Network
from ascend_ready.sim.nodeinit import LENT_PYTHON_CONF

log = logging.getLogger(__name__)

SIM_DIR = Path(__file__).resolve().parent  # ascend_ready.sim on the host (the repo's sim/)
ROOT_PACKAGE_DIR = Path(ascend_ready.__file__).resolve().parent  # ascend_ready (common/)
#: where the nodes import ascend_ready from (PYTHONPATH=/opt/ascend-sim/lib)
NODE_PACKAGE = "/opt/ascend-sim/lib/ascend_ready"
NODE_TOOLS = Path(__file__).resolve().parent / "node" / "bin"
SSH_USER = "root"
SUDO_USER = base.SUDO_USER
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BOOT_TIMEOUT_S = 20.0
# Inside a node: where PID 1 mounts the knob file system, and where it keeps the knob values (in the simdir,
# so the host can read them).
KNOBS_MOUNT = "/run/ascend-sim/knobs"
KNOBS_STATE = "/var/lib/ascend-sim/knobs.json"
#: the cluster's shared file system in every node: SHARED_DIR (read-write, <run-dir>/shared), as an NFS
#: /data would give, for run directories and data. On by default (a bind, nothing copied);
#: ASCEND_SIM_SHARED_FS=0 turns it off. The job runs in the training venv python_env built on each node,
#: as on a real rack: this checkout and its .venv are lent to the nodes (read-only, at their own paths)
#: only where ASCEND_SIM_LEND_CHECKOUT=1 asks for it (tests of the simulator's own plumbing).
SHARED_DIR = "/shared"
#: paths a node's own OS owns: a host checkout there is not lent (it would hide the node's files)
_NODE_OWNED = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt/ascend-sim", "/proc",
               "/run", "/sbin", "/sys", "/usr", "/var/lib/ascend-sim", "/var/lib/ascend-sim-cluster",
               SHARED_DIR)


def run_dir() -> Path:
    return Path(os.environ.get("ASCEND_SIM_RUN_DIR", "/run/ascend-sim"))


def require_root() -> None:
    if os.geteuid() != 0:
        raise PrivilegeError("ascend-sim needs root (it creates namespaces, mounts and network devices)",
                             hint="run it with sudo, or as root")


@dataclass
class Node:
    name: str
    index: int
    ip: str
    profile: str
    hardware: str
    os: str
    pid: int | None = None
    starttime: int | None = None  # /proc/<pid>/stat field 22: tells our PID from a recycled one

    def dir(self, rd: Path) -> Path:
        return rd / "nodes" / self.name

    def simdir(self, rd: Path) -> Path:
        return self.dir(rd) / "sim"

    def alive(self) -> bool:
        return self.pid is not None and _starttime(self.pid) == self.starttime


@dataclass
class Cluster:
    run_dir: Path
    subnet: str
    base: str
    nodes: list[Node] = field(default_factory=list)
    created: str = ""
    hardware_model: bool = False  # whether ascend_ready.sim.hw was there to give nodes their devices
    python_fallbacks: list[str] = field(default_factory=list)

    @property
    def net(self) -> Network:
        return Network.for_run_dir(str(self.run_dir), self.subnet)

    @property
    def ssh_dir(self) -> Path:
        return self.run_dir / "ssh"

    @property
    def key_path(self) -> Path:
        return self.ssh_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.run_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.run_dir / "ssh_config"

    @property
    def inventory_path(self) -> Path:
        return self.run_dir / "inventory.ini"

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ConfigError(f"no node named {name!r}", hint=f"nodes: {', '.join(n.name for n in self.nodes)}")

    def save(self) -> None:
        data = asdict(self)
        data["run_dir"] = str(self.run_dir)
        tmp = self.run_dir / "cluster.json.tmp"
        tmp.write_text(json.dumps({"version": 1, **data}, indent=2) + "\n")
        os.replace(tmp, self.run_dir / "cluster.json")

    @classmethod
    def load(cls, rd: Path | None = None) -> Cluster | None:
        rd = rd or run_dir()
        path = rd / "cluster.json"
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            data.pop("version", None)
            nodes = [Node(**n) for n in data.pop("nodes")]
            data["run_dir"] = Path(data["run_dir"])
            return cls(nodes=nodes, **data)
        except (ValueError, TypeError, KeyError) as exc:
            raise SimError(f"{path} is unreadable ({exc})",
                           hint="stop leftover nodes by their PIDs in that file, then remove it") from None


def load_running() -> Cluster:
    cluster = Cluster.load()
    if cluster is None:
        raise SimError(f"no simulated cluster in {run_dir()}", hint="start one with: ascend-sim up N")
    return cluster


@contextlib.contextmanager
def _lock(rd: Path) -> Iterator[None]:
    rd.mkdir(parents=True, exist_ok=True)
    with open(rd / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


#: held while a cluster starts, stops, or has its fabric changed (not re-entrant)
run_dir_lock = _lock


def fabric_dir(rd: Path) -> Path:
    """The cluster's fabric folder (ascend_ready.sim.fabric), every node's /var/lib/ascend-sim-cluster."""
    return rd / "fabric"


# -- hardware seam ------------------------------------------------------------------------------------

def hardware_api():
    """ascend_ready.sim.hw, or None while that part is not installed (nodes then boot without NPUs)."""
    try:
        from ascend_ready.sim import hw
    except ImportError:
        return None
    return hw


def _write_hardware(hw, node: Node, rd: Path) -> list[dict]:
    state = hw.initial_state(node.hardware, node_index=node.index, node_name=node.name)
    hw.write_simdir(state, node.simdir(rd))
    return hw.device_nodes(state)


# -- up -------------------------------------------------------------------------------------------------

def up(count: int, profile_spec: str | None = None, *, subnet: str | None = None) -> Cluster:
    require_root()
    if count < 1:
        raise ConfigError("a cluster needs at least one node")
    rd = run_dir()
    with _lock(rd):
        existing = Cluster.load(rd)
        if existing is not None:
            if any(n.alive() for n in existing.nodes):
                raise SimError(f"a simulated cluster is already running in {rd}",
                               hint="stop it first with: ascend-sim down")
            _down(existing)  # leftovers of a crashed or half-started cluster
        assigned = profiles.assign(count, profile_spec)
        image = base.ensure()
        started = time.monotonic()
        net = Network.for_run_dir(str(rd), subnet)
        net.check_free()
        cluster = Cluster(run_dir=rd, subnet=str(net.subnet), base=str(image.rootfs),
                          created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        for i, prof in enumerate(assigned, start=1):
            cluster.nodes.append(Node(name=f"node{i:02d}", index=i, ip=net.node_ip(i), profile=prof.name,
                                      hardware=prof.hardware, os=prof.os.name))
        hw = hardware_api()
        cluster.hardware_model = hw is not None
        if hw is None:
            log.warning("hardware model (ascend_ready.sim.hw) not installed: nodes boot without NPU devices")
        for prof in {p.name: p for p in assigned}.values():
            if prof.os.python != "system" and prof.os.python_home() is None:
                note = f"{prof.os.name}: pyenv Python {prof.os.python} not found; node keeps Debian's python3"
                log.warning(note)
                cluster.python_fallbacks.append(note)
        if osident.build(rd) is None:  # once here: the parallel node preparation only copies it
            note = "no C compiler: nodes report this machine's kernel release and glibc to uname/getconf"
            log.warning(note)
            cluster.python_fallbacks.append(note)
        cluster.save()
        try:
            _prepare_keys(cluster)
            _mount_nodes_fs(cluster.run_dir)
            _prepare_shared(cluster, hw is not None)
            boot_files = _prepare_all(cluster, hw is not None)
            if hw is not None:
                _write_fabric(cluster)
            log.debug("nodes prepared at %.2f s", time.monotonic() - started)
            _boot_all(cluster, boot_files)
            log.debug("nodes booted at %.2f s", time.monotonic() - started)
            net.create_hub()
            for node in cluster.nodes:
                net.attach(node.index, node.pid)
            _write_access_files(cluster)
            log.debug("network up at %.2f s", time.monotonic() - started)
            _wait_for_ssh(cluster)
        except BaseException:
            log.error("start failed; cleaning up")
            _down(cluster)
            raise
        log.debug("%d node(s) up in %.2f s", count, time.monotonic() - started)
        return cluster


def _mount_nodes_fs(rd: Path) -> None:
    """Node files (upper layers, simdirs) live on a tmpfs of their own: creating the many small files of
    a node is ~40x faster than on a disk-backed /run, and `down` drops it all with one unmount."""
    nodes = rd / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(nodes):
        _run(["mount", "-t", "tmpfs", "-o", "mode=0755,nosuid", "ascend-sim-nodes", str(nodes)])


def _unmount_nodes_fs(rd: Path) -> None:
    nodes = rd / "nodes"
    if os.path.ismount(nodes):
        _run(["umount", str(nodes)])


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimError(f"{' '.join(cmd)}: {proc.stderr.strip()}")


def _prepare_keys(cluster: Cluster) -> None:
    cluster.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not cluster.key_path.exists():
        _keygen(cluster.key_path, "ascend-sim-controller")


def _keygen(path: Path, comment: str) -> None:
    proc = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimError(f"ssh-keygen failed: {proc.stderr.strip()}", hint="install openssh-client")


def _prepare_node(cluster: Cluster, node: Node, with_hardware: bool) -> Path:
    """Write everything the node boots from (its upper layer, simdir, boot.json); the boot file's path."""
    rd = cluster.run_dir
    prof = profiles.get(node.profile)
    ndir = node.dir(rd)
    shutil.rmtree(ndir, ignore_errors=True)
    for sub in ("upper", "work", "root", "sim"):
        (ndir / sub).mkdir(parents=True)
    upper = ndir / "upper"
    lower = Path(cluster.base)
    _write_identity(cluster, node, prof, upper, lower)
    devices = _write_hardware(hardware_api(), node, rd) if with_hardware else []
    (node.simdir(rd) / KNOBS_STATE.rsplit("/", 1)[1]).write_text(
        json.dumps({**knobs.DEFAULTS, **dict(prof.os.knobs)}, indent=2, sort_keys=True) + "\n")
    binds = [*_package_binds(upper, ndir / "root"), (str(node.simdir(rd)), "/var/lib/ascend-sim", False)]
    home = prof.os.python_home()
    if home is not None:
        binds.append((str(home), f"/opt/python/{prof.os.python}", True))
    binds += _cluster_binds(cluster, upper, lower, with_hardware)
    boot = {
        "root": str(ndir / "root"), "lower": str(lower), "upper": str(upper), "work": str(ndir / "work"),
        "node_dir": str(ndir), "simdir": str(node.simdir(rd)), "hostname": node.name,
        "console": str(ndir / "console.log"), "devices": devices, "binds": binds,
        "init": [base.PRIVATE_PYTHON, "-m", "ascend_ready.sim.supervisor"],
        "env": {"PATH": NODE_PATH, "PYTHONPATH": "/opt/ascend-sim/lib", "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1", "ASCEND_SIM_KNOBS_MOUNT": KNOBS_MOUNT,
                "ASCEND_SIM_KNOBS_STATE": KNOBS_STATE,
                "ASCEND_SIM_KNOB_CHOICES": json.dumps(dict(prof.os.knob_choices))},
    }
    boot_file = ndir / "boot.json"
    boot_file.write_text(json.dumps(boot, indent=2))
    return boot_file


# -- what every node shares: the fabric and the shared file system -------------------------------------

def shared_fs_enabled() -> bool:
    return os.environ.get("ASCEND_SIM_SHARED_FS", "1") != "0"


def _node_owned(path: Path) -> bool:
    text = str(path)
    return text == "/" or any(text == p or text.startswith(p + "/") for p in _NODE_OWNED)


def lend_checkout() -> bool:
    """Whether nodes also get this checkout and its .venv (ASCEND_SIM_LEND_CHECKOUT=1; off by default:
    a real rack has no such path, and a job that used it would run other code than the node's venv)."""
    return os.environ.get("ASCEND_SIM_LEND_CHECKOUT", "0") == "1"


def shared_checkout() -> list[Path]:
    """Host paths every node gets read-only at the same path where lend_checkout(): this checkout (with
    its .venv) and the interpreter that venv runs (pyvenv.cfg `home`), unless it lies where the node's OS
    has its own files (/usr: then the node's Debian bookworm python3.11 stands in, where its profile keeps
    it)."""
    if not shared_fs_enabled() or not lend_checkout():
        return []
    checkout = ROOT_PACKAGE_DIR.parent
    if not (checkout / "pyproject.toml").is_file():
        return []  # an installed package, not a checkout
    paths = [checkout]
    with contextlib.suppress(OSError):
        for line in (checkout / ".venv" / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                prefix = Path(value.strip()).resolve().parent
                if not prefix.is_relative_to(checkout):
                    paths.append(prefix)
    return [p for p in paths if not _node_owned(p)]


def _prepare_shared(cluster: Cluster, with_hardware: bool) -> None:
    """The host side of what nodes share: <run-dir>/shared, and the fabric folder with a mount point per
    node (nodes/<name>, where every node sees that node's simdir)."""
    rd = cluster.run_dir
    if shared_fs_enabled():
        (rd / "shared").mkdir(exist_ok=True)
        os.chmod(rd / "shared", 0o1777)  # like /tmp: every node's users write their runs there
    if with_hardware:
        shutil.rmtree(fabric_dir(rd), ignore_errors=True)
        for node in cluster.nodes:
            (fabric_dir(rd) / "nodes" / node.name).mkdir(parents=True)


def _write_fabric(cluster: Cluster) -> None:
    from ascend_ready.sim import fabric

    rd = cluster.run_dir
    states = {n.name: json.loads((n.simdir(rd) / "state.json").read_text()) for n in cluster.nodes}
    fabric.save(fabric_dir(cluster.run_dir), fabric.initial(states))


def mount_point(upper: Path, lower: Path, path: str) -> Path:
    """Make `path`'s directories in the node's upper layer, each with the mode of the node's own directory
    where the base has one: a checkout lent at /tmp/x must not leave the node a /tmp of mode 0755 (its
    users could no longer write there; /tmp is 1777 on every real host)."""
    made = upper
    for part in Path(path.lstrip("/")).parts:
        made, below = made / part, lower / made.relative_to(upper) / part
        if not made.exists():
            made.mkdir()
            if below.is_dir() and not below.is_symlink():
                os.chmod(made, below.stat().st_mode & 0o7777)
    return made


def _cluster_binds(cluster: Cluster, upper: Path, lower: Path,
                   with_hardware: bool) -> list[tuple[str, str, bool]]:
    """Binds of what every node shares (mount points made in the node's upper layer): the fabric folder
    and each node's simdir in it (read-only), /shared (read-write) and, where lent, the checkout
    (read-only)."""
    rd = cluster.run_dir
    points: list[tuple[str, str, bool]] = []
    if shared_fs_enabled():
        points.append((str(rd / "shared"), SHARED_DIR, False))
        points += [(str(p), str(p), True) for p in shared_checkout()]
    if with_hardware:
        from ascend_ready.sim.fabric import CLUSTER_ROOT

        points.append((str(fabric_dir(rd)), CLUSTER_ROOT, True))
    for _src, dst, _ro in points:
        mount_point(upper, lower, dst)
    if with_hardware:  # their mount points are in the fabric folder (_prepare_shared)
        points += [(str(n.simdir(rd)), f"{CLUSTER_ROOT}/nodes/{n.name}", True) for n in cluster.nodes]
    return points


def package_entries() -> list[tuple[str, Path]]:
    """(name, host path) of what a node's `ascend_ready` package directory holds: common/ entries, sim."""
    entries = [(p.name, p) for p in sorted(ROOT_PACKAGE_DIR.iterdir()) if p.name != "__pycache__"]
    return [*entries, ("sim", SIM_DIR)]


def link_package(lib: Path) -> Path:
    """Lay out `lib/ascend_ready` as a node sees it, with symlinks (host-side runs of node tools); `lib`."""
    package = lib / "ascend_ready"
    package.mkdir(parents=True, exist_ok=True)
    for name, src in package_entries():
        if not (package / name).is_symlink():
            (package / name).symlink_to(src)
    return lib


def _package_binds(upper: Path, root: Path) -> list[tuple[str, str, bool]]:
    """Read-only binds that give the node the host's `ascend_ready` root package and `ascend_ready.sim`.

    The two live in different folders of the repo (common/ and sim/), so the node's package directory is
    assembled entry by entry: a mount point for each in the node's upper layer, then a bind over it. The
    directory itself is first bound onto itself read-only (`root`: where the node's overlay is mounted
    while it boots), so nothing can be added to the lent package from inside the node.
    """
    binds = [(str(root) + NODE_PACKAGE, NODE_PACKAGE, True)]
    for name, src in package_entries():
        point = upper / NODE_PACKAGE.lstrip("/") / name
        if src.is_dir():
            point.mkdir(parents=True, exist_ok=True)
        else:
            point.parent.mkdir(parents=True, exist_ok=True)
            point.touch()
        binds.append((str(src), f"{NODE_PACKAGE}/{name}", True))
    return binds


def _prepare_all(cluster: Cluster, with_hardware: bool) -> list[Path]:
    """Prepare the nodes in parallel processes (the hardware model's writing is CPU-bound Python)."""
    workers = max(1, min(len(cluster.nodes), os.cpu_count() or 1))
    if workers == 1:
        return [_prepare_node(cluster, n, with_hardware) for n in cluster.nodes]
    ctx = multiprocessing.get_context("fork")  # no threads exist here yet, so forking is safe
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [pool.submit(_prepare_node, cluster, n, with_hardware) for n in cluster.nodes]
        return [f.result() for f in futures]


def _boot_all(cluster: Cluster, boot_files: list[Path]) -> None:
    """Start every node at once through one launcher; record each PID as soon as it is known."""
    proc = subprocess.run([sys.executable, "-m", "ascend_ready.sim.nodeinit", *map(str, boot_files)],
                          capture_output=True, text=True, timeout=BOOT_TIMEOUT_S)
    replies = {}
    for line in proc.stdout.splitlines():
        with contextlib.suppress(ValueError):
            reply = json.loads(line)
            replies[reply["boot"]] = reply
    errors = []
    for node, boot_file in zip(cluster.nodes, boot_files, strict=True):
        missing = {"error": f"no reply from the launcher: {proc.stderr.strip()[-500:]}"}
        reply = replies.get(str(boot_file), missing)
        if "pid" in reply:
            node.pid = reply["pid"]
            node.starttime = _starttime(node.pid)
        else:
            errors.append(f"{node.name}: {reply['error']}")
    cluster.save()  # before raising: `down` must find every node that did start
    if errors:
        raise SimError("boot failed:\n  " + "\n  ".join(errors),
                       hint=f"see the nodes' console.log under {cluster.run_dir / 'nodes'}")


def _write_identity(cluster: Cluster, node: Node, prof: profiles.Profile, upper: Path, lower: Path) -> None:
    """Everything that makes this node itself: OS files, hostname, host key, authorized keys, Python."""
    shutil.copytree(prof.os.files, upper, symlinks=True, dirs_exist_ok=True)
    etc = upper / "etc"
    (etc / "hostname").write_text(node.name + "\n")
    hosts = ["127.0.0.1\tlocalhost", f"{node.ip}\t{node.name}", "::1\tlocalhost ip6-localhost ip6-loopback"]
    hosts += [f"{n.ip}\t{n.name}" for n in cluster.nodes if n is not node]
    (etc / "hosts").write_text("\n".join(hosts) + "\n")
    (etc / "resolv.conf").write_text("# no DNS inside the simulated cluster: names are in /etc/hosts\n")
    for path in prof.os.hide:
        _whiteout(upper, path)
    ssh = etc / "ssh"
    (ssh / "sshd_config.d").mkdir(parents=True, exist_ok=True)
    _keygen(ssh / "ssh_host_ed25519_key", f"root@{node.name}")
    (ssh / "sshd_config.d" / "ascend-sim.conf").write_text(
        "# written by ascend-sim: key logins only, no DNS look-ups\n"
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UseDNS no\n")
    pub = Path(str(cluster.key_path) + ".pub").read_text()
    uid, gid = _user_ids(lower, SUDO_USER)
    for home, owner in ((upper / "root", (0, 0)), (upper / "home" / SUDO_USER, (uid, gid))):
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        (home / ".ssh" / "authorized_keys").write_text(pub)
        for p in (home, home / ".ssh", home / ".ssh" / "authorized_keys"):
            os.chown(p, *owner)
        os.chmod(home / ".ssh", 0o700)
    os.chmod(upper / "root", 0o700)
    _install_python(prof, upper, lower)
    _install_tools(prof, upper)
    osident.install(upper, lower, prof.os, osident.build(cluster.run_dir))


def _install_python(prof: profiles.Profile, upper: Path, lower: Path) -> None:
    """The profile's Python is the node's only one: hide Debian's python3 and link in the lent one."""
    if prof.os.python == "system" or prof.os.python_home() is None:
        return  # up() reports the fallback
    series = prof.os.python_series
    usr_bin = upper / "usr" / "bin"
    usr_bin.mkdir(parents=True, exist_ok=True)
    for p in (lower / "usr" / "bin").iterdir():
        if p.name.startswith(("python3", "pydoc3", "pygettext3")):
            _whiteout(upper, f"/usr/bin/{p.name}")
    (usr_bin / "python3").unlink()
    os.symlink(f"python{series}", usr_bin / "python3")
    (usr_bin / f"python{series}").unlink(missing_ok=True)
    os.symlink(f"/opt/python/{prof.os.python}/bin/python{series}", usr_bin / f"python{series}")
    # The lent interpreter's libpython has a RUNPATH into the host's pyenv; the loader finds it here instead.
    conf = upper / "etc" / "ld.so.conf.d"
    conf.mkdir(parents=True, exist_ok=True)
    (upper / LENT_PYTHON_CONF.lstrip("/")).write_text(f"/opt/python/{prof.os.python}/lib\n")
    (upper / "opt" / "python" / prof.os.python).mkdir(parents=True, exist_ok=True)


def _install_tools(prof: profiles.Profile, upper: Path) -> None:
    """Fake lspci/dmesg/chronyc/lscpu/numactl from the hardware part (chronyc and numactl where their packages
    put them)."""
    local = upper / "usr" / "local"
    places = (("lspci", local / "sbin"), ("dmesg", local / "bin"), ("chronyc", upper / "usr" / "bin"),
              ("lscpu", local / "bin"), ("numactl", upper / "usr" / "bin"))
    for tool, where in places:
        src = NODE_TOOLS / tool
        if src.is_file():
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, where / tool)
            os.chmod(where / tool, 0o755)


def _whiteout(upper: Path, path: str) -> None:
    """Hide a file of the base from this node (an overlayfs whiteout: a 0:0 character device)."""
    target = upper / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        target.unlink()
    os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))


def _user_ids(root: Path, user: str) -> tuple[int, int]:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        parts = line.split(":")
        if parts[0] == user:
            return int(parts[2]), int(parts[3])
    raise SimError(f"user {user} missing from the base image", hint="rebuild it: ascend-sim base clean")


def enable_ipv6(cluster: Cluster) -> dict[str, str]:
    """Every node dual-stack (sim/net.py Network.enable_ipv6), its IPv6 address in known_hosts too, so a
    controller can reach it at either; node name -> IPv6 address. disable_ipv6 undoes it."""
    net = cluster.net
    net.enable_ipv6({n.index: n.pid for n in cluster.nodes})
    _write_known_hosts(cluster, ipv6=True)
    return {n.name: net.node_ip6(n.index) for n in cluster.nodes}


def disable_ipv6(cluster: Cluster) -> None:
    cluster.net.disable_ipv6({n.index: n.pid for n in cluster.nodes})
    _write_known_hosts(cluster)


def _write_known_hosts(cluster: Cluster, *, ipv6: bool = False) -> None:
    """Each node's host key under its name and its addresses (IPv6 too while enable_ipv6 holds)."""
    lines = []
    for node in cluster.nodes:
        pub = (node.dir(cluster.run_dir) / "upper/etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
        names = [node.name, node.ip, *([cluster.net.node_ip6(node.index)] if ipv6 else [])]
        lines.append(f"{','.join(names)} {pub[0]} {pub[1]}")
    cluster.known_hosts.write_text("\n".join(lines) + "\n")


def _write_access_files(cluster: Cluster) -> None:
    from ascend_ready.sim import inventory

    _write_known_hosts(cluster)
    cluster.ssh_config.write_text(inventory.ssh_config(cluster))
    cluster.inventory_path.write_text(inventory.ini(cluster))


def _wait_for_ssh(cluster: Cluster) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    pending = {n.name: n for n in cluster.nodes}
    while pending:
        for name, node in list(pending.items()):
            if not node.alive():
                raise SimError(f"{name} died while booting",
                               hint=f"see {node.dir(cluster.run_dir) / 'console.log'}")
            with contextlib.suppress(OSError), socket.create_connection((node.ip, 22), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH-"):
                    del pending[name]
        if pending and time.monotonic() > deadline:
            raise SimError(f"sshd did not come up on {', '.join(pending)} within {BOOT_TIMEOUT_S:.0f} s")
        if pending:
            time.sleep(0.05)


# -- down -----------------------------------------------------------------------------------------------

def down() -> Cluster | None:
    """Stop every recorded node, remove the network and node directories. Idempotent."""
    require_root()
    rd = run_dir()
    with _lock(rd):
        cluster = Cluster.load(rd)
        if cluster is None:  # a cluster that died before writing cluster.json
            Network.for_run_dir(str(rd)).destroy()
            _unmount_nodes_fs(rd)
            return None
        _down(cluster)
        return cluster


def _down(cluster: Cluster) -> None:
    live = [n for n in cluster.nodes if n.alive()]
    for node in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while any(n.alive() for n in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    for node in live:
        if node.alive():
            log.warning("%s (pid %d) ignored SIGTERM; killing it", node.name, node.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while any(n.alive() for n in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    if still := [n.name for n in live if n.alive()]:
        raise SimError(f"nodes still running after SIGKILL: {', '.join(still)}")
    for node in cluster.nodes:  # a throttled node's cgroup, empty now
        cgroup.release(None, node.dir(cluster.run_dir))
    cluster.net.destroy()
    _unmount_nodes_fs(cluster.run_dir)
    shutil.rmtree(cluster.run_dir / "nodes", ignore_errors=True)
    shutil.rmtree(fabric_dir(cluster.run_dir), ignore_errors=True)
    shutil.rmtree(cluster.run_dir / "shared", ignore_errors=True)  # run outputs go with the cluster
    for name in ("cluster.json", "inventory.ini", "ssh_config", "known_hosts"):
        (cluster.run_dir / name).unlink(missing_ok=True)


# -- inside a node -------------------------------------------------------------------------------------

def nsenter_argv(node: Node, argv: list[str]) -> list[str]:
    """A command line that runs argv inside the node (all its namespaces, its root, as root, and its
    cgroup when it is throttled)."""
    if not node.alive():
        raise SimError(f"{node.name} is not running",
                       hint="restart the cluster: ascend-sim down; ascend-sim up N")
    return cgroup.joined(node.pid, [
        "nsenter", "-t", str(node.pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w",
        "env", "-i", f"PATH={NODE_PATH}", "HOME=/root", "LANG=C.UTF-8", f"HOSTNAME={node.name}",
        "TERM=" + os.environ.get("TERM", "dumb"), *argv])


def node_exec(node: Node, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(nsenter_argv(node, argv), **kwargs)


def _starttime(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie is dead, merely not yet reaped
