"""Contract with the simulator: every output its renderers print for a healthy node parses, with the
values the hardware state holds (the simulator must be byte-faithful to the real tools)."""

from __future__ import annotations

import pytest

from ascend_ready.checks.parsers.base import get_parser

state_mod = pytest.importorskip("ascend_ready.sim.hw.state")
render = pytest.importorskip("ascend_ready.sim.render.npu_smi")
hccn_render = pytest.importorskip("ascend_ready.sim.render.hccn")
lspci_render = pytest.importorskip("ascend_ready.sim.render.lspci")


@pytest.fixture(params=[("atlas-800t-a2", "23.0.7"), ("atlas-800t-a2", "25.5.1"),
                        ("atlas-800t-a3", "25.5.1")], ids=lambda p: f"{p[0]}-{p[1]}")
def view(request):
    hardware, driver = request.param
    state = state_mod.initial_state(hardware, node_index=1, node_name="node01")
    return state_mod.NodeView(state=state, driver_version=driver, firmware_version="7.1.0.11.220")


def test_npu_smi_views_parse(view):
    npu = view.state["npus"][0]
    chips = len(npu["chips"])
    board = get_parser("npu-smi-board")(render.board(view, npu["id"]))
    assert board.npu_id == npu["id"] and board.chip_count == chips
    assert len(get_parser("npu-smi-usages")(render.usages(view, npu["id"])).chips) == chips
    assert len(get_parser("npu-smi-temp")(render.temp(view, npu["id"])).chips) == chips
    assert len(get_parser("npu-smi-common")(render.common(view, npu["id"])).chips) == chips
    assert get_parser("npu-smi-power")(render.power(view, npu["id"])).chips[0].power_w is not None
    assert get_parser("npu-smi-health")(render.health(view, npu["id"], 0)).health == "OK"
    mapping = get_parser("npu-smi-m")(render.mapping(view))
    assert sum(1 for c in mapping.chips if not c.is_aux) == sum(len(n["chips"]) for n in view.state["npus"])
    assert get_parser("npu-smi-l")(render.listing(view)).total_count == len(view.state["npus"])


@pytest.mark.parametrize(("option", "kind"), [
    ("-link", "hccn-link"), ("-net_health", "hccn-net-health"), ("-ip", "hccn-ip"), ("-tls", "hccn-tls"),
    ("-fec", "hccn-fec"), ("-link_stat", "hccn-link-stat"), ("-optical", "hccn-optical"),
    ("-lldp", "hccn-lldp"), ("-stat", "hccn-stat"), ("-gateway", "hccn-gateway"),
    ("-netdetect", "hccn-netdetect")])
def test_hccn_outputs_parse(view, option, kind):
    logic_id = view.state["npus"][0]["chips"][0]["logic_id"]
    result = hccn_render.run(view, ["-i", str(logic_id), option, "-g"])
    model = get_parser(kind)(result.text)
    if kind == "hccn-ip" and result.rc != 0:  # a fresh node has no device IP yet: a result, not an error
        assert model.address is None


def test_lspci_outputs_parse(view):
    links = get_parser("lspci-vvv")(lspci_render.run(view, ["-vvv"])).devices
    npus = [link for link in links if link.device.is_ascend_npu]
    assert len(npus) == sum(len(n["chips"]) for n in view.state["npus"] if n["present"])
    assert all(link.speed_gts and link.width for link in npus)
    listing = get_parser("lspci")(lspci_render.run(view, ["-nn", "-D"])).devices
    assert {d.bdf for d in listing} >= {link.device.bdf for link in npus}
