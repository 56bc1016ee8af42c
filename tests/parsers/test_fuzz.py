"""Every registered parser, on random text and on mutated real samples: nothing but ParseError escapes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_support import SAMPLES_DIR, read_sample

from ascend_ready.checks.parsers.base import ParsedModel, get_parser, kinds
from ascend_ready.errors import ParseError

KINDS = kinds()
SAMPLES = sorted(p.name for p in SAMPLES_DIR.glob("*.txt"))

_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
_TEXT = st.one_of(
    st.text(_CHARS, max_size=300),
    st.lists(st.sampled_from(["\t", " ", ":", "=", "[devid 0]", "NPU ID", "Chip ID", "0x19E5", "ipaddr:",
                              "LnkSta:", "GT/s", "x16", "[  1.0]", "|", "\n", "-", "NA", "1", "Chip Name",
                              "address_0", "TLV", "recv seq=0,time=1ms"]), max_size=60).map("".join),
)


def _run(kind: str, text: str) -> None:
    try:
        result = get_parser(kind)(text)
    except ParseError as error:
        assert error.kind == kind or error.kind.startswith(kind.split("-")[0])
        return
    assert isinstance(result, ParsedModel)
    result.model_dump_json()  # every accepted input serializes


def test_all_families_registered():
    assert {"npu-smi-info", "npu-smi-health", "hccn-ip", "hccn-conf", "lspci-vvv", "sysfs-link",
            "toolkit-install-info", "torch-versions", "dmesg", "npu-smi-topo", "hccn-status",
            "hccn-hw-stats", "hccn-route"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
@_FUZZ
@given(text=_TEXT)
def test_random_text(kind, text):
    _run(kind, text)


@st.composite
def _mutated_sample(draw):
    text = read_sample(draw(st.sampled_from(SAMPLES)))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "dup", "cut", "junk", "swap"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif op == "junk":
            lines[i] = draw(st.text(_CHARS, max_size=40)) + "\n"
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


@pytest.mark.parametrize("kind", KINDS)
@_FUZZ
@given(text=_mutated_sample())
def test_mutated_samples(kind, text):
    _run(kind, text)
