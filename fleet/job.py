"""Running one job on many nodes: every node's output streamed with its host prefix and kept per node,
heartbeats to each node's guard (fleet/node_guard.py), and on the first failure, a lost node or Ctrl-C, a
bounded stop everywhere. The multi-node launcher, the collectives and the Ray cluster run through it.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.fleet.node_guard import PREFIX as GUARD_PREFIX
from ascend_ready.fleet.sessions import Remote, Session

__all__ = ["GRACE_S", "JobResult", "NodeOutcome", "first_error", "root_cause", "run_job", "same_failure"]

#: seconds between the controller's heartbeats; the controller counts a node lost after LOST_AFTER_S
#: without its guard's acknowledgement
HEARTBEAT_S = 2.0
LOST_AFTER_S = 20.0
#: what the controller waits, in all, for every node to confirm a stop (the guards' TERM -> KILL grace
#: is GRACE_S of it)
GRACE_S = 10.0
STOP_WAIT_S = GRACE_S + 20.0


#: errors a node reports because ANOTHER node went away: never the cause of a job's failure when a node
#: has something else to say
_PEER_LOSS = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|ECONNRESET|Connection refused|"
    r"DistNetworkError|RendezvousConnectionError|timed out|Timeout|closing signal SIGTERM|"
    r"SignalException|Signal 15 \(SIGTERM\)|stopped by the controller|the controller stopped the job",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(
    r"Signal \d+ \(SIG\w+\) received by PID \d+|"
    r"^(?:\[rank\d+\]:\s*)?(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt)(?::|$)|"
    r"^error: |^guard: error "
)


def first_error(lines: Sequence[str]) -> str | None:
    """The first line of a node's output that states an error (an exception line, a signal torchrun
    saw, the CLI's `error:` line); torchrun's ChildFailedError wrapper is skipped for what it wraps."""
    for line in lines:
        text = line.strip()
        if "ChildFailedError" in text:
            continue
        m = _ERROR_LINE.search(text)
        if m:
            found = text[m.start():] if text[m.start():].startswith("Signal") else text
            return found.removeprefix("error: ")  # the CLI's own prefix: the message says "error" already
    return None


@dataclass
class _Node:
    name: str
    command: str
    remote: Remote | None = None
    log: object = None
    lines: list[str] = field(default_factory=list)  # the job's output, kept for the first error
    buffers: dict[str, str] = field(default_factory=lambda: {"out": "", "err": ""})
    seen: float = field(default_factory=time.monotonic)
    rc: int | None = None
    lost: str | None = None
    failed_at: float | None = None
    stop_sent_at: float | None = None
    leftover: str | None = None
    clean: bool = False

    @property
    def running(self) -> bool:
        return self.rc is None and self.lost is None


@dataclass
class NodeOutcome:
    name: str
    rc: int | None
    lost: str | None
    error: str | None
    stopped_by_us: bool
    failed_at: float | None
    leftover: str | None


@dataclass
class JobResult:
    nodes: list[NodeOutcome]
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(n.rc == 0 for n in self.nodes)


def root_cause(outcomes: Sequence[NodeOutcome]) -> NodeOutcome | None:
    """The node whose failure started it: a node that failed on its own (not stopped by us, not an
    error about a lost peer) first, then a node that was lost, then the earliest failure of any kind."""
    failed = [o for o in outcomes if o.rc not in (0, None) or o.lost]
    if not failed:
        return None

    def rank(o: NodeOutcome) -> tuple:
        own = not o.stopped_by_us and not o.lost and not (o.error and _PEER_LOSS.search(o.error))
        return (0 if own else 1 if o.lost else 2, o.failed_at or float("inf"))

    return min(failed, key=rank)



def same_failure(outcomes: Sequence[NodeOutcome]) -> str | None:
    """The error every node of a job of two or more printed, when it is the same on all of them (each
    lacks the same module, say): then no node started it, and blaming the first to exit would mislead.
    Rank prefixes (`[rank3]: `) do not count as a difference."""
    errors = {re.sub(r"^\[rank\d+\]:\s*", "", o.error) if o.error else None for o in outcomes}
    if len(outcomes) < 2 or len(errors) != 1 or None in errors:
        return None
    return errors.pop()

def run_job(commands: Mapping[str, str], sessions: Mapping[str, Session], log_dir: Path, *,
            echo: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> JobResult:
    """Start each node's command (host -> the command its session runs: the node guard, see
    fleet/node_guard.py), stream its output with a host prefix to `echo` and to <log_dir>/<host>.log,
    and on the first failure, a node lost, or Ctrl-C, stop the job on every node."""
    log_dir.mkdir(parents=True, exist_ok=True)
    nodes = {name: _Node(name, command) for name, command in commands.items()}
    width = max(len(n) for n in nodes)
    interrupted = False
    stopping: str | None = None
    stop_deadline = None

    def emit(node: _Node, stream: str, text: str) -> None:
        if stream == "err" and text.startswith(GUARD_PREFIX):
            key, _, rest = text[len(GUARD_PREFIX) + 1:].partition(" ")
            node.seen = clock()
            if key == "ack":
                return
            if key == "left":
                node.leftover = rest
            elif key == "clean":
                node.clean = True
            text = f"guard: {key} {rest}".rstrip()
        else:
            node.lines.append(text)
        node.log.write(text + "\n")
        node.log.flush()
        echo(f"[{node.name:<{width}}] {text}")

    def feed(node: _Node, stream: str, data: bytes) -> None:
        buf = node.buffers[stream] + data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        *complete, node.buffers[stream] = buf.split("\n")
        for line in complete:
            emit(node, stream, line)

    def flush(node: _Node) -> None:
        for stream in ("out", "err"):
            if node.buffers[stream]:
                emit(node, stream, node.buffers[stream])
                node.buffers[stream] = ""

    def begin_stop(reason: str) -> None:
        nonlocal stopping, stop_deadline
        if stopping is None:
            stopping, stop_deadline = reason, clock() + STOP_WAIT_S
            echo(f"stopping the job on every node: {reason}")
        for n in nodes.values():
            if n.running and n.stop_sent_at is None:
                n.stop_sent_at = clock()
                if not n.remote.send(b"stop\n"):
                    n.remote.close()  # the guard stops on EOF too

    with contextlib.ExitStack() as stack:
        for n in nodes.values():
            n.log = stack.enter_context(open(log_dir / f"{n.name}.log", "a", encoding="utf-8"))
        try:
            for n in nodes.values():
                n.remote = sessions[n.name].start(n.command)
                n.seen = clock()
            last_beat = 0.0
            while any(n.running for n in nodes.values()):
                busy = False
                for n in nodes.values():
                    if not n.running:
                        continue
                    out, err, rc, lost = n.remote.poll()
                    if out or err:
                        busy = True
                        if err:
                            n.seen = clock()
                        feed(n, "out", out) if out else None
                        feed(n, "err", err) if err else None
                        continue
                    if rc is not None or lost is not None:
                        flush(n)
                        n.rc, n.lost = rc, lost
                        if rc != 0:
                            n.failed_at = clock()
                            what = lost or f"exit code {rc}"
                            echo(f"[{n.name:<{width}}] {'lost: ' + lost if lost else 'exited: ' + what}")
                            begin_stop(f"{n.name} {'was lost' if lost else 'failed'} ({what})")
                        continue
                    if clock() - n.seen > LOST_AFTER_S:
                        n.lost = f"no answer for {LOST_AFTER_S:g} s (node down or network cut)"
                        n.failed_at = clock()
                        n.remote.close()
                        echo(f"[{n.name:<{width}}] lost: {n.lost}")
                        begin_stop(f"{n.name} was lost")
                if clock() - last_beat >= HEARTBEAT_S:
                    last_beat = clock()
                    for n in nodes.values():
                        if n.running and n.stop_sent_at is None:
                            n.remote.send(b"hb\n")
                if stopping is not None and clock() > stop_deadline:
                    for n in nodes.values():
                        if n.running:
                            n.lost = f"did not confirm the stop within {STOP_WAIT_S:g} s"
                            n.remote.close()
                            echo(f"[{n.name:<{width}}] {n.lost}")
                    break
                if not busy:
                    time.sleep(0.05)
        except KeyboardInterrupt:
            interrupted = True
            import signal

            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stop itself is bounded
            try:
                begin_stop("interrupted on the controller (Ctrl-C)")
                deadline = clock() + STOP_WAIT_S
                while any(n.running for n in nodes.values()) and clock() < deadline:
                    for n in nodes.values():
                        if n.running:
                            out, err, rc, lost = n.remote.poll()
                            feed(n, "out", out) if out else None
                            feed(n, "err", err) if err else None
                            if rc is not None or lost is not None:
                                flush(n)
                                n.rc, n.lost = rc, lost
                    time.sleep(0.05)
            finally:
                signal.signal(signal.SIGINT, previous)
        finally:
            for n in nodes.values():
                if n.remote is not None:
                    n.remote.close()
    return JobResult([NodeOutcome(n.name, n.rc, n.lost, first_error(n.lines), n.stop_sent_at is not None
                                  and (n.failed_at is None or n.failed_at >= n.stop_sent_at),
                                  n.failed_at, n.leftover)
                      for n in nodes.values()], interrupted)
