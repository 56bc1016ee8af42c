"""Collective bandwidth and stragglers, judged on the controller: what the worker (collective_worker.py: a
short matmul per device and an all-reduce sweep, run under torchrun on the nodes) printed, read and judged.

The `full` tier's hccl.allreduce / npu.matmul start the worker (checks/cluster/collective_run.py). Each rank
prints one JSON line per measurement on stdout (`{"kind": "matmul", ...}`,
`{"kind": "allreduce", "group": "all" | "node:H" | "pair:A,B", ...}`): the matmul TFLOPS of its device over
a time window; the sweep across all ranks; the sweep among each node's own devices (where it has two or
more); and, when the all-node result calls for it (`pair_slow_gate`), one size between every two nodes,
round by round as the mesh pings (mesh.round_robin). The controller parses them with `parse_lines`,
records them (`CollectiveRecord`) and the checks judge them (`judge_matmul`, `judge_allreduce`).

Bandwidth is reported as nccl-tests and hccl_test do: algorithm bandwidth = size / time, and bus bandwidth
= algbw x 2(n-1)/n for all-reduce (nccl-tests doc/PERFORMANCE.md, "AllReduce"), which is what a link
delivers independent of the rank count. Device and backend come from the training runtime (npu/hccl,
cuda/nccl, cpu/gloo); matmuls are bf16 where the device has it, fp32 on CPU.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ascend_ready.errors import ParseError

__all__ = [
    "RECORD_HEADER",
    "RECORD_PROBE",
    "CollectiveRecord",
    "Measurement",
    "bus_bandwidth",
    "judge_allreduce",
    "judge_matmul",
    "node_ranks",
    "odd_ones_out",
    "pair_results",
    "pair_slow_gate",
    "parse_lines",
    "parse_size",
    "projected_seconds",
    "rows",
    "skipped",
    "stragglers",
    "sweep",
]

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_size(text: str) -> int:
    """`64M` -> bytes (binary units, as nccl-tests' -b/-e take them)."""
    t = text.strip().upper().removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS and not t[-1:].isdigit() else ""
    number = t[: len(t) - len(unit)]
    if not number.isdigit() or int(number) <= 0:
        raise ValueError(f"not a size: {text!r} (e.g. 1K, 64M, 1G)")
    return int(number) * _UNITS[unit]


def bus_bandwidth(size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9) of one all-reduce of `size_bytes` over `ranks` ranks."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * (2 * (ranks - 1) / ranks if ranks > 1 else 1.0)


@dataclass(frozen=True)
class Measurement:
    #: "matmul", "allreduce", or "skipped": an all-reduce of `group` at `size_bytes` the worker left out,
    #: its projected seconds (`value`) past its time budget
    kind: str
    rank: int
    host: str
    device: str
    value: float  # TFLOPS (matmul), bus bandwidth GB/s (allreduce) or projected seconds (skipped)
    size_bytes: int = 0
    seconds: float = 0.0
    algbw: float = 0.0
    ranks: int = 1
    #: which ranks took part (all-reduce): "all", "node:<host>" (one node's devices), "pair:<a>,<b>"
    group: str = ""
    dtype: str = ""


def parse_lines(text: str, *, source: str = "collective") -> list[Measurement]:
    """The JSON lines the workers printed; any other line that starts with `{` is an error naming it."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        # torchrun prefixes a rank's output with `[rankN]:` when asked to (--tee / -r); keep the JSON.
        if stripped.startswith("[") and "]:" in stripped:
            stripped = stripped.split("]:", 1)[1].strip()
        if not stripped.startswith("{"):
            continue
        try:
            raw = json.loads(stripped)
            out.append(Measurement(**raw))
        except (ValueError, TypeError) as exc:
            raise ParseError(source, f"not a measurement ({exc})", line_no=no, line=line) from None
    return out


def projected_seconds(seconds: float, size_bytes: int, size: int, runs: int) -> float:
    """What `runs` all-reduces of `size` bytes would take after one of `size_bytes` took `seconds`: as
    bandwidth-bound (time grows with the bytes), never less than the measured one per run."""
    return max(seconds * size / size_bytes, seconds) * runs


def skipped(measurements: Iterable[Measurement], group: str = "all") -> list[Measurement]:
    """The sizes of `group` the worker left out to finish in its budget (its lowest rank's records)."""
    return sweep(measurements, group, kind="skipped")


def stragglers(values: dict[str, float], *, tolerance: float = 0.2) -> list[tuple[str, float, float]]:
    """(name, value, median) of every entry below (1 - tolerance) x the median of all of them.

    Higher is better (TFLOPS, GB/s). With fewer than 3 entries there is no meaningful median to be
    slower than, so the slower of two is named only when it is below (1 - tolerance) x the faster one.
    """
    if len(values) < 2:
        return []
    median = statistics.median(values.values())
    if len(values) == 2:
        median = max(values.values())
    return sorted((n, v, median) for n, v in values.items() if v < (1 - tolerance) * median)


# ---------------------------------------------------------------- the record and its judges

#: the probe id the controller records the run under, in every host's snapshot
RECORD_PROBE = "hccl-collective"
RECORD_HEADER = "ascend-check collective v1"


@dataclass
class CollectiveRecord:
    """One run across the hosts as the controller recorded it: every rank's measurements, and per host
    why it has none (`errors`: a worker that failed, printed nothing or what could not be read)."""

    hosts: list[str]
    device: str = ""  # npu, cuda or cpu
    backend: str = ""  # hccl, nccl or gloo
    nproc_per_node: int = 0
    sizes: list[int] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_text(self) -> str:
        body = {**self.__dict__, "measurements": [m.__dict__ for m in self.measurements]}
        return f"{RECORD_HEADER}\n{json.dumps(body, sort_keys=True)}\n"

    @classmethod
    def from_text(cls, text: str) -> CollectiveRecord:
        """The record `to_text` wrote; ParseError naming the line of anything else."""
        head, _, body = text.partition("\n")
        if head.strip() != RECORD_HEADER:
            raise ParseError(RECORD_PROBE, f"not a collective record (expected {RECORD_HEADER!r})", line_no=1,
                             line=head)
        try:
            raw = json.loads(body)
            raw["measurements"] = [Measurement(**m) for m in raw["measurements"]]
            return cls(**raw)
        except (ValueError, TypeError, KeyError) as exc:
            raise ParseError(RECORD_PROBE, f"not a collective record ({exc})", line_no=2,
                             line=body.splitlines()[0] if body else "") from None


#: On CPU (gloo; the simulator, whose nodes share the host's few cores) the timings of healthy ranks
#: vary by tens of percent from run to run: a straggler there is one below at most half the median.
CPU_STRAGGLER_RATIO = 0.5


def straggler_ratio(rec: CollectiveRecord, profile_ratio: float) -> float:
    """The fraction of the fleet median below which a device, node or pair is a straggler in `rec`."""
    return min(profile_ratio, CPU_STRAGGLER_RATIO) if rec.device == "cpu" else profile_ratio


def _gb(v: float) -> str:
    return f"{v:.3g} GB/s"


def judge_matmul(rec: CollectiveRecord, host: str, *, ratio: float, floor: float | None = None,
                 ) -> tuple[list[str], list[str]]:
    """(problems, evidence) of `host`'s matmuls: a device below `ratio` x the median of every device of
    the fleet, the host itself (the median of its devices) below `ratio` x the median of the hosts, and,
    on NPUs, a device below the profile's `floor` (TFLOPS)."""
    mm = [m for m in rec.measurements if m.kind == "matmul"]
    key = {id(m): f"{m.host} rank {m.rank} ({m.device})" for m in mm}
    per_device = {key[id(m)]: m.value for m in mm}
    per_host: dict[str, list[float]] = {}
    for m in mm:
        per_host.setdefault(m.host, []).append(m.value)
    host_medians = {h: statistics.median(v) for h, v in per_host.items()}
    mine = sorted((m for m in mm if m.host == host), key=lambda m: m.rank)
    evidence = [f"{key[id(m)]}: {m.value:.3g} TFLOPS ({m.dtype or '?'} {round(m.seconds * 1e3, 3):g} ms per "
                "matmul)" for m in mine]
    if per_device:
        evidence.append(f"fleet: {len(per_device)} device(s) on {len(per_host)} host(s), median "
                        f"{statistics.median(per_device.values()):.3g} TFLOPS")
    problems = [f"{name}: {v:.3g} TFLOPS, below {ratio:g} x the fleet median {med:.3g}"
                for name, v, med in stragglers(per_device, tolerance=1 - ratio)
                if name.startswith(f"{host} ")]
    problems += [f"{host}: {v:.3g} TFLOPS (its devices' median), below {ratio:g} x the median of the hosts "
                 f"{med:.3g}: the straggler" for name, v, med in stragglers(host_medians, tolerance=1 - ratio)
                 if name == host]
    if floor is not None and rec.device == "npu":
        problems += [f"{key[id(m)]}: {m.value:.3g} TFLOPS, below the profile's {floor:g}" for m in mine
                     if m.value < floor]
    return problems, evidence


def pair_results(rec: CollectiveRecord) -> dict[tuple[str, str], Measurement]:
    """(a, b) -> the all-reduce between nodes a and b at the largest size (the pair rounds)."""
    out = {}
    for group in sorted({m.group for m in rec.measurements if m.group.startswith("pair:")}):
        found = sweep(rec.measurements, group)
        if found:
            a, _, b = group.removeprefix("pair:").partition(",")
            out[(a, b)] = found[-1]
    return out


def odd_ones_out(pairs: dict[tuple[str, str], float], *, ratio: float,
                 ) -> tuple[list[tuple[str, float, float]], list[tuple[tuple[str, str], float, float]]]:
    """(slow nodes, slow links) from every pair's bus bandwidth, as the mesh narrows a failed ping.

    A node is slow when even its best pair is below `ratio` x the median of every node's best pair (it
    slows whoever it is paired with); a pair of two nodes that are not slow is a slow link when it is
    below `ratio` x the median of all pairs."""
    best: dict[str, float] = {}
    for (a, b), v in pairs.items():
        for node in (a, b):
            best[node] = max(best.get(node, 0.0), v)
    nodes = stragglers(best, tolerance=1 - ratio) if len(best) >= 3 else []
    slow = {n for n, _, _ in nodes}
    links = []
    for name, v, med in stragglers({f"{a},{b}": v for (a, b), v in pairs.items()}, tolerance=1 - ratio):
        a, _, b = name.partition(",")
        if a not in slow and b not in slow:
            links.append(((a, b), v, med))
    return nodes, links


def judge_allreduce(rec: CollectiveRecord, host: str, *, ratio: float, floor: float | None = None,
                    ) -> tuple[list[str], list[str]]:
    """(problems, evidence) of the all-reduce for `host`: the sweep across all nodes (nccl-tests' table),
    its own devices' sweep, its pairs. It fails as the straggler (the odd one out of the pair rounds),
    as an end of a slow pair, for its devices' own all-reduce below `ratio` x the other nodes', and, on
    NPUs, when the all-node all-reduce is below the profile's `floor` and no node could be blamed."""
    all_nodes = sweep(rec.measurements, "all")
    evidence: list[str] = []
    problems: list[str] = []
    if all_nodes:
        top = all_nodes[-1]
        evidence.append(f"all-reduce across {len(rec.hosts)} host(s), {top.ranks} rank(s) ({rec.backend}, "
                        f"{top.dtype or 'float32'}):")
        evidence += rows(rec.measurements, "all")
    evidence += _left_out(rec.measurements, "all")
    mine = sweep(rec.measurements, f"node:{host}")
    if mine:
        evidence.append(f"all-reduce among {host}'s {mine[-1].ranks} device(s):")
        evidence += rows(rec.measurements, f"node:{host}")
        evidence += _left_out(rec.measurements, f"node:{host}")
        node_tops = {h: s[-1].value for h in rec.hosts if (s := sweep(rec.measurements, f"node:{h}"))}
        for name, v, med in stragglers(node_tops, tolerance=1 - ratio):
            if name == host:
                problems.append(f"{host}'s devices all-reduce among themselves at {_gb(v)} busbw "
                                f"({mine[-1].size_bytes} B), below {ratio:g} x the other nodes' median "
                                f"{_gb(med)}")
    pairs = pair_results(rec)
    if pairs:
        size = next(iter(pairs.values())).size_bytes
        evidence.append(f"pairs at {size} B: " + ", ".join(
            f"{a}-{b} {_gb(m.value)}" for (a, b), m in sorted(pairs.items()) if host in (a, b)))
    cut_pairs = {m.group for m in rec.measurements if m.kind == "skipped" and m.group.startswith("pair:")
                 and host in m.group.removeprefix("pair:").split(",")}
    for group in sorted(cut_pairs):
        evidence += _left_out(rec.measurements, group)
    nodes, links = odd_ones_out({p: m.value for p, m in pairs.items()}, ratio=ratio)
    slow = {n: (v, med) for n, v, med in nodes}
    if host in slow:
        v, med = slow[host]
        problems.append(f"{host} is the straggler: its best pair all-reduce reaches {_gb(v)} busbw, below "
                        f"{ratio:g} x the median of every node's best pair {_gb(med)}")
    elif slow:
        evidence.append("the all-node all-reduce is held back by " + ", ".join(sorted(slow)))
    for (a, b), v, med in links:
        if host in (a, b):
            problems.append(f"the pair {a}-{b} all-reduces at {_gb(v)} busbw, below {ratio:g} x the median "
                            f"pair {_gb(med)}, while both ends are fast with others: the path between them")
    top = all_nodes[-1] if all_nodes else None
    if floor is not None and rec.device == "npu" and top is not None and top.value < floor and not slow:
        cut = skipped(rec.measurements, "all")
        problems.append(f"the all-reduce across all {len(rec.hosts)} hosts reaches {_gb(top.value)} busbw at "
                        f"{top.size_bytes} B, below the profile's {floor:g} GB/s, and no one node is to blame"
                        + ("" if pairs else " (the pairs did not run)")
                        + (f"; the larger sizes ({', '.join(f'{m.size_bytes} B' for m in cut)}) would not "
                           "have finished in the time budget" if cut else ""))
    return problems, evidence


def _left_out(measurements: Sequence[Measurement], group: str) -> list[str]:
    """The evidence line of the sizes of `group` the worker left out to stay in its time budget."""
    cut = skipped(measurements, group)
    if not cut:
        return []
    if group.startswith("pair:"):
        what = "the pair rounds"
    elif group.startswith("node:"):
        what = f"the all-reduce among {group.removeprefix('node:')}'s devices"
    else:
        what = "the all-node all-reduce"
    return [f"left out of {what}, to finish in the worker's time budget: " + ", ".join(
        f"{m.size_bytes} B (projected {m.value:g} s)" for m in cut)]


def node_ranks(hosts: Sequence[str]) -> dict[str, list[int]]:
    """host -> its ranks, in the order the hosts first appear (node rank order) from rank -> host."""
    out: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        out.setdefault(host, []).append(rank)
    return out


def pair_slow_gate(busbw: float | None, min_busbw: float | None, nodes: int) -> bool:
    """Whether the all-node all-reduce calls for the pair rounds (`--pairs auto`): it is below the
    profile's floor; or, with no floor to judge by, always with 3 or more nodes (a node is only slow
    against the others, and the pairs are what it is compared in)."""
    if nodes < 3:
        return False
    if min_busbw is None:
        return True
    return busbw is None or busbw < min_busbw


def rows(measurements: Iterable[Measurement], group: str = "all") -> list[str]:
    """nccl-tests-like table rows of one group's all-reduce sweep: size, time (us), algbw, busbw (GB/s)."""
    out = [f"{'size(B)':>12} {'time(us)':>10} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}"]
    for m in sweep(measurements, group):
        out.append(f"{m.size_bytes:>12} {m.seconds * 1e6:>10.1f} {m.algbw:>12.4g} {m.value:>12.4g}")
    return out


def sweep(measurements: Iterable[Measurement], group: str = "all",
          kind: str = "allreduce") -> list[Measurement]:
    """One all-reduce measurement (or `kind` record) per size of `group` (its lowest rank's: every rank has
    the same time)."""
    best: dict[int, Measurement] = {}
    for m in measurements:
        mine = m.kind == kind and (m.group or "all") == group
        if mine and (m.size_bytes not in best or m.rank < best[m.size_bytes].rank):
            best[m.size_bytes] = m
    return [best[k] for k in sorted(best)]
