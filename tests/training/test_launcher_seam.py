"""The launcher seam (training/launcher.py): a launcher written against it in a few dozen lines, registered
with one line, runs a tiny job from the request the CLI builds; and the CLI's three launchers are the
registry's."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.fleet.job import run_job
from ascend_ready.fleet.plan import GUARD_MODULE
from ascend_ready.fleet.sessions import LocalSession
from ascend_ready.training import cli, launcher
from ascend_ready.training.config import dump_config, load_config
from ascend_ready.training.launch import WORKER_ENV
from ascend_ready.training.metrics import METRICS_FILE


class GuardedLocalLauncher:
    """The job on this machine, as a node would run it: fleet's session and job runner, under the node
    guard, the worker reading the request's resolved config."""

    name = "guarded-local"

    def launch(self, request: launcher.LaunchRequest) -> launcher.LaunchResult:
        job = request.job
        out = job.output_dir.absolute()
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(dump_config(job.cfg))
        worker = [sys.executable, "-m", "ascend_ready.training.cli", job.algo, "--config",
                  str(out / "config.yaml"), "--output-dir", str(out), *(["--resume"] if job.resume else [])]
        guard = ["env", f"{WORKER_ENV}=1", "HF_HUB_OFFLINE=1", "OMP_NUM_THREADS=1", sys.executable, "-u",
                 "-m", GUARD_MODULE, "--job", f"seam-{out.name}", "--", *worker]
        result = run_job({"local": shlex.join(guard)}, {"local": LocalSession("local")}, out / "logs",
                         echo=request.log)
        if not result.ok:
            node = result.nodes[0]
            raise TrainingError(f"the job failed: {node.error or node.lost or node.rc}",
                                hint=str(out / "logs"))
        return launcher.LaunchResult({"output_dir": str(out), "hosts": ["local"]})


def test_a_launcher_written_against_the_seam_runs_a_tiny_job(tmp_path, monkeypatch):
    monkeypatch.setitem(launcher.LAUNCHERS, "guarded-local", f"{__name__}:GuardedLocalLauncher")  # one line
    overrides = ("max_steps=1",)
    cfg = load_config("tiny", overrides)
    request = cli.launch_request("sft", cfg, tmp_path / "run", config="tiny", resume=False,
                                 skip_preflight=True, overrides=overrides, opts={"hosts": "local"},
                                 launcher="guarded-local")
    lines: list[str] = []
    request = launcher.LaunchRequest(**{**request.__dict__,
                                        "options": type(request.options)(**{**request.options.__dict__,
                                                                           "log": lines.append})})
    result = launcher.launch(request)
    assert result.summary == {"output_dir": str((tmp_path / "run").absolute()), "hosts": ["local"]}
    steps = [json.loads(line) for line in (tmp_path / "run" / METRICS_FILE).read_text().splitlines()]
    assert [s["step"] for s in steps if "optim/grad_norm" in s] == [1], steps  # one optimizer step trained
    assert any(line.startswith("[local] guard: clean") for line in lines), lines[-5:]


def test_the_cli_launchers_are_the_registry_and_an_unknown_one_is_named():
    for name, cls in (("ssh", "SshLauncher"), ("slurm", "SlurmLauncher"), ("verl-ray", "RayLauncher")):
        found = launcher.get_launcher(name)
        assert type(found).__name__ == cls and found.name == name
    with pytest.raises(ConfigError, match="no launcher named 'k8s'") as err:
        launcher.get_launcher("k8s")
    assert "slurm, ssh, verl-ray" in err.value.hint


def test_the_cli_builds_one_typed_request(tmp_path):
    cfg = load_config("tiny", ())
    req = cli.launch_request("grpo", cfg, Path("runs/x"), config="tiny", resume=True, skip_preflight=False,
                             overrides=("max_steps=2",), launcher="ssh", memory_plan="plan",
                             opts={"waive": ("npu.health",), "print_sbatch": "job.sh", "join_timeout": 30.0,
                                   "profile_steps": "2:3", "nnodes": 2, "device": "cpu",
                                   "known_hosts": str(tmp_path / "kh")})
    job = req.job
    assert (job.algo, job.resume, job.overrides, job.engine) == ("grpo", True, ("max_steps=2",), "trl")
    assert (req.gate.memory_plan, req.gate.waive, req.options.waive) == ("plan", ("npu.health",),
                                                                         ("npu.health",))
    assert (req.options.profile_steps, req.options.nnodes, req.join_timeout_s) == ((2, 3), 2, 30.0)
    assert (req.slurm.print_sbatch, req.slurm.device) == ("job.sh", "cpu")
    assert req.options.fanout.known_hosts_file == str(tmp_path / "kh")
    with pytest.raises(ConfigError, match="--profile-steps"):
        cli.launch_request("grpo", cfg, Path("x"), config="tiny", resume=False, skip_preflight=False,
                           overrides=(), launcher="ssh", opts={"profile_steps": "3:1"})
