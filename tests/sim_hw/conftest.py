"""Fixtures for the simulated-hardware tests: a node (simdir + root) on a temp dir, tools run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascend_ready.sim import hw
from ascend_ready.sim.hw.state import NodeView
from ascend_ready.sim.node import tool as node_tool

DRIVER_INFO = ("Version={v}\nascendhal_version=7.35.19\nInnerversion=V100R001C15SPC012B220\n"
               "package_version={v}\n")
FIRMWARE_INFO = "Version={v}\nfirmware_version=1.0\npackage_version=23.0.7\n"


class Node:
    """One simulated node on disk: `sim` is the simdir, `root` the node's `/`."""

    def __init__(self, base: Path, state: dict, *, driver: str | None = "23.0.7",
                 firmware: str | None = "7.1.0.11.220"):
        self.sim, self.root = base / "sim", base / "root"
        self.root.mkdir(parents=True, exist_ok=True)
        asc = self.root / "usr" / "local" / "Ascend"
        if driver is not None:
            (asc / "driver").mkdir(parents=True, exist_ok=True)
            (asc / "driver" / "version.info").write_text(DRIVER_INFO.format(v=driver))
        if firmware is not None:
            (asc / "firmware").mkdir(parents=True, exist_ok=True)
            (asc / "firmware" / "version.info").write_text(FIRMWARE_INFO.format(v=firmware))
        self.write(state)

    def write(self, state: dict) -> None:
        self.state = state
        hw.write_simdir(state, self.sim)
        hw.apply_root_faults(state, self.root)

    def view(self) -> NodeView:
        return NodeView.load(self.sim, self.root)

    def run(self, tool: str, *args: str) -> tuple[str, int]:
        return node_tool.run(tool, list(args), self.sim, self.root)

    def out(self, tool: str, *args: str) -> str:
        text, rc = self.run(tool, *args)
        assert rc == 0, f"{tool} {' '.join(args)} -> rc {rc}: {text}"
        return text

    def provision_nics(self, devices: list[int], *, netdetect: bool = True) -> None:
        """What the hccn role does: address, netmask, gateway and netdetect on every device NIC."""
        for d in devices:
            self.out("hccn_tool", "-i", str(d), "-ip", "-s", "address", f"192.{d % 4 + 1}.0.{10 + d}",
                     "netmask", "255.255.0.0")
            self.out("hccn_tool", "-i", str(d), "-gateway", "-s", "gateway", f"192.{d % 4 + 1}.0.1")
            if netdetect:
                self.out("hccn_tool", "-i", str(d), "-netdetect", "-s", "address", f"192.{d % 4 + 1}.0.1")

    def sysfs(self) -> dict[str, str]:
        """Every file and link under sysfs/, as path -> content (links as '-> target')."""
        out = {}
        for path in sorted((self.sim / "sysfs").rglob("*")):
            rel = str(path.relative_to(self.sim / "sysfs"))
            if path.is_symlink():
                out[rel] = "-> " + str(path.readlink())
            elif path.is_file():
                out[rel] = path.read_text()
        return out

    def state_json(self) -> dict:
        return json.loads((self.sim / "state.json").read_text())


@pytest.fixture
def make_node(tmp_path):
    """make_node(state, driver=..., firmware=...) -> Node on a fresh temp dir."""
    count = iter(range(1000))

    def factory(state: dict, **kwargs) -> Node:
        return Node(tmp_path / f"node{next(count)}", state, **kwargs)

    return factory


@pytest.fixture
def a2_state() -> dict:
    return hw.initial_state("atlas-800t-a2", node_index=0, node_name="node01")
