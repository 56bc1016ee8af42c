"""Per-node kernel knobs (NUMA balancing, THP) with the kernel's own read/write semantics, over FUSE.

A tiny FUSE server (pure Python over /dev/fuse, run by the node's PID 1) serves the files that the node
sees as /proc/sys/kernel/numa_balancing and /sys/kernel/mm/transparent_hugepage/{enabled,defrag}:
reads give the kernel's format (`always madvise [never]`), bad writes fail with EINVAL, and no write
can reach the host kernel. Stdlib only (runs with the node's private interpreter).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import struct
import threading
from pathlib import Path

# name -> (choices or None for an integer knob, allowed integer range)
THP_ENABLED = ("always", "madvise", "never")
THP_DEFRAG = ("always", "defer", "defer+madvise", "madvise", "never")
SPECS: dict[str, tuple[tuple[str, ...] | None, range | None]] = {
    "numa_balancing": (None, range(0, 4)),  # 0 off, 1 normal, 2 memory tiering, 3 both (Linux >= 5.18)
    "thp_enabled": (THP_ENABLED, None),
    "thp_defrag": (THP_DEFRAG, None),
}
# A stock distribution kernel on a multi-socket server: balancing on, THP always, defrag madvise.
DEFAULTS = {"numa_balancing": "1", "thp_enabled": "always", "thp_defrag": "madvise"}
# Where each knob appears inside a node.
NODE_PATHS = {
    "numa_balancing": "/proc/sys/kernel/numa_balancing",
    "thp_enabled": "/sys/kernel/mm/transparent_hugepage/enabled",
    "thp_defrag": "/sys/kernel/mm/transparent_hugepage/defrag",
}


class KnobError(ValueError):
    """A write the kernel would refuse with EINVAL."""


def render(name: str, value: str, choices: tuple[str, ...] | None = None) -> str:
    """The file content the kernel shows for a knob holding `value` (choices: the kernel's, if not ours)."""
    choices = choices or SPECS[name][0]
    if choices is None:
        return f"{value}\n"
    return " ".join(f"[{c}]" if c == value else c for c in choices) + "\n"


def parse_write(name: str, data: bytes, choices: tuple[str, ...] | None = None) -> str:
    """The value a write of `data` sets, as the kernel reads it; KnobError where the kernel says EINVAL."""
    default_choices, allowed = SPECS[name]
    choices = choices or default_choices
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KnobError(f"{name}: not ASCII") from None
    if choices is None:
        # proc_dointvec: leading/trailing whitespace allowed, one integer, range-checked
        word = text.strip()
        if not word.lstrip("-").isdigit() or int(word) not in allowed:
            raise KnobError(f"{name}: {word!r} is not in {allowed.start}..{allowed.stop - 1}")
        return str(int(word))
    # sysfs_streq: exact match, except one trailing newline
    word = text[:-1] if text.endswith("\n") else text
    if word not in choices:
        raise KnobError(f"{name}: {word!r} is not one of {', '.join(choices)}")
    return word


class KnobStore:
    """Current knob values, persisted as JSON so the host (and a restarted supervisor) can read them.

    `choices` overrides a knob's kernel choices where the node's kernel is older (CentOS 7's 3.10 has
    no `defer` THP defrag modes)."""

    def __init__(self, state_file: str | Path, choices: dict[str, list[str]] | None = None):
        self.path = Path(state_file)
        self.choices = {name: tuple(c) for name, c in (choices or {}).items()}
        self.lock = threading.Lock()
        try:
            self.values = {**DEFAULTS, **json.loads(self.path.read_text())}
        except (OSError, ValueError):
            self.values = dict(DEFAULTS)
        self._save()

    def read(self, name: str) -> bytes:
        with self.lock:
            return render(name, self.values[name], self.choices.get(name)).encode()

    def write(self, name: str, data: bytes) -> None:
        value = parse_write(name, data, self.choices.get(name))
        with self.lock:
            self.values[name] = value
            self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.values, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


# -- FUSE protocol (linux/fuse.h, ABI 7.31) -----------------------------------------------------------

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_SETATTR = 1, 2, 3, 4
FUSE_OPEN, FUSE_READ, FUSE_WRITE, FUSE_STATFS, FUSE_RELEASE = 14, 15, 16, 17, 18
FUSE_FSYNC, FUSE_FLUSH, FUSE_INIT = 20, 25, 26
FUSE_OPENDIR, FUSE_READDIR, FUSE_RELEASEDIR, FUSE_ACCESS = 27, 28, 29, 34
FUSE_INTERRUPT, FUSE_DESTROY, FUSE_BATCH_FORGET = 36, 38, 42
NO_REPLY = {FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT}
FOPEN_DIRECT_IO = 1  # every read and write reaches us: the file's size is meaningless, as in sysfs
IN_HEADER = struct.Struct("<IIQQIIIHH")
OUT_HEADER = struct.Struct("<IiQ")
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
ROOT_ID = 1


class KnobFs:
    """The FUSE file system: a root directory holding one file per knob."""

    def __init__(self, store: KnobStore):
        self.store = store
        self.names = list(SPECS)
        self.ids = {name: ROOT_ID + 1 + i for i, name in enumerate(self.names)}

    def _attr(self, nodeid: int) -> bytes:
        if nodeid == ROOT_ID:
            mode, nlink, size = stat.S_IFDIR | 0o755, 2, 0
        else:
            mode, nlink, size = stat.S_IFREG | 0o644, 1, 4096
        return ATTR.pack(nodeid, size, 0, 0, 0, 0, 0, 0, 0, mode, nlink, 0, 0, 0, 4096, 0)

    def _name(self, nodeid: int) -> str:
        for name, i in self.ids.items():
            if i == nodeid:
                return name
        raise OSError(errno.ENOENT, "no such knob")

    def handle(self, opcode: int, nodeid: int, body: bytes) -> bytes:
        """The reply payload for one request; OSError(errno) for an error reply."""
        if opcode == FUSE_INIT:
            major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
            if major != 7:
                raise OSError(errno.EPROTO, "FUSE major version")
            return struct.pack("<IIIIHHIIHHI28x", 7, min(minor, 31), readahead, 0, 16, 12, 65536, 1, 0, 0, 0)
        if opcode == FUSE_LOOKUP:
            name = body.split(b"\0", 1)[0].decode()
            if nodeid != ROOT_ID or name not in self.ids:
                raise OSError(errno.ENOENT, name)
            return struct.pack("<QQQQII", self.ids[name], 0, 1, 1, 0, 0) + self._attr(self.ids[name])
        if opcode in (FUSE_GETATTR, FUSE_SETATTR):  # SETATTR: O_TRUNC before a write; nothing to truncate
            return struct.pack("<QII", 1, 0, 0) + self._attr(nodeid)
        if opcode in (FUSE_OPEN, FUSE_OPENDIR):
            return struct.pack("<QII", 0, FOPEN_DIRECT_IO if opcode == FUSE_OPEN else 0, 0)
        if opcode == FUSE_READ:
            offset, size = struct.unpack_from("<8xQI", body)
            return self.store.read(self._name(nodeid))[offset:offset + size]
        if opcode == FUSE_WRITE:
            size = struct.unpack_from("<16xI", body)[0]
            try:
                self.store.write(self._name(nodeid), body[40:40 + size])
            except KnobError:
                raise OSError(errno.EINVAL, "invalid value") from None
            return struct.pack("<II", size, 0)
        if opcode == FUSE_READDIR:
            offset, size = struct.unpack_from("<8xQI", body)
            entries = [(".", ROOT_ID, stat.S_IFDIR), ("..", ROOT_ID, stat.S_IFDIR)]
            entries += [(n, i, stat.S_IFREG) for n, i in self.ids.items()]
            out = b""
            for pos, (name, ino, kind) in enumerate(entries[offset:], start=offset + 1):
                raw = name.encode()
                dirent = struct.pack("<QQII", ino, pos, len(raw), kind >> 12) + raw
                dirent += b"\0" * (-len(dirent) % 8)
                if len(out) + len(dirent) > size:
                    break
                out += dirent
            return out
        if opcode == FUSE_STATFS:
            return struct.pack("<QQQQQIIII24x", 0, 0, 0, 0, 0, 4096, 255, 4096, 0)
        if opcode in (FUSE_RELEASE, FUSE_RELEASEDIR, FUSE_FLUSH, FUSE_FSYNC, FUSE_ACCESS, FUSE_DESTROY):
            return b""
        raise OSError(errno.ENOSYS, f"opcode {opcode}")

    def serve(self, fd: int) -> None:
        while True:
            try:
                request = os.read(fd, 135168)
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):  # ENOENT: request was interrupted
                    continue
                return  # ENODEV: unmounted
            _length, opcode, unique, nodeid, *_ = IN_HEADER.unpack_from(request)
            if opcode in NO_REPLY:
                continue
            try:
                payload, error = self.handle(opcode, nodeid, request[IN_HEADER.size:]), 0
            except OSError as exc:
                payload, error = b"", -(exc.errno or errno.EIO)
            # ENOENT: the requester went away (interrupted); the kernel drops the reply
            with contextlib.suppress(OSError):
                os.write(fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), error, unique) + payload)
            if opcode == FUSE_DESTROY:
                return


def mount_knobs(mountpoint: str, state_file: str, choices: dict | None = None) -> threading.Thread:
    """Mount the knob file system at mountpoint and serve it from a daemon thread."""
    from ascend_ready.sim.nodeinit import MS_NODEV, MS_NOSUID, mount

    os.makedirs(mountpoint, exist_ok=True)
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    mount("ascend-sim-knobs", mountpoint, "fuse.ascend-sim-knobs", MS_NOSUID | MS_NODEV,
          f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions")
    fs = KnobFs(KnobStore(state_file, choices))
    thread = threading.Thread(target=fs.serve, args=(fd,), name="knobs-fuse", daemon=True)
    thread.start()
    return thread


def serve_in_background(mountpoint: str, state_file: str, choices: dict | None = None) -> threading.Thread:
    """In a booted node: mount the knob files and bind each over the node path it stands for."""
    from ascend_ready.sim.nodeinit import bind

    thread = mount_knobs(mountpoint, state_file, choices)
    for name, node_path in NODE_PATHS.items():
        bind(os.path.join(mountpoint, name), node_path)
    return thread
