"""Node-side tools: `python3 -m ascend_ready.sim.node.tool <npu-smi|hccn_tool|lspci|dmesg|chronyc|lscpu|numactl> ARGS`.

Reads the simdir (ASCEND_SIM_ROOT, default /var/lib/ascend-sim) and the node's files (ASCEND_SIM_FSROOT,
default /), prints what the real tool prints, exits with its status, and refreshes the render cache
that the shell wrappers in bin/ serve on their fast path.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ascend_ready.sim.fabric import Fabric, cluster_root_from_env
from ascend_ready.sim.hw import numa
from ascend_ready.sim.hw.state import NodeView, all_chips, fsroot_from_env, simdir_from_env
from ascend_ready.sim.render import ascend_dmi, chrony, hccn, lspci, npu_smi
from ascend_ready.sim.render.npu_smi import ToolError

TOOLS = ("npu-smi", "hccn_tool", "lspci", "dmesg", "chronyc", "lscpu", "ascend-dmi")
NPU_SMI_USAGE = npu_smi.TOPO_UNKNOWN


def npu_smi_run(view: NodeView, args: list[str]) -> str:
    """One `npu-smi` invocation; raises ToolError for what the real tool rejects."""
    if args == ["info"]:
        return npu_smi.info(view)
    if args == ["info", "-m"]:
        return npu_smi.mapping(view)
    if args == ["info", "-l"]:
        return npu_smi.listing(view)
    if args == ["info", "-t", "topo"]:
        return npu_smi.topo(view)
    if not args or args[0] != "info" or len(args) % 2 == 0:
        raise ToolError(NPU_SMI_USAGE)
    opts = dict(zip(args[1::2], args[2::2], strict=True))
    if set(opts) - {"-t", "-i", "-c"} or "-t" not in opts or "-i" not in opts:
        raise ToolError(NPU_SMI_USAGE)
    render = npu_smi.INFO_TYPES.get(opts["-t"])
    if render is None:
        raise ToolError(NPU_SMI_USAGE)
    if not opts["-i"].isdigit():
        raise ToolError("Invalid card id.\n")
    if "-c" in opts and not opts["-c"].isdigit():
        raise ToolError("Invalid chip id.\n")
    return render(view, int(opts["-i"]), int(opts["-c"]) if "-c" in opts else None)


# ---------------------------------------------------------------- render cache (shared with bin/_wrapper.sh)

def _first_line(path: Path) -> str:
    try:
        with path.open() as f:
            return f.readline().strip()
    except OSError:
        return ""


def cache_prefix(simdir: Path, fsroot: Path) -> str | None:
    """The part of every cache key that names the current generation and installed driver/firmware."""
    try:
        gen = (simdir / "gen").read_text().split("\n")[0].strip()
    except OSError:
        return None
    asc = fsroot / "usr" / "local" / "Ascend"
    parts = [gen, _first_line(asc / "driver" / "version.info"),
             _first_line(asc / "firmware" / "version.info")]
    return None if any("/" in p for p in parts) else "#".join(parts)


def cache_path(simdir: Path, fsroot: Path, tool: str, args: list[str],
               prefix: str | None = None) -> Path | None:
    """Where the wrapper looks for this call's cached output; None for argument vectors it never caches.

    Key = generation + first lines of the driver and firmware version.info + tool + arguments, joined by
    '#', exactly as bin/_wrapper.sh builds it with shell builtins only.
    """
    if any(not a or "/" in a or "#" in a for a in args):
        return None
    prefix = prefix if prefix is not None else cache_prefix(simdir, fsroot)
    return None if prefix is None else simdir / "render" / "#".join([prefix, tool, *args])


def _uptime() -> float | None:
    """Seconds since boot (/proc/uptime, which the wrapper reads too); None where there is none."""
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _store(path: Path, text: str, *, prune: bool = True) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if prune:
            prefix = path.name.split("#", 1)[0] + "#"
            for old in path.parent.iterdir():
                if not old.name.startswith(prefix) and not old.name.startswith("."):
                    old.unlink(missing_ok=True)
        tmp = path.parent / f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full simdir only costs speed


_HCCN_GETS = ("link", "net_health", "ip", "gateway", "netdetect", "tls", "fec", "optical", "lldp", "stat")


def canonical_calls(view: NodeView) -> list[tuple[str, list[str]]]:
    """The argument vectors a preflight asks for, in the spelling of the vendor docs."""
    calls = [("npu-smi", ["info"]), ("npu-smi", ["info", "-m"]), ("npu-smi", ["info", "-l"]),
             ("npu-smi", ["info", "-t", "topo"]),
             ("lspci", []), ("lspci", ["-vvv"])]
    for npu in view.state["npus"]:
        for kind in npu_smi.INFO_TYPES:
            calls.append(("npu-smi", ["info", "-t", kind, "-i", str(npu["id"])]))
            calls += [("npu-smi", ["info", "-t", kind, "-i", str(npu["id"]), "-c", str(chip["chip_id"])])
                      for chip in npu["chips"]]
        for chip in npu["chips"]:
            if chip["nic"] is not None:
                calls += [("hccn_tool", ["-i", str(chip["logic_id"]), f"-{get}", "-g"]) for get in _HCCN_GETS]
    return calls + ascend_dmi_calls(view.state)


def ascend_dmi_calls(state: dict) -> list[tuple[str, list[str]]]:
    """The full tier's ascend-dmi calls (checks/resources/perf.py), in its spelling: prewarmed with the rest,
    so its 4 x devices + 1 calls are a `cat` each."""
    if state["product"]["chip_name"] not in ascend_dmi.HEALTHY:
        return []
    size, times = "536870912", "50"
    calls = [("ascend-dmi", ["--bw", "-t", "p2p", "-q"])]
    for _npu, chip in all_chips(state):
        d = str(chip["logic_id"])
        calls += [("ascend-dmi", ["-f", "-t", "fp16", "-d", d, "-q"]),
                  ("ascend-dmi", ["--bw", "-t", "h2d", "-d", d, "-s", size, "--et", times, "-q"]),
                  ("ascend-dmi", ["--bw", "-t", "d2h", "-d", d, "-s", size, "--et", times, "-q"]),
                  ("ascend-dmi", ["--bw", "-t", "d2d", "-d", d, "-q"])]
    return calls


def _prewarm(view: NodeView, simdir: Path, fsroot: Path) -> None:
    """Render every canonical call into the cache once per generation: the state is loaded already, so
    one slow call pays for the ~50 that follow (each then a `cat`)."""
    prefix = cache_prefix(simdir, fsroot)
    marker = cache_path(simdir, fsroot, "_warm", [], prefix)
    if marker is None or marker.exists() or "npu-smi" in view.state.get("hang", []):
        return
    for tool, args in canonical_calls(view):
        try:
            text, rc, cacheable = _render(view, tool, args, simdir, fsroot)
        except ToolError:
            continue
        path = cache_path(simdir, fsroot, tool, args, prefix)
        if rc == 0 and cacheable and path is not None:
            _store(path, text, prune=False)
    _store(marker, "", prune=False)


def _drop_cache(simdir: Path) -> None:
    for old in (simdir / "render").glob("*"):
        old.unlink(missing_ok=True)


def _persist_nic_changes(view: NodeView, simdir: Path, fsroot: Path, changes: dict) -> None:
    """Device settings survive in runtime/hccn.json (stamped with the generation, see NodeView.nic_value)
    and in /etc/hccn.conf, like the real tool writes both."""
    runtime = view.runtime
    for device, values in changes.items():
        slot = runtime.setdefault(str(device), {})
        for key, value in values.items():
            slot[key] = [value, view.gen]
    (simdir / "runtime").mkdir(parents=True, exist_ok=True)
    tmp = simdir / "runtime" / ".hccn.json.tmp"
    tmp.write_text(json.dumps(runtime, indent=1, sort_keys=True))
    os.replace(tmp, simdir / "runtime" / "hccn.json")
    conf = fsroot / "etc" / "hccn.conf"
    old = conf.read_text() if conf.is_file() else ""
    new = hccn.update_conf(old, changes)
    if new != old:
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(new)
    _drop_cache(simdir)


def run(tool: str, args: list[str], simdir: Path, fsroot: Path, *,
        cluster: Path | None = None) -> tuple[str, int]:
    """(stdout, exit status) of one tool call; hangs forever where the state says the tool hangs.

    `cluster`: the cluster's fabric folder a ping resolves its target in (default: where the cluster
    mounts it, $ASCEND_SIM_CLUSTER_ROOT or /var/lib/ascend-sim-cluster; a node on its own has none)."""
    if tool == "dmesg":
        try:
            return (simdir / "dmesg").read_text(), 0
        except OSError:
            return "", 0
    if tool not in TOOLS:
        return f"unknown simulated tool {tool!r}; one of {', '.join(TOOLS)}\n", 2
    view = NodeView.load(simdir, fsroot)
    if tool == "chronyc":
        # The report moves on only when chronyd polls: cached per poll period, as the wrapper looks it up.
        uptime = _uptime()
        text, rc = chrony.run(view.state.get("clock_synced", True), args, uptime_s=uptime,
                              offset_s=view.state.get("clock_offset_s", 0.0))
        path = None if uptime is None else cache_path(simdir, fsroot, tool,
                                                      [*args, f"@{chrony.poll_period(uptime)}"])
        if rc == 0 and path is not None:
            _store(path, text)
        return text, rc
    if tool == "npu-smi" and "npu-smi" in view.state.get("hang", []):
        while True:  # the preflight's per-command timeout has to catch this
            time.sleep(3600)
    try:
        text, rc, cacheable = _render(view, tool, args, simdir, fsroot, cluster=cluster)
    except ToolError as err:
        return err.text, err.rc
    if cacheable and rc == 0:
        path = cache_path(simdir, fsroot, tool, args)
        if path is not None:
            _store(path, text)
            _prewarm(view, simdir, fsroot)
    return text, rc


def _render(view: NodeView, tool: str, args: list[str], simdir: Path, fsroot: Path, *,
            cluster: Path | None = None) -> tuple[str, int, bool]:
    """(text, exit status, cacheable); hccn_tool setters persist their change here."""
    if tool == "npu-smi":
        # a chip that throttles after a delay changes its `-t common` with the clock, not the state
        timed = "common" in args and any(c.get("throttle_after") for n in view.state["npus"] for c in n["chips"]
                                         if "-i" not in args or str(n["id"]) == args[args.index("-i") + 1])
        return npu_smi_run(view, args), 0, not timed
    if tool == "lspci":
        return lspci.run(view, args), 0, True
    if tool == "lscpu":
        return lscpu_run(view, args), 0, True
    if tool == "ascend-dmi":
        return ascend_dmi.run(view.state, args), 0, True
    # Only a ping reads the other nodes (the state of every peer, fresh at each call: faults change it).
    fabric = Fabric.load(cluster or cluster_root_from_env()) if "-ping" in args else None
    result = hccn.run(view, args, fabric=fabric)
    if result.changes:
        _persist_nic_changes(view, simdir, fsroot, result.changes)
    return result.text, result.rc, result.cacheable


def lscpu_run(view: NodeView, args: list[str]) -> str:
    host = numa.host_cpu(view.state)
    if host is None or args:  # no presented host CPU, or a form not simulated: the real lscpu answers
        os.execv("/usr/bin/lscpu", ["lscpu", *args])
    return numa.lscpu(host)


def numactl_main(args: list[str]) -> int:
    """`numactl`: prints, or binds and execs the command (never returns then)."""
    view = NodeView.load(simdir_from_env(), fsroot_from_env())
    host = numa.host_cpu(view.state)
    if host is None:
        sys.stderr.write("numactl: this simulated node presents no NUMA topology (its hardware has none "
                         "modelled)\n")
        return 1
    environ = dict(os.environ)
    text, rc, command = numa.numactl(host, args, environ, view.state.get("node", {}).get("index", 0))
    if command is None:
        (sys.stdout if rc == 0 else sys.stderr).write(text)
        return rc
    environ.pop("PYTHONPATH", None)
    if "ASCEND_SIM_CALLER_PYTHONPATH" in environ:
        environ["PYTHONPATH"] = environ.pop("ASCEND_SIM_CALLER_PYTHONPATH")
    try:
        os.execvpe(command[0], command, environ)
    except OSError as err:
        sys.stderr.write(f"numactl: execution of `{command[0]}': {err.strerror}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "numactl":
        return numactl_main(argv[1:])
    if not argv:
        sys.stderr.write(f"usage: python3 -m ascend_ready.sim.node.tool {{{'|'.join(TOOLS)}}} ARGS\n")
        return 2
    try:
        text, rc = run(argv[0], argv[1:], simdir_from_env(), fsroot_from_env())
    except FileNotFoundError as err:
        sys.stderr.write(f"{argv[0]}: simulator state missing: {err.filename}\n")
        return 1
    sys.stdout.write(text)
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
