"""Fake Ascend installer packages (.run) and stand-in torch/torch_npu wheels for the simulator.

`build_package_dir(dest, stacks, arch)` writes what the provisioning playbooks install on simulated nodes.
"""

from ascend_ready.sim.packages.builder import Stack, build_package_dir, package_names

__all__ = ["Stack", "build_package_dir", "package_names"]
