"""What every hccn_tool output shares: the optional command echo above it, hccn_tool's own error
lines instead of data, and outputs of exactly one line."""

from __future__ import annotations

import re

from ascend_ready.checks.parsers._common import PROMPT_PREFIX, content, is_preamble, text_lines
from ascend_ready.checks.parsers.base import Line, fail

#: `hccn_tool -i 3 -ip -g` echo, with or without a prompt, a `set -x` trace mark (`+ `), sudo or a path
#: (`/usr/local/.../hccn_tool`)
ECHO_RE = re.compile(rf"^(?:\++\s+)?(?:{PROMPT_PREFIX}\s*)?(?:sudo\s+)?\S*hccn_tool\s+-i\s+(?P<dev>\d+)"
                     r"\s+(?P<args>.*)$")


#: hccn_tool's own error lines, with what the user should do about them
_TOOL_ERRORS = (
    (re.compile(r"^Invalid device id", re.I),
     "no device NIC with that id: device ids are the `Chip Logic ID`s of `npu-smi info -m`, and inference "
     "cards (310P) have no RoCE NIC"),
    (re.compile(r"^Usage: hccn_tool", re.I), "hccn_tool rejected the command line (see its usage text)"),
    (re.compile(r"^(?:Command|Cmd) .*(?:not support|failed)|^.*is not supported", re.I),
     "this hccn_tool query is not supported on this device or driver"),
)


def output_body(kind: str, text: str) -> tuple[int | None, list[Line]]:
    """(device id from the command echo, lines after it); at most one echo, and only first."""
    lines = text_lines(kind, text)
    for line in content(lines):
        for pattern, hint in _TOOL_ERRORS:
            if pattern.search(line.strip()):
                raise fail(kind, "hccn_tool reported an error instead of data", line, hint=hint)
    device = None
    body: list[Line] = []
    for line in lines:
        match = ECHO_RE.match(line.strip())
        if match:
            if (body and any(b.strip() for b in body)) or device is not None:
                raise fail(kind, "a second hccn_tool command in one output", line,
                           hint="parse a collection of commands with kind hccn-collection")
            device = int(match["dev"])
            continue
        if not body and is_preamble(line):  # shell noise above the echo/output: `export ...`, `+ ...`
            continue
        body.append(line)
    if next(content(body), None) is None:
        raise fail(kind, "no output after the command line", lines[0])
    return device, body


def one_line(kind: str, lines: list[Line], pattern: re.Pattern[str],
             expected: str) -> tuple[re.Match[str], Line]:
    """The match of the output's only content line (`link status: UP`), else a ParseError naming it."""
    rows = list(content(lines))
    if len(rows) != 1:
        raise fail(kind, f"expected exactly one line {expected!r}", rows[1] if len(rows) > 1 else None)
    match = pattern.match(rows[0].strip())
    if not match:
        raise fail(kind, f"expected {expected!r}", rows[0])
    return match, rows[0]
