"""Simulated NPU hardware: per-node state, fault injection, and the simdir the node-side tools read.

Stdlib only (also imported by the node's private interpreter). Host API: see docs/design/simulator.md §2.
"""

from ascend_ready.sim.hw.faults import FAULTS, FaultSpec, apply_root_faults, clear_faults, inject_fault
from ascend_ready.sim.hw.profiles import DEFAULT_HARDWARE, HARDWARE
from ascend_ready.sim.hw.simdir import write_simdir
from ascend_ready.sim.hw.state import device_nodes, initial_state

__all__ = [
    "DEFAULT_HARDWARE", "FAULTS", "HARDWARE", "FaultSpec", "apply_root_faults", "clear_faults",
    "device_nodes", "initial_state", "inject_fault", "write_simdir",
]
