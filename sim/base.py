"""The shared Debian root every simulated node overlays: built once with debootstrap, then cached.

The cache key is a hash of the recipe below, so changing the recipe builds a fresh base beside the old.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ascend_ready.errors import SimError

log = logging.getLogger(__name__)

SUITE = "bookworm"
MIRROR = os.environ.get("ASCEND_SIM_MIRROR", "http://deb.debian.org/debian")
PACKAGES = (
    "openssh-server", "openssh-sftp-server", "sudo", "iproute2", "procps", "iputils-ping", "python3",
    "python3-apt", "ca-certificates", "kmod", "less", "xz-utils", "bzip2", "file", "gzip", "tar",
    # the Ascend driver installer refuses to run without ifconfig (net-tools); lspci is the simulator's own
    "net-tools",
    # the fleet's own machinery, real Debian daemons (never mocks): Slurm (slurmctld on one node, slurmd on
    # every node, munge for their authentication; sim/harness/slurm.py configures and starts them) and
    # Prometheus' node_exporter with its textfile collector
    "munge", "slurmd", "slurmctld", "slurm-client", "prometheus-node-exporter",
)
#: the simulator's private interpreter: Debian's python3.11 binary (its stdlib stays in /usr/lib/python3.11)
PRIVATE_PYTHON = "/opt/ascend-sim/bin/python3"
SUDO_USER = "ascend"

# Runs inside the fresh root (chroot). Host keys are removed because every node gets its own at `up`;
# the sudo user's password field is "*" (no password) rather than "!" (locked), because sshd refuses
# key logins to locked accounts.
POST_INSTALL = f"""
set -eu
rm -f /etc/ssh/ssh_host_*
useradd -m -s /bin/bash -G sudo {SUDO_USER}
usermod -p '*' {SUDO_USER}
echo '{SUDO_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{SUDO_USER}
chmod 0440 /etc/sudoers.d/{SUDO_USER}
mkdir -p /opt/ascend-sim/bin /opt/ascend-sim/lib/ascend_ready /var/lib/ascend-sim /run/sshd
cp /usr/bin/python3.11 {PRIVATE_PYTHON}
mkdir -p /root/.ssh /home/{SUDO_USER}/.ssh
chmod 700 /root/.ssh /home/{SUDO_USER}/.ssh
chown {SUDO_USER}:{SUDO_USER} /home/{SUDO_USER}/.ssh
rm -f /etc/machine-id /var/lib/dbus/machine-id
# every cluster gets its own munge key from the harness: none baked into the shared base
rm -f /etc/munge/munge.key
apt-get clean
rm -rf /var/lib/apt/lists/*
"""

RECIPE_VERSION = 1


def cache_root() -> Path:
    return Path(os.environ.get("ASCEND_SIM_CACHE_DIR", "/var/cache/ascend-sim"))


def recipe_hash() -> str:
    recipe = json.dumps({"v": RECIPE_VERSION, "suite": SUITE, "packages": PACKAGES,
                         "post": POST_INSTALL}, sort_keys=True)
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class BaseImage:
    path: Path  # the directory holding rootfs/ and recipe.json

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"

    @property
    def ready(self) -> bool:
        return (self.path / "recipe.json").is_file() and self.rootfs.is_dir()


def current() -> BaseImage:
    return BaseImage(cache_root() / f"base-{recipe_hash()}")


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure() -> BaseImage:
    """The cached base, building it first if needed (minutes, once per recipe)."""
    image = current()
    if image.ready:
        return image
    with _build_lock():
        if image.ready:  # another process built it while we waited for the lock
            return image
        _build(image)
    return image


def _build(image: BaseImage) -> None:
    if not shutil.which("debootstrap"):
        raise SimError("debootstrap is not installed", hint="run: sudo bash scripts/system-deps.sh")
    for stale in cache_root().glob("base-*.tmp-*"):  # left by a build that was killed (we hold the lock)
        _discard(stale)
    tmp = image.path.with_name(image.path.name + f".tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    try:
        _build_into(tmp)
    except BaseException:
        _discard(tmp)
        raise
    os.rename(tmp, image.path)  # atomic: a half-built base is never seen as ready
    log.info("base image ready: %s", image.path)


def _discard(path: Path) -> None:
    """Remove a half-built base; debootstrap may have left /proc or /sys mounted inside it."""
    prefix = str(path.resolve()) + "/"
    mounted = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mountpoint in sorted((m for m in mounted if m.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", mountpoint], check=False)
    shutil.rmtree(path, ignore_errors=True)


def _build_into(tmp: Path) -> None:
    rootfs = tmp / "rootfs"
    started = time.monotonic()
    log.info("building the node base image (debootstrap %s, once; a few minutes) in %s", SUITE, tmp)
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), MIRROR]
    _run(cmd, "debootstrap")
    _run(["chroot", str(rootfs), "/bin/sh", "-c", POST_INSTALL], "base post-install")
    (tmp / "recipe.json").write_text(json.dumps({
        "hash": recipe_hash(), "suite": SUITE, "mirror": MIRROR, "packages": PACKAGES,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.monotonic() - started, 1)}, indent=2) + "\n")


def _run(cmd: list[str], what: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise SimError(f"{what} failed (exit {proc.returncode}):\n{tail}",
                       hint="check network access to the Debian mirror (ASCEND_SIM_MIRROR) and disk space")


def status() -> dict:
    image = current()
    info: dict = {"path": str(image.path), "hash": recipe_hash(), "ready": image.ready}
    if image.ready:
        info.update(json.loads((image.path / "recipe.json").read_text()))
    info["stale"] = sorted(p.name for p in cache_root().glob("base-*") if p != image.path)
    return info


def clean(*, all_versions: bool = False) -> list[Path]:
    """Remove stale bases (and the current one too with all_versions). Returns what was removed."""
    removed = []
    if not cache_root().is_dir():
        return removed
    with _build_lock():
        in_use = bases_in_use()
        for p in cache_root().glob("base-*"):
            if p.name in in_use:
                log.warning("keeping %s: running nodes overlay it", p)
            elif all_versions or p != current().path:
                _discard(p)
                removed.append(p)
    return removed


def bases_in_use() -> set[str]:
    """Names of the bases that running nodes overlay (seen in any process's mount table)."""
    marker = f"lowerdir={cache_root()}/"
    used = set()
    for mountinfo in Path("/proc").glob("[0-9]*/mountinfo"):
        try:
            text = mountinfo.read_text()
        except OSError:
            continue  # the process ended meanwhile
        for part in text.split(marker)[1:]:
            used.add(part.split("/", 1)[0])
    return used
