"""Codes found across a line cut at a fixed width (a terminal, a log viewer, an issue pasted from either, as
in vllm-ascend#1742 where `DeepSeek-R1-Distill-Qw` / `en-7B` broke across two lines) and inside a JSON-escaped
string: real logs from public threads (tests/diagnose/data/corpus, each cited in manifest.yml), cut the way
`fold -w N` cuts them, at every width that falls inside each code they print."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import Scanner

CORPUS = Path(__file__).parent / "data" / "corpus"
# what the code extractor reads: CANN codes, and ACL/runtime return codes after `error code is`
_PRINTED_RE = re.compile(r"(?<![\w./\\-])(E[0-9A-Z]\d{4})\b|error code is\s*(\d{6})\b")
#: A code this far into its line is cut by a plausible terminal width (60 columns and up). Narrower, a cut
#: line's two halves may both lack the words the prefilter reads (`ERROR 03-04 12:57:08 [engine.py:409] E`,
#: `40024: 2025-03-04-12:56:24.963.302 Fa`): neither is read, as no line without them is.
MIN_COLUMN = 60


def _scan(text: str) -> set[str]:
    scanner = Scanner()
    scanner.scan_stream(io.BytesIO(text.encode()), "x.log")
    return {f.code for f in scanner.report().findings}


def _fold(text: str, width: int) -> str:
    """`fold -w width`: every line longer than width cut into pieces of width characters."""
    out = []
    for line in text.splitlines():
        out += [line[i : i + width] for i in range(0, len(line), width)] or [""]
    return "\n".join(out) + "\n"


def _cuts(text: str, named: set[str]) -> list[tuple[str, int]]:
    """(code, width) for the first place each named code is printed: the widths that cut inside it."""
    cuts, seen = [], set()
    for line in text.splitlines():
        for m in _PRINTED_RE.finditer(line):
            group = 1 if m[1] else 2
            code, col = m[group], m.start(group)
            if code in named and code not in seen and col >= MIN_COLUMN:
                seen.add(code)
                cuts += [(code, col + k) for k in range(1, len(code))]
    return cuts


#: dev and heldout, whose codes diagnose names. Not `fresh` (rounds 10-11 as collected): there a Ray worker's
#: prefix puts EE1001 at column 85 of fresh/ray-worker-invalid-visible-device_vllm-17363.log, and a cut after
#: its first E leaves two halves the prefilter reads neither of (upper-case ERROR, `E1001`): the next round's.
_LOGS = sorted(
    str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.log")
    if p.parent.name in ("dev", "heldout")
    and _PRINTED_RE.search(p.read_text(encoding="utf-8", errors="replace"))
)


@pytest.mark.parametrize("name", _LOGS)
def test_a_code_cut_at_a_fixed_width_is_still_named(name):
    text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
    named = _scan(text)
    cuts = _cuts(text, named)
    if not cuts:
        pytest.skip("no code of a finding is printed past column 60")
    missed = [(code, width) for code, width in cuts if code not in _scan(_fold(text, width))]
    assert not missed, f"{name}: codes lost when cut at these widths: {missed}"


def test_codes_in_a_json_escaped_exception_string_are_named_with_their_rank():
    # ms-swift#9135: torch_npu's error report inside a Python exception's repr, its lines joined by `\n`
    text = (CORPUS / "heldout/el9999-p2p-enable-507899_ms-swift-9135.log").read_text(encoding="utf-8")
    assert "\\nEL9999: Inner Error!\\n" in text and text.count("\n") == 1
    scanner = Scanner()
    scanner.scan_stream(io.BytesIO(text.encode()), "x.log")
    found = {f.code: f.rank for f in scanner.report().findings}
    assert found.get("EL9999") == 54 and found.get("507899") == 54


def test_two_lines_that_only_look_cut_are_not_joined():
    # a line ending in `E` or digits and a next line starting with digits join only into a documented code
    assert _scan("step 12 mean reward E\n9999 tokens\nloss 0.1 error code is 12\n3456 steps\n") == set()
