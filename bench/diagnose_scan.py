"""Benchmark of `ascend-check diagnose`: the scan rate (issue 14 target: a 1 GB log in under 10 s, bounded
memory) and the coverage of the vendor's published error codes (issue 21).

Scan rate: writes a log of --size-gb in a temp dir: noise lines built from real `ascend-train` output
(tests/diagnose/data/clean_*.log) and the vLLM/torch_npu warnings real jobs print (one in a hundred lines
passes the prefilter and is matched against the knowledge base for nothing), with ten real error lines from
../shared/ascend-samples, tests/diagnose/data/real and the knowledge base spread through it. Then it runs
the command a user runs, `ascend-check diagnose FILE --format json -q`, as a child process, and reports wall
seconds, the child's peak RSS (resource.getrusage(RUSAGE_CHILDREN)), throughput, whether every planted line
was found on its line number, and the ratio against the baseline run in the same invocation: `wc -l` on
the same file (reading every byte once, the floor any scan pays).

Coverage: every code of checks/diagnose/codes.yml (the vendor's CANN error codes and ACL/runtime return
codes) printed as logs print it, one rank per line, through the same command: how many of them a finding
names.

    .venv/bin/python bench/diagnose_scan.py [--size-gb 1] [--keep] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from sample_support import read_sample  # noqa: E402  (the samples' header stripping, shared with tests)

BLOCK_LINES = 40_000


def _noise_templates() -> list[str]:
    lines = []
    # the `ascend-train` logs only, as since issue 14: the figures stay comparable run to run
    for path in sorted((REPO / "tests/diagnose/data").glob("clean_ascend-train-*.log")):
        lines += [line for line in path.read_text().splitlines() if line.strip()]
    return lines


# Real lines that pass the prefilter but are no failure (vllm-ascend#1127, #397): the candidate path.
_BENIGN = [
    "[rank7]:[W609 06:57:47.819535026 compiler_depend.ts:877] Warning: The HCCL execution timeout was set "
    "to never timeout, so it is bigger than watchdog timeout 1800000ms which is set by init_process_group! "
    "The plog may not be recorded. You can disable watchdog by 'export HCCL_ASYNC_ERROR_HANDLING=0'. "
    "(function ProcessGroupHCCL)",
    "[rank0]:[W326 11:49:12.331714626 compiler_depend.ts:133] Warning: Warning: Device do not support double "
    "dtype now, dtype cast repalce with float. (function operator())",
]


def _planted() -> list[tuple[str, str]]:
    """(code, line): real error lines, one per family."""
    ei0006 = read_sample("error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt").splitlines()
    rt = read_sample("error_runtime_107001-invalid-device-id-EE8888_gpustack-3352.txt").splitlines()
    hccl = read_sample("error_torch-npu_libhccl-not-found_docker-build_MinerU-2537.txt").splitlines()
    dcmi = read_sample("error_npu-smi_dcmi-8020-device-used_cann-container-image-46.txt").splitlines()
    return [
        ("EI0006", ei0006[3].replace("[rank1]", "[rank2]")),
        ("107001", rt[1]),
        ("EE8888", rt[2].replace("RUNTIME(42,", "RUNTIME(43,")),
        ("libhccl.so", hccl[7]),
        ("-8020", dcmi[2]),
        (
            "NPU out of memory",
            "[rank5]: RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB "
            "total capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; "
            "10.65 GiB reserved in total by PyTorch)",
        ),
        (
            "WorkHCCL timeout",
            "[rank6]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 6] Watchdog caught "
            "collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=3600000) "
            "ran for 3600185 milliseconds before timing out.",
        ),
        ("EZ9999", "[rank4]: EZ9999: Inner Error!"),
        ("EJ0001", _real("ej0001_llamafactory-3839.log")[4]),
        ("MTE out of range", _real("mte_out_of_range_vllm-ascend-7676.log")[1]),
    ]


def _real(name: str) -> list[str]:
    return (REPO / "tests/diagnose/data/real" / name).read_text().splitlines()


def _block(rng: random.Random, templates: list[str]) -> bytes:
    out = []
    for i in range(BLOCK_LINES):
        if i % 100 == 0:
            out.append(rng.choice(_BENIGN))
            continue
        line = rng.choice(templates)
        rank = rng.randrange(8)
        out.append(
            f"[default{rank}]:{line}" if rng.random() < 0.5 else line.replace("step ", f"step {i} ", 1)
        )
    return ("\n".join(out) + "\n").encode()


def write_log(path: Path, size_bytes: int, seed: int = 0) -> dict[str, int]:
    """The log, and the 1-based line number each planted code was written on."""
    rng = random.Random(seed)
    templates = _noise_templates()
    blocks = [_block(rng, templates) for _ in range(8)]
    planted = _planted()
    written, lineno, where = 0, 0, {}
    every = max(1, size_bytes // (len(planted) + 1))
    with open(path, "wb", buffering=1 << 20) as fh:
        while written < size_bytes:
            block = blocks[rng.randrange(len(blocks))]
            fh.write(block)
            written += len(block)
            lineno += BLOCK_LINES
            if len(where) < len(planted) and written >= every * (len(where) + 1):
                code, line = planted[len(where)]
                fh.write(line.encode() + b"\n")
                written += len(line) + 1
                lineno += 1
                where[code] = lineno
    return where


def _diagnose(log: Path, workers: int | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """The command a user runs; `workers`: $ASCEND_READY_DIAGNOSE_WORKERS (0: one stream, the baseline of
    the split: checks/diagnose/split.py), else as the command picks."""
    cli = str(Path(sys.executable).with_name("ascend-check"))
    cmd = [cli, "diagnose", str(log), "--format", "json", "-q"]
    env = dict(os.environ)
    env.pop("ASCEND_READY_DIAGNOSE_WORKERS", None)
    if workers is not None:
        env["ASCEND_READY_DIAGNOSE_WORKERS"] = str(workers)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    return proc, time.perf_counter() - t0


def coverage(tmp: Path) -> dict:
    """How many of the vendor's published codes a finding names, through the command a user runs."""
    from ascend_ready.checks.diagnose import load_code_book  # the product's own lists, as the scan reads them

    book = load_code_book()
    lines = book.example_lines()
    log = tmp / "codes.log"
    log.write_text("".join(f"[rank{i}]: {line}\n" for i, (_code, line) in enumerate(lines)))
    proc, wall = _diagnose(log)
    found: dict[int, set[str]] = {}
    for f in json.loads(proc.stdout)["findings"]:
        found.setdefault(f["rank"], set()).add(f["code"])
    named = {code for i, (code, _line) in enumerate(lines) if code in found.get(i, set())}
    published = {c for fam in (*book.cann, *book.acl) for c in fam.codes}
    # HcclResult: torch_npu's `HCCL function error: <call>, error code is N`, named in the finding's title
    results = book.hccl_results.codes
    call = "RuntimeError: HCCL function error: HcclAllreduce(x), error code is"
    log.write_text("".join(f"[rank{n}]: {call} {n}\n" for n in results))
    proc, more = _diagnose(log)
    titles = {f["rank"]: f["title"] for f in json.loads(proc.stdout)["findings"]}
    results_named = sum(1 for n, name in results.items() if titles.get(int(n), "").endswith(f"{n} = {name})"))
    log.unlink()
    total = len(published) + len(results)
    return {
        "codes_published": total,
        "cann_codes": sum(len(f.codes) for f in book.cann),
        "acl_codes": sum(len(f.codes) for f in book.acl),
        "hccl_results": len(results),
        "codes_named": len(named & published) + results_named,
        "coverage_pct": round(100 * (len(named & published) + results_named) / total, 1),
        "coverage_scan_s": round(wall + more, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--keep", action="store_true", help="keep the generated log")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="diagnose-bench-"))
    log = tmp / "train.log"
    t0 = time.perf_counter()
    where = write_log(log, int(args.size_gb * (1 << 30)))
    gen_s = time.perf_counter() - t0
    size = log.stat().st_size

    t0 = time.perf_counter()
    subprocess.run(["wc", "-l", str(log)], capture_output=True, check=True)
    baseline = time.perf_counter() - t0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc, wall = _diagnose(log)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        print(proc.stderr, file=sys.stderr)
        return 2
    report = json.loads(proc.stdout)
    # the same file in one stream (no worker processes): the split's baseline, and the same report
    stream, stream_wall = _diagnose(log, workers=0)
    same = stream.returncode in (0, 1) and json.loads(stream.stdout)["findings"] == report["findings"]
    found = {f["code"]: f["evidence"][0]["line"] for f in report["findings"]}
    missed = {c: n for c, n in where.items() if found.get(c) != n}
    figures = {
        "size_bytes": size,
        "lines": report["lines"],
        "generate_s": round(gen_s, 2),
        "scan_wall_s": round(wall, 3),
        "scan_cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
        "throughput_mib_s": round(size / (1 << 20) / wall, 1),
        "baseline_wc_l_s": round(baseline, 3),
        "ratio_to_baseline": round(wall / baseline, 1),
        "one_stream_wall_s": round(stream_wall, 3),
        "split_speedup": round(stream_wall / wall, 2),
        "same_report_one_stream": same,
        "projected_1gib_s": round(wall * (1 << 30) / size, 2),
        "planted": len(where),
        "found_on_their_lines": len(where) - len(missed),
        "target_met": wall * (1 << 30) / size < 10 and not missed and same,
        **coverage(tmp),
    }
    for key, value in figures.items():
        print(f"{key:22} {value}")
    if missed:
        print(f"MISSED (code: planted line): {missed}; found: {found}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    if args.keep:
        print(f"log kept: {log}")
    else:
        log.unlink()
        tmp.rmdir()
    return 0 if not missed and same else 1


if __name__ == "__main__":
    sys.exit(main())
