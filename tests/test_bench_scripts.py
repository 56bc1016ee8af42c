"""Every benchmark in bench/ starts as bench/README.md documents it, on a clean checkout: each answers
--help (its smallest case is the benchmark itself, which needs root, a simulated cluster or a device).
The three that import torch and transformers at the top take tens of seconds to answer on a loaded
2-core machine and run with -m slow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
#: import torch/transformers (and the trainers) before parsing their arguments: 25-35 s each under load
TORCH_AT_IMPORT = {"learning_parity.py", "train_grpo_device.py", "train_step_time.py"}
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.slow) if s in TORCH_AT_IMPORT else s
                                    for s in SCRIPTS])
def test_each_benchmark_answers_help(script):
    proc = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=300, cwd=BENCH.parent, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: "), proc.stdout[:200]


def test_node_local_asks_the_simulator_to_lend_its_nodes_the_checkout():
    # the nodes run the controller's interpreter on this checkout (node_exec of sys.executable): without the
    # loan it failed with "env: '.../.venv/bin/python': No such file or directory"
    text = (BENCH / "node_local.py").read_text()
    assert 'os.environ["ASCEND_SIM_LEND_CHECKOUT"] = "1"' in text
    assert text.index("ASCEND_SIM_LEND_CHECKOUT") < text.index("sim.up(")


def test_sdc_probe_bench_runs_its_smallest_case(tmp_path):
    # one CPU rank, one repeat: the worker as the probe runs it (python -c), its figures in the JSON
    out = tmp_path / "sdc.json"
    argv = [sys.executable, str(BENCH / "sdc_probe.py"), "--ranks", "1", "--repeats", "1", "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=BENCH.parent, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    (case,) = __import__("json").loads(out.read_text())["cases"]
    assert (case["ranks"], case["rc"], case["wrong"]) == (1, 0, 0)
    assert set(case["kernel_s_per_device"]) == {"cpu:0"} and case["wall_s"] > 0
