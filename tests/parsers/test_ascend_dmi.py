"""ascend-dmi FLOPS, bandwidth and P2P parsers on real captures (tests/parsers/real/INDEX.md), and the layouts
they refuse, each ParseError naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascend_ready.checks.parsers.ascend_dmi import parse_dmi_bandwidth, parse_dmi_flops, parse_dmi_p2p
from ascend_ready.checks.parsers.base import get_parser
from ascend_ready.errors import ParseError

REAL = Path(__file__).parent / "real"
A3_FLOPS = (REAL / "ascend-dmi-f-fp16_a3-npu0-2die_26.1_flagperf-fixture.txt").read_text()
P310_FLOPS = (REAL / "ascend-dmi-f-int8-fp16_310p_cann8.5.0_orange-station-notes.txt").read_text()
A3_BW = (REAL / "ascend-dmi-bw-h2d_a3-2dev_26.1_flagperf-fixture.txt").read_text()
A3_P2P = (REAL / "ascend-dmi-bw-p2p-card_a3-3npu_26.1_flagperf-fixture.txt").read_text()


def test_flops_a3_two_dies():
    (row,) = parse_dmi_flops(A3_FLOPS).rows
    assert (row.device, row.execute_times, row.duration_ms, row.value, row.unit, row.dtype, row.power_w) == (
        "0/1", 432_000_000, 1703.0, 752.465, "TFLOPS", "fp16", 338.5)


def test_flops_310p_two_runs_behind_the_prompt():
    rows = parse_dmi_flops(P310_FLOPS).rows
    assert [(r.unit, r.dtype, r.value, r.power_w) for r in rows] == [
        ("TOPS", "int8", 176.95, 85.4000015), ("TFLOPS", "fp16", 88.475, 85.1999969)]


def test_bandwidth_a3():
    bw = parse_dmi_bandwidth(A3_BW)
    assert bw.title == "Bandwidth Test"
    assert [(r.device, r.size_bytes, r.execute_times, r.bandwidth_gbps, r.elapsed_us) for r in bw.rows] == [
        (0, 536870912, 50, 58.125, 461900.0), (1, 536870912, 50, 57.875, 463895.0)]
    assert bw.largest(1).bandwidth_gbps == 57.875 and bw.largest(7) is None


def test_bandwidth_framed_by_rules():
    rule = "-" * 80
    text = "\n".join([rule, *A3_BW.splitlines()[:2], rule, *A3_BW.splitlines()[2:], rule]) + "\n"
    assert [r.bandwidth_gbps for r in parse_dmi_bandwidth(text).rows] == [58.125, 57.875]


def test_p2p_a3_matrices():
    p2p = parse_dmi_p2p(A3_P2P)
    assert p2p.pairs()[(0, 1)] == 391.2 and p2p.pairs()[(2, 1)] == 390.1
    assert len(p2p.pairs()) == 6 and p2p.pairs("bidirectional")[(1, 2)] == 749.6


def test_kinds_are_registered():
    assert get_parser("ascend-dmi-flops") is parse_dmi_flops
    assert get_parser("ascend-dmi-bw") is parse_dmi_bandwidth
    assert get_parser("ascend-dmi-p2p") is parse_dmi_p2p


@pytest.mark.parametrize(("parse", "text", "line_no", "words"), [
    # the JSON format (--fmt json) is another layout: refused, not guessed at
    (parse_dmi_flops, '{"computing_power":{"device_id":"0/1","tflops_fp16":752.4}}\n', 1, "before"),
    (parse_dmi_flops, A3_FLOPS.replace("TFLOPS@FP16", "GFLOPS@FP16"), 2, "unknown result column"),
    (parse_dmi_flops, A3_FLOPS.replace("Power(W)", "Watts   "), 2, "not the FLOPS header"),
    (parse_dmi_flops, A3_FLOPS.replace("752.465", "nan    "), 4, "not a finite number"),
    (parse_dmi_flops, A3_FLOPS.replace("432,000,000", "432,00,000 "), 4, "not a count"),
    (parse_dmi_flops, A3_FLOPS.replace("338.5", ""), 4, "not a FLOPS row"),
    (parse_dmi_flops, "\n".join(A3_FLOPS.splitlines()[:3]) + "\n", 3, "no FLOPS row"),
    (parse_dmi_bandwidth, A3_BW.replace("Elapsed Time(us)", "Latency(us)"), 2, "not the bandwidth header"),
    (parse_dmi_bandwidth, A3_BW.replace("58.125", "-1"), 3, "negative"),
    (parse_dmi_bandwidth, A3_BW.replace("463895", ""), 4, "a row of 4 cells"),
    (parse_dmi_bandwidth, "Error: device 9 does not exist\n", 1, "before the bandwidth table"),
    (parse_dmi_p2p, A3_P2P.replace("389.4   390.1   0", "389.4   390.1"), 5, "a row of 2 values"),
    (parse_dmi_p2p, A3_P2P.replace("2      389.4", "7      389.4"), 5, "is not a destination"),
    (parse_dmi_p2p, A3_P2P.replace("0       1       2", "0       2       1", 1), 2, "not ascending"),
    (parse_dmi_p2p, "0 1 2\n", 1, "before the first"),
])
def test_unknown_layouts_are_refused_naming_the_line(parse, text, line_no, words):
    with pytest.raises(ParseError) as err:
        parse(text)
    assert err.value.line_no == line_no and words in str(err.value)
