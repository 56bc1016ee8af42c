"""npu.sdc judged on what the SDC worker really printed (tests/checks/data/sdc: CPU torch, 2 ranks; the faulty
one with the simulator's sdc hook, sim/hw/sdc_hook.py, flipping bit 3 of element 0 on device 1)."""

from __future__ import annotations

import json

import pytest
from checks_fakenode import SDC_DATA, fake_host

from ascend_ready.checks.cluster.sdc import golden, parse_sdc
from ascend_ready.checks.profile import load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import ProbeResult, Snapshot
from ascend_ready.errors import ParseError

#: what a clean run on the CPU says on an A2 host (8 NPUs): the bits are right, the NPUs were not exercised
ON_CPU = "it ran on cpu, not on the 8 NPU(s) npu-smi lists: the training interpreter"
CLEAN = (SDC_DATA / "cpu-2ranks-clean.txt").read_text()
FAULTY = (SDC_DATA / "cpu-2ranks-device1-bit3.txt").read_text()
NO_TORCH = (SDC_DATA / "no-torch-2ranks.txt").read_text()
PROBE = (SDC_DATA / "cpu-1rank-probe.txt").read_text()


def judge(outputs: dict[str, str | ProbeResult]) -> dict[str, tuple[str, str, list[str]]]:
    hosts = {name: fake_host(name, index=i, outputs={"npu-sdc": out}) for i, (name, out) in
             enumerate(outputs.items())}
    report = run_checks(Snapshot(hosts=hosts), dict.fromkeys(hosts, load_profile("atlas-800t-a2")),
                        select_checks("full", ["npu.sdc"]))
    return {r.host: (r.status, r.message, r.evidence) for r in report.results}


def edited(text: str, change) -> str:
    """The worker's output with `change(obj)` applied to each result line (what another kernel prints)."""
    out = []
    for line in text.splitlines():
        obj = json.loads(line) if line.startswith("{") else None
        if obj is not None and "kernel" in obj:
            change(obj)
            line = json.dumps(obj, sort_keys=True)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_workers_real_outputs_parse():
    run = parse_sdc(CLEAN)
    assert (run.kind, run.ranks, run.done, run.failed_ranks) == ("cpu", 2, True, [])
    assert {(r.device, r.kernel) for r in run.results} == {
        (d, k) for d in ("cpu:0", "cpu:1") for k in ("matmul", "matmul-exact", "allreduce")}
    assert parse_sdc(PROBE).ranks == 1  # the probe's own form: `python -c`, one rank on CPU
    bad = parse_sdc(FAULTY)
    (flipped,) = [r for r in bad.results if r.wrong]
    assert (flipped.device, flipped.want_bits, flipped.got_bits) == ("cpu:1", "c0c00000", "c0c00008")
    assert parse_sdc(NO_TORCH).errors == {0: "cpu:0: ModuleNotFoundError: No module named 'torch'",
                                          1: "cpu:1: ModuleNotFoundError: No module named 'torch'"}


def test_what_the_worker_does_not_print_is_a_parse_error_naming_the_line():
    with pytest.raises(ParseError, match="line 1"):
        parse_sdc("Traceback (most recent call last):\n")
    lines = CLEAN.splitlines()
    with pytest.raises(ParseError, match="line 4") as err:
        parse_sdc("\n".join([*lines[:3], '{"rank": 0, "kernel": "matmul"}', *lines[3:]]))
    assert "not an SDC result" in err.value.message
    with pytest.raises(ParseError, match="no run line"):
        parse_sdc(lines[0] + "\n" + lines[2] + "\n")


def test_golden_is_a_strict_majority():
    assert golden(["a", "a", "b"]) == ("a", 2, 3)
    assert golden(["a", "b"]) == (None, 1, 2)
    assert golden([]) == (None, 0, 0)


def test_a_clean_node_passes_and_a_device_with_a_flipped_bit_fails_named():
    status, message, _ = judge({"node01": CLEAN})["node01"]
    assert status == "warn" and message.startswith(ON_CPU)  # never a pass for NPUs it did not run on
    status, message, evidence = judge({"node01": FAULTY})["node01"]
    assert status == "fail"
    assert message.startswith("cpu:1 (cpu) matmul-exact fp32 256x128x256: 1 element(s) differ from the exact "
                              "result; the first at index 0: want 0xc0c00000 (-6), got 0xc0c00008 (-6)")
    assert "its bits differ from the node's other" not in message  # 1 of 2 devices: no majority
    assert "the node's 2 devices disagree with no majority" in message
    assert any(line.startswith("cpu:1 matmul-exact fp32 256x128x256: 87892b6997654ee4 (1 wrong)")
               for line in evidence)


def test_a_device_that_differs_from_its_node_is_named_by_the_majority():
    # four ranks: three as device 0 printed, one as the faulty device 1 (its own lines, renumbered)
    clean, bad = parse_sdc(CLEAN), parse_sdc(FAULTY)
    lines = [CLEAN.splitlines()[0], json.dumps({"run": 1, "kind": "cpu", "ranks": 4, "seed": clean.seed})]
    for rank in range(4):
        src = bad if rank == 3 else clean
        for r in (r for r in src.results if r.rank == (1 if rank == 3 else 0) and r.kernel != "allreduce"):
            row = {**r.model_dump(exclude_none=True), "rank": rank, "device": f"cpu:{rank}"}
            lines.append(json.dumps(row))
    lines.append(json.dumps({"done": 1, "failed_ranks": [], "exit_codes": [0] * 4}))
    status, message, _ = judge({"node01": "\n".join(lines) + "\n"})["node01"]
    assert status == "fail"
    assert "cpu:3 (cpu) matmul fp32: its bits differ from the node's other 3 device(s)" in message


def test_a_node_that_differs_from_the_fleets_golden_digest_fails_the_others_pass():
    def another_kernel(o):
        if o["kernel"] == "matmul":
            o["digests"] = ["0" * 32] * len(o["digests"])

    other = edited(CLEAN, another_kernel)
    results = judge({"node01": CLEAN, "node02": other, "node03": CLEAN})
    assert [results[n][0] for n in ("node01", "node02", "node03")] == ["warn", "fail", "warn"]
    assert results["node01"][1].startswith(ON_CPU)
    assert results["node02"][1].startswith("node02's devices give matmul fp32 digest 000000000000, not the "
                                           "golden 5ab4642ce809 of 4 of 6 devices of ")
    assert any(line.startswith("golden matmul fp32: 5ab4642ce809b8da (4 of 6 devices on 3 hosts)")
               for line in results["node01"][2])
    # two hosts that disagree: no majority, no golden value; each still judged against its own devices
    two = judge({"node01": CLEAN, "node02": other})
    assert {s for s, _, _ in two.values()} == {"warn"}
    assert "agree on no majority digest" in two["node01"][1]


def test_a_matmul_whose_bits_change_from_one_repeat_to_the_next_fails():
    def wobble(o):
        if o["kernel"] == "matmul" and o["rank"] == 0:
            o["digests"][2] = "f" * 32

    status, message, _ = judge({"node01": edited(CLEAN, wobble)})["node01"]
    assert status == "fail"
    assert "cpu:0 matmul fp32: 2 different results in 3 runs of the same matmul on the same inputs" in message


def test_a_worker_that_could_not_run_is_an_error_never_a_pass():
    status, message, _ = judge({"node01": ProbeResult(command="python -c <script>", rc=1, stdout=NO_TORCH)})[
        "node01"]
    assert status == "error" and "cpu:0: ModuleNotFoundError: No module named 'torch'" in message
    no_npu = ProbeResult(command="python -c <script>", rc=1, stdout="",
                         stderr="sdc: no npu device is visible to /usr/bin/python3\n")
    status, message, _ = judge({"node01": no_npu})["node01"]
    assert status == "error" and "sdc: no npu device is visible" in message
    cut = "\n".join(CLEAN.splitlines()[:-1]) + "\n"  # killed before its last line
    status, message, _ = judge({"node01": cut})["node01"]
    assert status == "error" and message.startswith("the worker stopped before it printed its last line")


def test_a_node_judged_alone_is_compared_with_the_golden_digest_the_fingerprint_file_recorded(tmp_path):
    from ascend_ready.checks.cluster.fleet_file import load_fleet_fingerprints, write_fleet_fingerprints

    def another_kernel(o):
        if o["kernel"] == "matmul":
            o["digests"] = ["0" * 32] * len(o["digests"])

    fleet = {f"node0{i}": fake_host(f"node0{i}", index=i, outputs={"npu-sdc": CLEAN}) for i in (1, 2, 3)}
    for h in fleet.values():
        h.profile = load_profile("atlas-800t-a2")
    path = tmp_path / "fleet.json"
    written = write_fleet_fingerprints(Snapshot(hosts=fleet), path)
    (group,) = {f["group"] for f in written.fingerprints["npu.sdc:Atlas 800T A2"].values()}
    assert group.endswith(" / torch 2.13.0+cpu / cpu")
    reference = load_fleet_fingerprints(path).fingerprints

    def alone(text: str):
        host = fake_host("node02", index=1, outputs={"npu-sdc": text})
        report = run_checks(Snapshot(hosts={"node02": host}), {"node02": load_profile("atlas-800t-a2")},
                            select_checks("full", ["npu.sdc"]), fleet_reference=reference)
        (r,) = report.results
        return r

    ok = alone(CLEAN)
    assert ok.status == "warn" and ok.message.startswith(ON_CPU)
    assert any("as the fleet fingerprint file recorded them (2)" in e for e in ok.evidence)
    bad = alone(edited(CLEAN, another_kernel))
    assert bad.status == "fail"
    assert bad.message.startswith("node02's devices give matmul fp32 digest 000000000000, not the golden "
                                  "5ab4642ce809 of 4 of 6 devices")
