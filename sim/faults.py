"""Inject and clear hardware faults on a running node through the hardware model (ascend_ready.sim.hw).

The node's simdir is rewritten (state.json, gen, sysfs, dmesg), its /dev is resynced and file-level
faults are applied to its root, so the node's tools show the change at their next run.
"""

from __future__ import annotations

import json
from pathlib import Path

from ascend_ready.errors import ConfigError, SimError
from ascend_ready.sim import cluster
from ascend_ready.sim.nodeinit import populate_dev


def parse_params(pairs: tuple[str, ...] | list[str]) -> dict:
    """`k=v` strings -> a dict; values are read as JSON where they parse (numbers, true/false), else text."""
    out: dict = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"bad --param {pair!r}", hint="write it as key=value, e.g. --param npu=3")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def change(node_name: str, kind: str | None, params: dict) -> dict:
    """Inject fault `kind` with params into the node, or clear all faults when kind is None; the new state."""
    cluster.require_root()
    hw = cluster.hardware_api()
    if hw is None:
        raise SimError("the hardware model (ascend_ready.sim.hw) is not installed", hint="faults need it")
    c = cluster.load_running()
    node = c.node(node_name)
    if not node.alive():
        raise SimError(f"{node_name} is not running")
    simdir = node.simdir(c.run_dir)
    if not (simdir / "state.json").is_file():
        raise SimError(f"{node_name} was started without the hardware model",
                       hint="restart the cluster: ascend-sim down; ascend-sim up N")
    state = json.loads((simdir / "state.json").read_text())
    devices_before = hw.device_nodes(state)
    if kind is None:
        state = hw.clear_faults(state)
    else:
        if kind not in hw.FAULTS:
            raise ConfigError(f"unknown fault kind {kind!r}",
                              hint=f"choose from: {', '.join(sorted(hw.FAULTS))}")
        try:
            state = hw.inject_fault(state, kind, **params)
        except (TypeError, ValueError, KeyError) as exc:
            raise ConfigError(f"fault {kind}: {exc}",
                              hint="see `ascend-sim faults` for its parameters") from None
    hw.write_simdir(state, simdir)
    root = Path(f"/proc/{node.pid}/root")
    populate_dev(root, hw.device_nodes(state), previous=devices_before)
    hw.apply_root_faults(state, root)
    return state
