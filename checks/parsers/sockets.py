"""Parser of the TCP sockets listening on a node: `ss -tlnp` (iproute2), else `/proc/net/tcp` and
`/proc/net/tcp6` (the kernel's own table, where ss is not installed): which ports a job may not bind.

`ss -tlnp` prints a header (`State Recv-Q Send-Q Local Address:Port Peer Address:Port Process`; iproute2
6 glues `Port` and `Process`), then one line per socket: `LISTEN 0 128 0.0.0.0:29500 0.0.0.0:*
users:(("python3",pid=25376,fd=3))`; the users column is empty for a process the reading user may not see.
Addresses: `0.0.0.0`, `*`, `[::]`, `127.0.0.53%lo` (an interface scope), `[::ffff:10.0.0.1]`.

`/proc/net/tcp*` print a header (`sl local_address rem_address st ...`), then `N: ADDR:PORT ADDR:PORT ST ...`
with the port in hex and the state in hex (`0A` = LISTEN); no process names, only the uid and inode.
The probe prints the line `/proc/net/tcp` above those tables, so the parser knows which it reads.
"""

from __future__ import annotations

import ipaddress
import re

from ascend_ready.checks.parsers.base import ParsedModel, fail, numbered_lines, parser

__all__ = ["LISTEN_KIND", "Listener", "Listeners", "parse_listeners"]

LISTEN_KIND = "tcp-listen"
#: the line the probe prints before the kernel's tables (ss missing)
PROC_MARK = "/proc/net/tcp"

_SS_HEADER = re.compile(r"^State\s+Recv-Q\s+Send-Q\s+Local Address:Port\s+Peer Address:Port")
_SS_LINE = re.compile(r"^(?P<state>[A-Z][A-Z0-9-]*)\s+\d+\s+\d+\s+(?P<local>\S+):(?P<port>\d+|\*)\s+"
                      r"(?P<peer>\S+)(?:\s+(?P<users>users:\(.*\)))?\s*$")
_USER = re.compile(r'\("(?P<name>[^"]*)",pid=(?P<pid>\d+),fd=\d+\)')
_PROC_HEADER = re.compile(r"^\s*sl\s+local_address\s+rem_address|^\s*sl\s+local_address\s+remote_address")
_PROC_LINE = re.compile(r"^\s*\d+:\s+(?P<addr>[0-9A-Fa-f]+):(?P<port>[0-9A-Fa-f]{4})\s+[0-9A-Fa-f]+:"
                        r"[0-9A-Fa-f]{4}\s+(?P<st>[0-9A-Fa-f]{2})\s+\S+\s+\S+\s+\S+\s+(?P<uid>\d+)\s+\d+\s+"
                        r"(?P<inode>\d+)")


class Listener(ParsedModel):
    """One listening TCP socket."""

    address: str
    port: int
    #: `name (pid N)` of each process holding it, as ss names them (empty: not visible, or /proc/net/tcp)
    processes: tuple[str, ...] = ()
    #: the socket owner's uid and inode (/proc/net/tcp only)
    uid: int | None = None
    inode: int | None = None

    def holder(self) -> str:
        if self.processes:
            return ", ".join(self.processes)
        if self.uid is not None:
            return f"a process of uid {self.uid} (socket inode {self.inode}; ss is not installed to name it)"
        return "a process the probing user may not see (run the probe as root to name it)"


class Listeners(ParsedModel):
    source: str  # "ss" | "proc"
    sockets: tuple[Listener, ...]

    def holding(self, port: int) -> list[Listener]:
        return [s for s in self.sockets if s.port == port]


@parser(LISTEN_KIND)
def parse_listeners(text: str) -> Listeners:
    """`ss -tlnp` output, or the probe's `/proc/net/tcp` mark and the kernel's tables; ParseError naming
    the line for anything else (an empty output is refused: a node always listens for SSH)."""
    lines = [line for line in numbered_lines(text) if line.strip()]
    if not lines:
        raise fail(LISTEN_KIND, "the output is empty: not `ss -tlnp` (a node listens at least for SSH)")
    if lines[0].strip() == PROC_MARK:
        return _parse_proc(lines[1:])
    if not _SS_HEADER.match(lines[0]):
        raise fail(LISTEN_KIND, "not the header of `ss -tlnp` (State Recv-Q Send-Q Local Address:Port ...)",
                   lines[0])
    sockets = []
    for line in lines[1:]:
        if not line.strip():
            continue
        m = _SS_LINE.match(line)
        if not m:
            raise fail(LISTEN_KIND, "not a socket line of `ss -tlnp`", line)
        if m["state"] != "LISTEN":
            raise fail(LISTEN_KIND, f"state {m['state']}: `ss -tlnp` lists listening sockets only", line)
        if m["port"] == "*":
            continue
        users = m["users"] or ""
        procs = tuple(f"{u['name']} (pid {u['pid']})" for u in _USER.finditer(users))
        if users and not procs:
            raise fail(LISTEN_KIND, "a users:(...) column without a process", line)
        sockets.append(Listener(address=m["local"].strip("[]"), port=int(m["port"]), processes=procs))
    return Listeners(source="ss", sockets=tuple(sockets))


def _parse_proc(lines) -> Listeners:
    sockets, headers = [], 0
    for line in lines:
        if not line.strip():
            continue
        if _PROC_HEADER.match(line):
            headers += 1
            continue
        m = _PROC_LINE.match(line)
        if not m or not headers:
            raise fail(LISTEN_KIND, "not a line of /proc/net/tcp (N: ADDR:PORT ADDR:PORT ST ... UID TIMEOUT "
                                    "INODE)", line)
        if m["st"].upper() != "0A":  # only LISTEN sockets hold a port against a bind
            continue
        addr = m["addr"]
        address = _hex_ip(addr)
        sockets.append(Listener(address=address, port=int(m["port"], 16), uid=int(m["uid"]),
                                inode=int(m["inode"])))
    if not headers:
        raise fail(LISTEN_KIND, "no /proc/net/tcp table after the mark", line_no=1)
    return Listeners(source="proc", sockets=tuple(sockets))


def _hex_ip(addr: str) -> str:
    """/proc/net/tcp's address: 8 hex digits of a little-endian IPv4, 32 of an IPv6 (4 LE words)."""

    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.IPv6Address(words))
