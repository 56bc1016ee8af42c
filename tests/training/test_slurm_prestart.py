"""Issue 28 under Slurm: before the training step, one srun step reads every allocated node (its listening
ports, the output directory as the job's user) and the job's port slot is claimed on every node through
srun. The srun stand-in runs each task's command for real with /bin/sh here (SLURMD_NODENAME set, as
slurmd sets it), prints `<task>: line` as `srun --label` does, and gives each node its own claims directory
and its own `ss` (printing the capture in tests/training/real_sockets, from iproute2 6.1)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_ready.checks.cluster.port_claims import NODE_CLAIMS_DIR_ENV
from ascend_ready.errors import ConfigError, TrainingError
from ascend_ready.training import slurm_launch, slurm_prestart

REAL = Path(__file__).parent / "real_sockets" / "ss-tlnp_iproute2-6.1.txt"
SS_LINES = REAL.read_text().splitlines()
#: a node that listens for SSH only (the capture's header and its sshd-like line on 2024)
SSH_ONLY = "\n".join([SS_LINES[0], SS_LINES[2]]) + "\n"
ROOT = os.geteuid() == 0 and shutil.which("unshare") is not None


class FakeSrun:
    """srun inside allocation 4242 of `nodes`: each step's tasks run here, one per node, in the node order
    of the allocation; the gate's `ascend-check node` and the training step are recorded, not run."""

    def __init__(self, tmp: Path, nodes=("node01", "node02"), ss: dict[str, str] | None = None,
                 read_only: dict[str, str] | None = None):
        self.tmp, self.nodes, self.steps = tmp, list(nodes), []
        self.claims = Path(os.environ[NODE_CLAIMS_DIR_ENV])
        self.read_only = read_only or {}
        for node in self.nodes:
            bin_dir = tmp / node / "bin"
            bin_dir.mkdir(parents=True)
            (bin_dir / "ss.txt").write_text((ss or {}).get(node, SSH_ONLY))
            (bin_dir / "ss").write_text(f"#!/bin/sh\ncat {bin_dir / 'ss.txt'}\n")
            (bin_dir / "ss").chmod(0o755)

    def claims_of(self, node: str) -> Path:
        return self.tmp / node / "claims"

    def __call__(self, argv, **kw):
        assert argv[0] == "srun"
        self.steps.append(list(argv))
        if "/bin/sh" not in argv or "ascend-ready-step" not in argv:  # the gate or the training step
            return subprocess.CompletedProcess(argv, 0, "", "")
        listed = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--nodelist=")), None)
        nodes = [n for n in self.nodes if listed is None or n in listed]
        assert f"--nodes={len(nodes)}" in argv and f"--ntasks={len(nodes)}" in argv
        command = argv[argv.index("/bin/sh"):]
        out = []
        for task, node in enumerate(nodes):
            env = {**os.environ, "SLURMD_NODENAME": node,
                   "PATH": f"{self.tmp / node / 'bin'}:{os.environ['PATH']}"}
            cmd = [c.replace(str(self.claims), str(self.claims_of(node))) for c in command]
            if node in self.read_only:  # its output dir's parent: a read-only mount there
                cmd = ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o ro tmpfs {self.read_only[node]} && "
                       'exec "$@"', "x", *cmd]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
            out += [f"{task}: {line}" for line in proc.stdout.splitlines()]
        return subprocess.CompletedProcess(argv, 0, "\n".join(out) + "\n", "")

    @property
    def training_step(self) -> list[str]:
        return next(s for s in self.steps if "--kill-on-bad-exit=1" in s)


def _launch(tmp_path, srun: FakeSrun, monkeypatch, *args: str) -> int:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-02]")
    monkeypatch.setenv("ASCEND_READY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(slurm_launch, "_master_addr", lambda alloc: "10.0.0.11")

    def run(argv, **kw):
        if argv[0] == "scontrol":
            return subprocess.CompletedProcess(argv, 0, "\n".join(srun.nodes) + "\n", "")
        return srun(argv, **kw)

    logs: list[str] = []
    code = slurm_launch.launch("grpo", "tiny", str(tmp_path / "run"), False, True, (*args,), {},
                               log=logs.append, run=run)
    srun.logs = logs
    return code


def test_the_training_step_gets_the_ports_its_slot_claimed_on_every_node(tmp_path, monkeypatch):
    srun = FakeSrun(tmp_path)
    first = FakeSrun(tmp_path / "other")  # another controller's job already holds slot 0 on node02
    first.claims_of = srun.claims_of
    from ascend_ready.checks.cluster.port_claims import NodeClaims

    other = NodeClaims(slurm_prestart.srun_runner(slurm_launch.srun_tasks, first), "other-job")
    assert other.claim(0, ["node02"]) is None
    assert _launch(tmp_path, srun, monkeypatch) == 0
    step = srun.training_step
    assert "HCCL_IF_BASE_PORT=60128" in step and "HCCL_NPU_SOCKET_PORT_RANGE=16682-16697" in step
    assert step[step.index("--master-port") + 1] == "29501"
    assert any(line.startswith("ports: slot 1: rendezvous 29501") for line in srun.logs)
    # the pre-start step ran before the training step, and the claim is released at its end
    assert srun.steps.index(step) > 0 and "--kill-on-bad-exit=0" in srun.steps[0]
    assert not (srun.claims_of("node01") / "slot-1").exists()
    assert (srun.claims_of("node02") / "slot-0" / "owner").is_file()  # the other job's, untouched


def test_a_port_held_on_one_node_refuses_the_launch_naming_node_port_and_process(tmp_path, monkeypatch):
    srun = FakeSrun(tmp_path, ss={"node02": REAL.read_text()})
    with pytest.raises(TrainingError) as exc:
        _launch(tmp_path, srun, monkeypatch)
    assert ("node02: port 29500 (the rendezvous port (MASTER_PORT)) is held by python3 (pid 25376)"
            in exc.value.message)
    assert not any("--kill-on-bad-exit=1" in s for s in srun.steps)  # nothing started
    assert not list(srun.claims_of("node01").glob("slot-*"))  # and nothing left claimed


@pytest.mark.skipif(not ROOT, reason="mounts a read-only tmpfs (root and unshare)")
def test_an_output_dir_the_jobs_user_cannot_write_is_refused_naming_dir_node_and_user(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    srun = FakeSrun(tmp_path, read_only={"node02": str(tmp_path)})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        _launch(tmp_path, srun, monkeypatch)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    assert (f"node02: {tmp_path} (to create {tmp_path}/run) is not writable by user {user}: Read-only file "
            "system") in exc.value.message
    assert "node01" not in exc.value.message
    assert not any("--kill-on-bad-exit=1" in s for s in srun.steps)
    assert not (tmp_path / "run").exists()


def test_a_node_that_printed_nothing_is_not_judged_free(tmp_path):
    def silent(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "", "srun: error: node02: task 1: Exited")

    with pytest.raises(ConfigError, match="node01: unreachable: the pre-start step printed nothing"):
        slurm_prestart.read_nodes(slurm_launch.srun_tasks(2), ["node01", "node02"], str(tmp_path),
                                  resume=False, min_free_gb=0, run=silent)


def test_tasks_are_told_apart_by_the_node_they_name_not_their_order():
    stdout = ("1: ascend-ready-node node01\n0: ascend-ready-node node03\n 1: granted\n0: held -\n")
    assert slurm_prestart.split_labelled(stdout) == {1: "ascend-ready-node node01\ngranted\n",
                                                     0: "ascend-ready-node node03\nheld -\n"}

    def run(argv, **kw):
        return subprocess.CompletedProcess(argv, 0, stdout, "")

    got = slurm_prestart.srun_each(["srun"], ["node01", "node03"], "true", run)
    assert got == {"node01": (0, "granted\n"), "node03": (0, "held -\n")}


def test_print_sbatch_into_a_directory_that_cannot_be_made_is_refused_not_a_traceback(tmp_path):
    from click.testing import CliRunner

    from ascend_ready.training.cli import main

    (tmp_path / "file").write_text("")
    result = CliRunner().invoke(main, ["grpo", "-c", "tiny", "-o", str(tmp_path / "file" / "run"),
                                       "--launcher", "slurm", "--print-sbatch", str(tmp_path / "job.sh")])
    assert result.exit_code == 2 and f"{tmp_path / 'file'} is not a directory" in result.output
    assert not (tmp_path / "job.sh").exists()
