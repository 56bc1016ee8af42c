"""Small readers shared by the vendor-output parsers: numbers, NA cells, key/value lines, echoes.

Private to the parsers package; every helper fails closed with a ParseError naming the line.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from ascend_ready.checks.parsers.base import Line, fail, numbered_lines

#: Values the vendor tools print for "not available".
NA_VALUES = frozenset({"NA", "N/A", "-", ""})

#: The prompt in front of a pasted command: `$ `, `> ` (a minimal PS1, as in the mllm-npu README),
#: `root@host:~# ` (Debian/Ubuntu PS1), `[root@host dir]# ` (CentOS/openEuler/Kylin PS1), `bash-5.1$ `
#: (bash's default PS1 in containers and `su` shells), each optionally after a `(venv) ` marker. Hosts'
#: commands are echoed behind it by pastes (vllm-ascend issue #1047) and collection scripts.
PROMPT_PREFIX = (r"(?:\([\w.-]+\)\s*)?"
                 r"(?:[$>] |[\w.-]+@[\w.-]+:\S*[#$] ?|\[[\w.-]+@[\w.-]+(?: [^\]]*)?\][#$] ?"
                 r"|(?:ba|z|k)?sh-\d+(?:\.\d+)*[#$] ?)")

#: A shell prompt or a command echo that pastes and collection scripts put above an output, or the
#: password prompt sudo prints before it.
_PROMPT_RE = re.compile(rf"^(?:{PROMPT_PREFIX}|\[sudo\] password for )")


def is_prompt(line: str) -> bool:
    """True for a shell-prompt line (`$ hccn_tool ...`, `root@n1:~# cat ...`, `[root@n1 ~]# cat ...`)."""
    return bool(_PROMPT_RE.match(line))


#: What a shell, an entrypoint script or a copy-paste prints BEFORE an output, besides prompts: bash's
#: `set -x` trace of the command (`+ npu-smi info`, `++ ...` in subshells), environment set-up echoed by
#: container entrypoints (`export ASCEND_RT_VISIBLE_DEVICES=0`, `source .../set_env.sh`).
_SHELL_NOISE_RE = re.compile(r"^(?:\++ \S|export [A-Za-z_]\w*=|(?:source|\.) \S+\.(?:sh|bash)\b)")


def is_preamble(line: str, commands: tuple[str, ...] = ()) -> bool:
    """True for a line a shell or a paste puts before an output: blank, a prompt, a `set -x` trace, an
    `export`/`source` echo, or `commands` typed without a prompt (`npu-smi info -t board -i 0`, `lspci |
    grep ZIP`, `cat /usr/local/Ascend/driver/version.info`)."""
    text = line.strip()
    if not text or is_prompt(text) or _SHELL_NOISE_RE.match(text):
        return True
    words = text.split()
    if words[0] == "sudo" and len(words) > 1:
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] in commands


def strip_preamble(lines: list[Line], commands: tuple[str, ...] = ()) -> list[Line]:
    """`lines` without the leading preamble lines (see `is_preamble`); lines keep their numbers, and
    nothing after the first output line is dropped: what the output itself holds is the parser's to judge."""
    start = 0
    while start < len(lines) and is_preamble(lines[start], commands):
        start += 1
    return lines[start:]


def text_lines(kind: str, text: str) -> list[Line]:
    """All lines of `text`; fails on input that is empty or binary (NUL bytes), naming the line."""
    lines = list(numbered_lines(text))
    for line in lines:
        if "\x00" in line:
            raise fail(kind, "binary data (NUL byte) in input", line)
    if not any(line.strip() for line in lines):
        raise fail(kind, "empty input",
                   hint="the command printed nothing: check that it ran and its exit code")
    return lines


def content(lines: list[Line]) -> Iterator[Line]:
    """Non-blank lines that are not shell prompts."""
    return (line for line in lines if line.strip() and not is_prompt(line))


def to_int(kind: str, value: str, line: Line, *, what: str = "number", base: int = 10) -> int:
    """`value` as an int, or a ParseError naming `line`."""
    try:
        return int(value.strip(), base)
    except ValueError:
        raise fail(kind, f"{what} is not an integer: {value.strip()!r}", line) from None


def to_float(kind: str, value: str, line: Line, *, what: str = "number") -> float:
    """`value` as a float, or a ParseError naming `line`."""
    try:
        number = float(value.strip())
    except ValueError:
        raise fail(kind, f"{what} is not a number: {value.strip()!r}", line) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise fail(kind, f"{what} is not a finite number: {value.strip()!r}", line)
    return number


def opt_int(kind: str, value: str, line: Line, *, what: str = "number") -> int | None:
    """An int, or None for the tools' NA spellings."""
    return None if value.strip() in NA_VALUES else to_int(kind, value, line, what=what)


def opt_float(kind: str, value: str, line: Line, *, what: str = "number") -> float | None:
    """A float, or None for the tools' NA spellings."""
    return None if value.strip() in NA_VALUES else to_float(kind, value, line, what=what)


def to_ip(kind: str, value: str, line: Line, *, what: str = "address") -> str:
    """A dotted IPv4/IPv6 address, checked; returned in canonical form."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise fail(kind, f"{what} is not an IP address: {value.strip()!r}", line) from None


def to_netmask(kind: str, value: str, line: Line, *, what: str = "netmask") -> str:
    """A dotted IPv4 netmask whose ones are contiguous (`255.255.0.0`); an address in the netmask slot
    (`192.168.1.10`) or `0.0.0.0` is a ParseError."""
    text = value.strip()
    try:
        mask = int(ipaddress.IPv4Address(text))
    except ValueError:
        raise fail(kind, f"{what} is not a dotted IPv4 netmask: {text!r}", line) from None
    hosts = ~mask & 0xFFFFFFFF
    if mask == 0 or hosts & (hosts + 1):
        raise fail(kind, f"{what} {text!r} is not a netmask (contiguous ones, like 255.255.255.0)", line)
    return text


def to_host_ip(kind: str, value: str, line: Line, *, what: str = "address",
               netmask: str | None = None) -> str:
    """A unicast IPv4 address a host can hold: not 0.x, loopback, multicast, reserved/broadcast (a netmask
    in the address slot, `255.255.255.0`, is one), nor, with `netmask`, its subnet's network or broadcast
    address."""
    text = value.strip()
    try:
        addr = ipaddress.IPv4Address(text)
    except ValueError:
        raise fail(kind, f"{what} is not an IPv4 address: {text!r}", line) from None
    if text.startswith("0.") or addr.is_loopback or addr.is_multicast or addr.is_reserved:
        raise fail(kind, f"{what} {text!r} is not a usable host address", line)
    if netmask is not None:
        net = ipaddress.IPv4Network(f"{text}/{netmask}", strict=False)
        if net.prefixlen <= 30 and addr in (net.network_address, net.broadcast_address):
            edge = "network" if addr == net.network_address else "broadcast"
            raise fail(kind, f"{what} {text!r} is the {edge} address of {net}, not a host address", line)
    return str(addr)


def key_values(kind: str, lines: list[Line], sep: str, *, comments: bool = False,
               allow: re.Pattern[str] | None = None) -> list[tuple[str, str, Line]]:
    """`key<sep>value` lines as (key, value, line); blank lines and prompts are skipped.

    Lines matching `allow` are skipped too (a caller's known non-data lines); anything else
    without the separator or with an empty key is a ParseError.
    """
    pairs = []
    for line in content(lines):
        stripped = line.strip()
        if comments and stripped.startswith("#"):
            continue
        if allow is not None and allow.match(stripped):
            continue
        key, found, value = stripped.partition(sep)
        if not found or not key.strip():
            raise fail(kind, f"expected 'key{sep}value'", line)
        pairs.append((key.strip(), value.strip(), line))
    return pairs
