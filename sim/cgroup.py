"""CPU quotas on simulated nodes (fault `cpu-throttle`): every process of a node in one cgroup with a quota.

cgroup v2 (`cpu.max`) where the unified hierarchy has the cpu controller, else the v1 cpu hierarchy
(`cpu.cfs_quota_us` / `cpu.cfs_period_us`, the same CFS bandwidth control). The group is
`ascend-sim-<run-dir hash>/<node>` under the hierarchy's root; the record of what was moved, and from
where, is `<run-dir>/nodes/<node>/cpu-throttle.json`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from ascend_ready.errors import SimError

PERIOD_US = 100_000
RECORD = "cpu-throttle.json"


def _hierarchy() -> tuple[str, Path]:
    """("v2", mount) of a unified hierarchy with the cpu controller, else ("v1", mount of the cpu one)."""
    v1 = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _source, options = [*right.split(), "", "", ""][:3]
        mount = Path(left.split()[4])
        if fstype == "cgroup2":
            with contextlib.suppress(OSError):
                if "cpu" in (mount / "cgroup.controllers").read_text().split():
                    return "v2", mount
        elif fstype == "cgroup" and "cpu" in options.split(","):
            v1 = v1 or mount
    if v1 is None:
        raise SimError("no cgroup hierarchy with the cpu controller is mounted on this host",
                       hint="mount cgroup2 at /sys/fs/cgroup (or the v1 cpu controller) to throttle nodes")
    return "v1", v1


def group_name(run_dir: Path) -> str:
    return "ascend-sim-" + hashlib.sha256(str(run_dir).encode()).hexdigest()[:8]


def _record_path(node_dir: Path) -> Path:
    return node_dir / RECORD


def node_pids(pid1: int) -> list[int]:
    """Every process of the node's PID namespace (as the host numbers them)."""
    try:
        ns = os.readlink(f"/proc/{pid1}/ns/pid")
    except OSError:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry.name}/ns/pid") == ns:
                    pids.append(int(entry.name))
    return pids


def _cgroup_of(pid: int, kind: str) -> str:
    """The path of `pid`'s cgroup in the hierarchy of `kind` (from /proc/PID/cgroup)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if (kind == "v2" and controllers == "") or (kind == "v1" and "cpu" in controllers.split(",")):
            return path
    return "/"


def _move(pid1: int, group: Path) -> None:
    """Every process of the node into `group`; again until none is left outside (they keep forking)."""
    for _ in range(10):
        try:
            inside = set((group / "cgroup.procs").read_text().split())
        except OSError:
            inside = set()
        pids = [p for p in node_pids(pid1) if str(p) not in inside]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):  # it ended meanwhile (or is a zombie)
                (group / "cgroup.procs").write_text(f"{pid}\n")


def throttle(pid1: int, node_dir: Path, run_dir: Path, node: str, pct: float) -> dict:
    """Give every process of the node (PID 1 `pid1`) at most `pct` % of one CPU; the record."""
    most = 100 * (os.cpu_count() or 1)
    if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= most:
        raise SimError(f"cpu-throttle: pct must be in (0, {most}] (percent of one CPU), not {pct!r}")
    kind, mount = _hierarchy()
    record = _load(node_dir)
    parent = mount / group_name(run_dir)
    group = parent / node
    if record is None:
        record = {"kind": kind, "mount": str(mount), "group": str(group), "original": _cgroup_of(pid1, kind)}
    try:
        group.mkdir(parents=True, exist_ok=True)
        quota = max(1000, round(PERIOD_US * pct / 100))
        if kind == "v2":
            for level in (mount, parent):
                with contextlib.suppress(OSError):  # already on, or the root's (always on)
                    (level / "cgroup.subtree_control").write_text("+cpu\n")
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    except OSError as exc:
        raise SimError(f"cpu-throttle: cannot set up {group}: {exc.strerror or exc}",
                       hint="the host must let root create cgroups with the cpu controller") from None
    record["pct"] = pct
    _move(pid1, group)
    _record_path(node_dir).write_text(json.dumps(record, indent=1) + "\n")
    return record


def _load(node_dir: Path) -> dict | None:
    try:
        return json.loads(_record_path(node_dir).read_text())
    except (OSError, ValueError):
        return None


def group_of(node_dir: Path) -> Path | None:
    """The cgroup of a throttled node (None: not throttled)."""
    record = _load(node_dir)
    return None if record is None else Path(record["group"])


def release(pid1: int | None, node_dir: Path) -> None:
    """Undo `throttle`: the node's processes back where they were, the group removed."""
    record = _load(node_dir)
    if record is None:
        return
    group = Path(record["group"])
    if pid1 is not None:
        _move(pid1, Path(record["mount"]) / record["original"].lstrip("/"))
    remove(group)
    _record_path(node_dir).unlink(missing_ok=True)


def remove(group: Path) -> None:
    """rmdir the node's group, and the cluster's when it is empty (cgroups are removed with rmdir)."""
    for path in (group, group.parent):
        with contextlib.suppress(OSError):
            path.rmdir()


def joined(pid1: int, argv: list[str]) -> list[str]:
    """`argv`, run in the cgroup of the node (PID 1 `pid1`) if it is throttled: a command started in the
    node from the host, through nsenter, then runs as slowly as the node's own."""
    try:
        kind, mount = _hierarchy()
        path = _cgroup_of(pid1, kind)
    except (OSError, SimError):
        return argv
    if "/ascend-sim-" not in path:
        return argv
    procs = mount / path.lstrip("/") / "cgroup.procs"
    # The shell joins itself ("0": the writer), then becomes the command, which stays in the group.
    return ["/bin/sh", "-c", 'echo 0 >"$0" 2>/dev/null; exec "$@"', str(procs), *argv]
