"""A narrowed preflight never authorises a launch, end to end on simulated nodes over real SSH:
`ascend-check -i INV --select 'pcie.*' --launch-spec spec.json` on bare nodes (no npu-smi, no driver,
no CANN) passes what it ran and writes a spec, and `ascend-train grpo --launch-spec spec.json` refuses
it naming the checks it did not judge; waived at the preflight (--waive), the same launch prints each
waived check and goes on (a dry run: nothing starts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_ready.checks.profile import TRAINING_CHECKS

pytestmark = pytest.mark.sim

BIN = Path(sys.executable).parent
NODES = "node02,node03"  # bare A2 nodes of the session cluster (test_sim_checks provisions node01)


def cli(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=300, check=False)


def test_a_narrowed_spec_is_refused_and_a_waiver_is_recorded_and_printed(sim_cluster, tmp_path):
    inventory = str(sim_cluster.inventory_path)
    spec = tmp_path / "spec.json"
    check = cli("ascend-check", "-i", inventory, "--limit", NODES, "--select", "pcie.*",
                "--launch-spec", str(spec))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "launch spec: " in check.stderr and "2 of 2 host(s) may start" in check.stderr
    assert "warning: ascend-train will refuse this launch spec" in check.stderr
    written = json.loads(spec.read_text())
    assert written["schema_version"] == 4 and written["select"] == ["pcie.*"] and written["digest"]
    assert written["hosts"]["node02"]["judged_checks"] == ["pcie.aer", "pcie.link_speed", "pcie.link_width"]

    out = tmp_path / "run"
    train = cli("ascend-train", "grpo", "-c", "tiny", "--launch-spec", str(spec), "-o", str(out), "--dry-run")
    assert train.returncode == 1, train.stdout + train.stderr
    missing = sorted(set(TRAINING_CHECKS) - {"pcie.link_speed", "pcie.link_width"})
    assert ("error: the launch spec's preflight did not judge every check training needs (--tier quick "
            f"--select 'pcie.*'); not judged on node02, node03: {', '.join(missing)}") in train.stderr
    assert "hint: run the whole preflight" in train.stderr and not out.exists()

    waived = [arg for c in missing for arg in ("--waive", c)]
    check = cli("ascend-check", "-i", inventory, "--limit", NODES, "--select", "pcie.*",
                "--launch-spec", str(spec), *waived)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(spec.read_text())["waived"] == missing
    assert "warning: ascend-train will refuse" not in check.stderr
    train = cli("ascend-train", "grpo", "-c", "tiny", "--launch-spec", str(spec), "-o", str(out), "--dry-run")
    assert train.returncode == 0, train.stdout + train.stderr
    for c in missing:
        assert f"launch spec: WAIVED {c} (waived by the preflight's --waive)" in train.stderr
    assert "== node02" in train.stdout and "== node03" in train.stdout and not out.exists()
