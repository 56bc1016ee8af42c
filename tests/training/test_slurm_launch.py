"""`ascend-train --launcher slurm` without Slurm running: the allocation it reads, the gate over srun's
labelled output, the job step's command, and the sbatch script `--print-sbatch` writes. The stand-ins
print what Slurm 22.05's commands print (`scontrol show hostnames`, `srun --label`: `N: line`); the
daemons themselves are driven in tests/checks/test_slurm_sim.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ascend_ready.checks.report import CheckResult, HostStatus, Report
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.training import slurm_launch
from ascend_ready.training.cli import main
from ascend_ready.training.slurm_launch import Allocation, allocation, gate_nodes, node_command, train_argv

ALLOC = Allocation(job_id="42", nodes=("node01", "node03"))


def _report(node: str, status: str = "pass") -> str:
    result = CheckResult(
        check_id="pcie.link_width",
        host=node,
        status=status,
        severity="critical",
        tier="quick",
        title="PCIe links at full width",
        message="" if status == "pass" else "0000:c2:00.0 (NPU 2) trains at x8, should be x16",
    )
    return Report(hosts=[HostStatus(name=node)], results=[result]).model_dump_json(indent=1)


def _labelled(*texts: str) -> str:
    """srun --label's stdout: each task's lines prefixed `<task>: `, interleaved as they arrive."""
    from itertools import zip_longest

    rows = zip_longest(*(text.splitlines() for text in texts))  # one line of each task in turn
    return "".join(f"{task}: {line}\n" for row in rows for task, line in enumerate(row) if line is not None)


def test_the_allocation_is_read_from_slurm_and_refused_outside_one():
    calls = []

    def scontrol(argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "node01\nnode03\n", "")

    alloc = allocation({"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "node[01,03]"}, run=scontrol)
    assert alloc == ALLOC and calls == [["scontrol", "show", "hostnames", "node[01,03]"]]
    assert alloc.master_port == 20042
    with pytest.raises(ConfigError, match="inside a Slurm allocation"):
        allocation({}, run=scontrol)


def test_the_gate_judges_every_allocated_node_from_srun_output():
    logs = []

    def srun(argv, **kw):
        assert argv[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--label"]
        assert argv[-4:] == ["node", "--format", "json", "--no-report"]
        return subprocess.CompletedProcess(argv, 0, _labelled(_report("node01"), _report("node03")), "")

    gate_nodes(ALLOC, "/venv/bin/ascend-check", False, logs.append, run=srun)
    assert logs[-1] == "preflight: passed on every allocated node"

    def failing(argv, **kw):
        return subprocess.CompletedProcess(
            argv, 1, _labelled(_report("node01"), _report("node03", "fail")), ""
        )

    with pytest.raises(TrainingError, match=r"node03: pcie.link_width: fail: 0000:c2:00.0"):
        gate_nodes(ALLOC, "ascend-check", False, logs.append, run=failing)

    def silent(argv, **kw):  # node03's task printed nothing: it was not judged, which is no pass
        return subprocess.CompletedProcess(
            argv, 1, _labelled(_report("node01")), "srun: error: node03: task 1"
        )

    with pytest.raises(TrainingError, match="node03: no readable report"):
        gate_nodes(ALLOC, "ascend-check", False, logs.append, run=silent)


def test_the_job_step_runs_this_ascend_train_on_every_node_with_its_rank(tmp_path):
    argv = train_argv(
        "grpo",
        "/cfg.yaml",
        Path("/shared/r"),
        ALLOC,
        "10.0.0.11",
        resume=True,
        overrides=("max_steps=3",),
        passed={"nproc_per_node": 1, "device": "cpu"},
    )
    assert argv[0] == str(Path(sys.executable).with_name("ascend-train"))
    assert argv[1:] == [
        "grpo",
        "--config",
        "/cfg.yaml",
        "--output-dir",
        "/shared/r",
        "--nnodes",
        "2",
        "--master-addr",
        "10.0.0.11",
        "--master-port",
        "20042",
        "--skip-preflight",
        "--nproc-per-node",
        "1",
        "--device",
        "cpu",
        "--resume",
        "max_steps=3",
    ]
    cmd = node_command(ALLOC, "10.0.0.11", argv, set_env=str(tmp_path / "set_env.sh"))
    assert cmd[:6] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--label",
        "--kill-on-bad-exit=1",
    ]
    assert cmd[6:8] == ["/bin/sh", "-c"]
    assert cmd[9:12] == ["ascend-train-node", "10.0.0.11", str(tmp_path / "set_env.sh")]
    # the prelude, run for real: the master's own NIC is the one holding its address, not lo; the node's
    # own CANN environment is sourced (a Slurm task has no login shell that did)
    script = cmd[8].replace('exec "$@"', 'echo "$LD_LIBRARY_PATH" "$@"')
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_NODEID": "1", "SLURM_JOB_ID": "42"}

    def prelude(set_env: Path):
        return subprocess.run(
            ["/bin/sh", "-c", script, "x", "127.0.0.1", str(set_env), "ascend-train", "grpo"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )

    proc = prelude(tmp_path / "set_env.sh")  # not there: nothing sourced, the step still starts
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == " ascend-train grpo --node-rank 1\n"
    assert proc.stderr.startswith("slurm: node rank 1, NIC lo (")
    from ascend_ready.sim.packages.versionfiles import toolkit_set_env

    toolkit = "/usr/local/Ascend/ascend-toolkit/latest"
    # the set_env.sh the simulated installer writes; `$LD_LIBRARY_PATH` unset in it, as on a fresh task
    script_text = toolkit_set_env(toolkit, "aarch64").replace("@DRIVER_ROOT@", "/usr/local/Ascend")
    (tmp_path / "set_env.sh").write_text(script_text)
    proc = prelude(tmp_path / "set_env.sh")
    assert proc.returncode == 0, proc.stderr
    ld = proc.stdout.split(" ", 1)[0].split(":")
    assert ld[0] == f"{toolkit}/lib64" and "/usr/local/Ascend/driver/lib64" in ld
    assert proc.stdout.endswith(" ascend-train grpo --node-rank 1\n")


def _slurm(out: Path, *args: str):
    """`ascend-train grpo -c tiny -o OUT --launcher slurm ARGS`, through click's runner."""
    return CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(out), "--launcher", "slurm", *args])


def test_print_sbatch_writes_a_ready_script(tmp_path):
    script, out = tmp_path / "job.sh", tmp_path / "runs" / "r1"
    result = _slurm(
        out,
        "--nnodes",
        "2",
        "--nproc-per-node",
        "8",
        "--print-sbatch",
        str(script),
        "--sbatch-time",
        "2:00:00",
        "max_steps=3",
    )
    assert result.exit_code == 0, result.output
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n#SBATCH --job-name=ascend-grpo\n#SBATCH --nodes=2\n")
    assert "#SBATCH --gres=npu:8\n" in text and "#SBATCH --time=2:00:00\n" in text
    assert f"#SBATCH --output={out}/slurm-%j.out\n" in text and out.is_dir()
    assert text.rstrip().endswith(
        f"grpo --config tiny --output-dir {out} --launcher slurm --nproc-per-node 8 max_steps=3"
    )
    assert script.stat().st_mode & 0o111
    no_gres = _slurm(out, "--sbatch-gres", "none", "--print-sbatch", "-")
    assert (
        no_gres.exit_code == 0 and "--gres" not in no_gres.stdout and no_gres.stdout.startswith("#!/bin/bash")
    )
    bash = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert bash.returncode == 0, bash.stderr
    # a --set-env given here is what every node step of the job sources
    own = _slurm(out, "--set-env", "/opt/Ascend/cann/set_env.sh", "--print-sbatch", "-")
    assert own.exit_code == 0 and " --set-env /opt/Ascend/cann/set_env.sh" in own.stdout


def test_print_sbatch_without_the_slurm_launcher_and_slurm_outside_an_allocation_are_refused(
    tmp_path, monkeypatch
):
    alone = CliRunner().invoke(main, ["grpo", "-c", "tiny", "--print-sbatch", str(tmp_path / "j.sh")])
    assert alone.exit_code == 2 and "add --launcher slurm" in alone.output
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        monkeypatch.delenv(var, raising=False)
    outside = CliRunner().invoke(
        main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "r"), "--launcher", "slurm"]
    )
    assert outside.exit_code == 2 and "inside a Slurm allocation" in outside.output
    assert not (tmp_path / "r").exists()  # nothing written before the input was judged


def test_the_nodes_gate_is_skipped_only_for_the_job_the_gate_passed(monkeypatch):
    from ascend_ready.training.preflight import gate

    logs = []
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv(slurm_launch.GATED_ENV, "42")
    gate(None, [], None, 10, True, log=logs.append)
    assert logs == ["preflight: judged on every node of Slurm job 42 before the start"]
    monkeypatch.setenv(slurm_launch.GATED_ENV, "41")  # another job's mark: the loud banner
    gate(None, [], None, 10, True, log=logs.append)
    assert "PREFLIGHT SKIPPED" in logs[-1]


def test_a_run_dir_that_holds_a_run_is_refused_before_the_script_the_gate_or_srun(tmp_path, monkeypatch):
    # the SSH launcher's refusal (training/run_dir.py), shared: a new run without --resume names the run
    out = tmp_path / "r"
    (out / "checkpoints").mkdir(parents=True)
    (out / "config.yaml").write_text("old: run\n")
    script = tmp_path / "job.sh"
    sbatch = _slurm(out, "--print-sbatch", str(script))
    assert sbatch.exit_code == 2, sbatch.output
    assert f"--output-dir {out} already holds a run (config.yaml, checkpoints)" in sbatch.output
    assert "--resume" in sbatch.output and not script.exists()

    def never(argv, **kw):
        raise AssertionError(f"ran {argv}")

    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01,03]")
    with pytest.raises(ConfigError, match="already holds a run"):
        slurm_launch.launch("grpo", "tiny", str(out), False, True, (), {}, log=print, run=never)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "config.yaml"]
    assert _slurm(out, "--print-sbatch", str(script), "--resume").exit_code == 0 and script.exists()


def test_the_node_step_of_the_judged_job_is_not_judged_again():
    from ascend_ready.training.preflight import slurm_step_of_judged_job

    assert slurm_step_of_judged_job({"SLURM_JOB_ID": "42", slurm_launch.GATED_ENV: "42"})
    assert not slurm_step_of_judged_job({"SLURM_JOB_ID": "42", slurm_launch.GATED_ENV: "41"})
    assert not slurm_step_of_judged_job({slurm_launch.GATED_ENV: ""})
    assert not slurm_step_of_judged_job({"SLURM_JOB_ID": "42"})
