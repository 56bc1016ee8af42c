"""The silent-data-corruption probe judged on the controller: what sdc_worker.py printed on each node, read
(`parse_sdc`) and compared bit for bit (`judge_sdc`) for npu.sdc.

A device is wrong when an exact kernel (integer-valued matmul, all-reduce) gives any bit the reference does
not; when one matmul on fixed inputs gives different bits from one repeat to the next; when its bits differ
from the node's other devices; or when they differ from the fleet's golden digest: the majority of every
device of the hosts of one SKU, CANN version, torch / torch_npu and dtype (a device fleet of one such group
has nothing to vote with, and says so). Meta's fleet found such cores return a wrong result for one
computation, every time, while passing every health check (Dixit et al., "Silent Data Corruptions at Scale",
arXiv:2102.11245); Google's "Cores that don't count" (Hochschild et al., HotOS 2021) the same.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.errors import ParseError

__all__ = ["SDC_HEADER", "SdcResult", "SdcRun", "golden", "judge_sdc", "parse_sdc", "votes"]

#: kernel -> the digest of every device of a host (one vote each), as judge_sdc compares hosts
Votes = dict[str, list[str]]

SDC_HEADER = "ascend-check sdc v1"
#: kernels whose result is known exactly (the worker compares it with its reference)
EXACT_KERNELS = ("matmul-exact", "allreduce")


class SdcResult(BaseModel):
    """One device's result of one kernel in one dtype (a line the worker printed)."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    device: str
    kind: str
    name: str = ""
    kernel: str
    dtype: str
    shape: list[int]
    digests: list[str] = Field(min_length=1)
    seconds: float = 0.0
    ranks: int | None = None
    want_digest: str | None = None
    wrong: int | None = None
    index: int | None = None
    want_bits: str | None = None
    got_bits: str | None = None
    want: float | None = None
    got: float | None = None

    @property
    def key(self) -> str:
        return f"{self.kernel} {self.dtype}"


class SdcRun(BaseModel):
    """The worker's whole output on one node."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    ranks: int
    seed: int
    python: str = ""
    torch: str = ""
    torch_npu: str = ""
    results: list[SdcResult] = Field(default_factory=list)
    #: rank -> the error it raised
    errors: dict[int, str] = Field(default_factory=dict)
    failed_ranks: list[int] = Field(default_factory=list)
    done: bool = False


def parse_sdc(text: str, *, source: str = "npu-sdc") -> SdcRun:
    """The worker's output; ParseError naming the line of anything it did not print."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != SDC_HEADER:
        raise ParseError(source, f"not the SDC worker's output (expected {SDC_HEADER!r})", line_no=1,
                         line=lines[0] if lines else "")
    run: dict | None = None
    results, errors, failed, done = [], {}, [], False
    for no, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not an object")
            if raw.pop("run", None) is not None:
                run = raw
            elif raw.pop("done", None) is not None:
                failed, done = [int(r) for r in raw["failed_ranks"]], True
            elif "error" in raw:
                errors[int(raw["rank"])] = f"{raw.get('device', '?')}: {raw['error']}"
            else:
                results.append(SdcResult(**raw))
        except (ValueError, TypeError, KeyError, ValidationError) as exc:
            why = str(exc).splitlines()[0]
            raise ParseError(source, f"not an SDC result ({why})", line_no=no, line=line) from None
    if run is None:
        raise ParseError(source, "the worker printed no run line", line_no=2, line=lines[1] if len(lines) > 1
                         else "")
    try:
        return SdcRun(**run, results=results, errors=errors, failed_ranks=failed, done=done)
    except ValidationError as exc:
        raise ParseError(source, f"not an SDC run line ({str(exc).splitlines()[0]})", line_no=2,
                         line=lines[1]) from None


def votes(run: SdcRun) -> Votes:
    """The run's votes for the fleet's golden digests: per repeated kernel, each device's first digest."""
    out: Votes = {}
    for r in sorted(run.results, key=lambda r: r.rank):
        if r.kernel not in EXACT_KERNELS:
            out.setdefault(r.key, []).append(r.digests[0])
    return out


def golden(votes: list[str]) -> tuple[str | None, int, int]:
    """(the digest more than half the votes give, or None; its count; the number of votes)."""
    if not votes:
        return None, 0, 0
    digest, count = Counter(votes).most_common(1)[0]
    return (digest if count * 2 > len(votes) else None), count, len(votes)


def _exact(r: SdcResult) -> str | None:
    if r.kernel not in EXACT_KERNELS or not r.wrong:
        return None
    return (f"{r.device} ({r.name or r.kind}) {r.kernel} {r.dtype} {'x'.join(map(str, r.shape))}: {r.wrong} "
            f"element(s) differ from the exact result; the first at index {r.index}: want 0x{r.want_bits} "
            f"({r.want:g}), got 0x{r.got_bits} ({r.got:g})")


def _node(results: list[SdcResult]) -> tuple[list[str], dict[str, str | None]]:
    """(problems, kernel -> the node's own majority digest) of the repeated kernel across its devices."""
    problems: list[str] = []
    majority: dict[str, str | None] = {}
    by_key: dict[str, list[SdcResult]] = {}
    for r in results:
        if r.kernel not in EXACT_KERNELS:
            by_key.setdefault(r.key, []).append(r)
    for key, rows in sorted(by_key.items()):
        for r in rows:
            if len(set(r.digests)) > 1:
                problems.append(f"{r.device} {key}: {len(set(r.digests))} different results in "
                                f"{len(r.digests)} runs of the same matmul on the same inputs")
        best, count, total = golden([r.digests[0] for r in rows])
        majority[key] = best
        if best is None and total > 1:
            problems.append(f"{key}: the node's {total} devices disagree with no majority ("
                            + ", ".join(f"{r.device} {r.digests[0][:12]}" for r in rows) + ")")
        for r in rows:
            if best is not None and r.digests[0] != best:
                problems.append(f"{r.device} ({r.name or r.kind}) {key}: its bits differ from the node's "
                                f"other {count} device(s) on the same inputs (digest {r.digests[0][:12]}, "
                                f"the others {best[:12]})")
    return problems, majority


def judge_sdc(host: str, run: SdcRun, peers: Mapping[str, Votes], group: str,
              ) -> tuple[list[str], list[str], list[str]]:
    """(problems, warnings, evidence) of `host`'s run; `peers`: the votes of every host of its group (it
    among them: judged together, or as the fleet fingerprint file recorded them)."""
    evidence = [f"{run.ranks} {run.kind} device(s), torch {run.torch or '?'}"
                + (f", torch_npu {run.torch_npu}" if run.torch_npu else "") + f"; golden group: {group}"]
    for r in sorted(run.results, key=lambda r: (r.kernel, r.dtype, r.rank)):
        evidence.append(f"{r.device} {r.key} {'x'.join(map(str, r.shape))}: {r.digests[0][:16]}"
                        + ("" if r.wrong is None else f" ({r.wrong} wrong)"))
    problems = [p for r in run.results if (p := _exact(r))]
    node_problems, mine = _node(run.results)
    problems += node_problems
    warnings: list[str] = []
    others = {h: p for h, p in peers.items() if h != host}
    if not others:
        evidence.append(f"no other host of {group} judged with it: compared across its own devices and "
                        "with the exact results only")
        return problems, warnings, evidence
    for key in sorted(mine):
        best, count, total = golden([d for p in peers.values() for d in p.get(key, [])])
        if best is None:
            warnings.append(f"{key}: the {total} devices of {len(peers)} hosts of {group} agree on no "
                            "majority digest, so there is no golden value to judge by")
            continue
        evidence.append(f"golden {key}: {best[:16]} ({count} of {total} devices on {len(peers)} hosts)")
        wrong = [r for r in run.results if r.key == key and r.digests[0] != best]
        if wrong and mine[key] is not None and mine[key] != best:
            problems.append(f"{host}'s devices give {key} digest {mine[key][:12]}, not the golden "
                            f"{best[:12]} of {count} of {total} devices of {group}: "
                            + ", ".join(r.device for r in wrong))
    return problems, warnings, evidence
