"""Every keyword group of the vendor graph (checks/diagnose/vendor_kg.yml, MindCluster ascend-fd's entities)
can fire: a line holding its keywords reaches the graph's matcher past the scanner's two gates, the byte
prefilter and the error-word test, and is reported with the entity's code. A CANN plog entity is printed as
plogs print an error line (`[ERROR] RUNTIME(pid,proc):time [file:line]tid ...`), in a file named as plogs
are; the others bare, as a training log prints them."""

from __future__ import annotations

import io
import re

import pytest

from ascend_ready.checks.diagnose import Scanner, load_knowledge_base
from ascend_ready.checks.diagnose.literals import ERROR_WORDS
from ascend_ready.checks.diagnose.vendor import load_vendor_graph

PLOG_LOGS = {"CANN_Plog", "CANN_Device", "CANN_Plog | OS"}
PLOG_HEADER = "[ERROR] RUNTIME(1234,python):2025-01-01-00:00:00.000.000 [stream.cc:1]1 "
#: Lines between two groups' lines: more than one error report apart, so none is merged into another.
GAP = 40
#: Groups silent when printed bare in a training log: wordings (INFO/WARNING, kernel, MindSpore) that hold
#: nothing the byte prefilter reads (one more literal pass over every byte each, see bench/README.md), or that
#: say no error and name no code (found when their line says error). The number may only go down.
UNREACHABLE_IN_TRAINING_LOGS = 199


def _groups():
    kg = load_vendor_graph()
    return [(e, group) for e in kg.entities for group in e.in_]


def _printed(e, group) -> str:
    text = " ".join(group)
    return PLOG_HEADER + text if e.log in PLOG_LOGS else text


def _code_groups(buckets) -> set[int]:
    return {id(g) for _rx, _kw, groups in buckets for _e, g in groups}


def test_every_group_passes_the_error_word_gate_and_the_index():
    # every group is found on a line that says error (a plog's [ERROR] line); a group that names a fault
    # code is found on a line that says none as well
    kg = load_vendor_graph()
    buckets = kg.plain_buckets(tuple(load_knowledge_base().prefilter))
    codes = _code_groups(buckets)
    missed = []
    for e, group in _groups():
        line = " ".join(group)
        if e.code not in {m.code for m in kg.match(PLOG_HEADER + line)}:
            missed.append((e.code, "error line", group))
        if id(group) in codes and e.code not in {m.code for m in kg.match_plain(line, buckets)}:
            missed.append((e.code, "code", group))
    assert not missed, missed[:10]
    assert len(codes) >= 189  # MindIE's codes, printed bare


def _scan(lines: list[str], name: str) -> dict[int, set[str]]:
    """The codes reported on each line (1-based) of a log of these lines, GAP lines apart."""
    text = "".join(line + "\n" + "step 1 loss 0.5\n" * GAP for line in lines)
    scanner = Scanner()
    scanner.scan_stream(io.BytesIO(text.encode()), name)
    on: dict[int, set[str]] = {}
    for f in scanner.report().findings:
        for ev in f.evidence:
            on.setdefault(ev.line, set()).add(f.code)
    return on


@pytest.mark.parametrize("where", ["plog", "training log"])
def test_every_group_the_prefilter_reads_is_reported_with_its_code(where):
    prefilter = [re.compile(p) for p in load_knowledge_base().prefilter]
    groups = [(e, g) for e, g in _groups() if (e.log in PLOG_LOGS) == (where == "plog")]
    lines = [_printed(e, g) for e, g in groups]
    name = "ascend/log/debug/plog/plog-1234_20250101000000.log" if where == "plog" else "train.log"
    on = _scan(lines, name)
    silent = [(e.code, line) for i, ((e, _g), line) in enumerate(zip(groups, lines, strict=True))
              if not on.get(1 + i * (GAP + 1))]
    # a line none of ours names is reported with the entity's code; one ours names is ours to report
    if where == "plog":
        assert not silent, silent[:10]
    else:
        # silent: a bare wording the prefilter does not read, or one that says no error and names no code
        # (a warning's wording: found when its line says error)
        codes = _code_groups(load_vendor_graph().plain_buckets(tuple(load_knowledge_base().prefilter)))
        readable = [(e.code, line) for (e, g), line in zip(groups, lines, strict=True)
                    if any(rx.search(line) for rx in prefilter)
                    and (any(w in line for w in ERROR_WORDS) or id(g) in codes)]
        assert not set(readable) & set(silent), sorted(set(readable) & set(silent))[:10]
        assert len(silent) <= UNREACHABLE_IN_TRAINING_LOGS
