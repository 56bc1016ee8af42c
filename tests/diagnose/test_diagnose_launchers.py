"""A worker ended by a signal, an exit code or its scheduler, as each launcher reports it (round 10 E of issue
31): the signal names the cause whichever launcher printed it, a stop signal and a launcher's exit code are
echoes of what came first, and the rank's own error, where the log holds it, stays the cause.

The lines are real: printed by the real producers, run here (torch's ChildFailedError summary and
torch.multiprocessing's ProcessExitedException, CPython's CalledProcessError, bash's report of a killed
child), or copied from public threads into tests/diagnose/data/corpus/dev/ and tests/diagnose/data/launchers/:
launchers/torchrun-exit1-no-traceback_minigpt-4-237.log is Vision-CAIR/MiniGPT-4#237,
launchers/torchrun-exit1-agent-line_chinese-vicuna-113.log Facico/Chinese-Vicuna#113,
launchers/gloo-terminate-abort_horovod-2907.log horovod/horovod#2907,
launchers/cpp-terminate-c10-error_pytorch-327.log pytorch/pytorch#327 (a comment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from ascend_ready.checks.diagnose import diagnose_paths

DATA = Path(__file__).with_name("data")
CORPUS = DATA / "corpus"
LAUNCHERS = DATA / "launchers"
OURS = {
    "process-aborted", "process-bus-error", "process-illegal-instruction", "process-fpe",
    "process-stopped-by-signal", "worker-exited-with-error", "elastic-no-error-file", "slurm-time-limit",
    "slurm-preempted", "slurm-node-failure", "slurm-job-cancelled", "slurm-oom-kill", "ray-node-died",
    "cpp-uncaught-exception",
}


def _diagnose(tmp_path: Path, text: str):
    log = tmp_path / "job.log"
    log.write_text(text if text.endswith("\n") else text + "\n")
    return diagnose_paths([log])


def _causes(report) -> list:
    return [f for f in report.findings if f.role == "cause"]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# ---------------------------------------------------------------- the real producers


def _torchrun_summary(exitcode: int, rank: int = 0) -> str:
    """torchrun's ChildFailedError as torch prints it for a worker with this exit code and no error file."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    failure = ProcessFailure(local_rank=rank, pid=4242, exitcode=exitcode,
                             error_file="/nonexistent/error.json")
    exc = ChildFailedError("train.py", {rank: failure})
    return "".join(traceback.format_exception_only(exc))


def _subprocess_error(sig: signal.Signals) -> str:
    """CPython's CalledProcessError for a child this signal killed (as accelerate's launcher raises it)."""
    code = f"import os, signal; os.kill(os.getpid(), signal.{sig.name})"
    try:
        subprocess.run([sys.executable, "-c", code], check=True)
    except subprocess.CalledProcessError as exc:
        return "".join(traceback.format_exception_only(exc))
    raise AssertionError("the child was not killed")


def _exit_status_error(status: int) -> str:
    """CPython's CalledProcessError for a child that exited with this status (a shell wrapper's 128+N)."""
    try:
        subprocess.run([sys.executable, "-c", f"raise SystemExit({status})"], check=True)
    except subprocess.CalledProcessError as exc:
        return "".join(traceback.format_exception_only(exc))
    raise AssertionError("the child exited 0")


def _die(_index: int, signum: int) -> None:
    import faulthandler

    faulthandler.disable()  # pytest's handler would print the dying worker's stack on the test's stderr
    os.kill(os.getpid(), signum)


def _spawn_error(sig: signal.Signals) -> str:
    """torch.multiprocessing's ProcessExitedException for a worker this signal killed."""
    import torch.multiprocessing as mp

    try:
        mp.start_processes(_die, args=(int(sig),), nprocs=1, start_method="fork")
    except mp.ProcessExitedException as exc:
        return "".join(traceback.format_exception_only(exc))
    raise AssertionError("the worker was not killed")


def _bash_report(sig: signal.Signals) -> str:
    """What bash prints on stderr when a foreground child dies of this signal."""
    code = f"import os, signal; os.kill(os.getpid(), signal.{sig.name})"
    script = f'{sys.executable} -c "{code}"; true'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True).stderr


# ---------------------------------------------------------------- the signal table

_SIGNALS = [
    (signal.SIGBUS, "process-bus-error", "fault"),
    (signal.SIGILL, "process-illegal-instruction", "fault"),
    (signal.SIGFPE, "process-fpe", "fault"),
    (signal.SIGABRT, "process-aborted", "wrapper"),
    (signal.SIGKILL, "worker-killed", "fault"),
    (signal.SIGSEGV, "process-segfault", "fault"),
]


@pytest.mark.parametrize(("sig", "want", "kind"), _SIGNALS, ids=[s.name for s, _w, _k in _SIGNALS])
@pytest.mark.parametrize("launcher", ["torchrun", "subprocess", "spawn"])
def test_a_signal_names_its_cause_whichever_launcher_reports_it(tmp_path, sig, want, kind, launcher):
    text = {"torchrun": lambda: _torchrun_summary(-int(sig)), "subprocess": lambda: _subprocess_error(sig),
            "spawn": lambda: _spawn_error(sig)}[launcher]()
    assert sig.name in text
    [first] = _causes(_diagnose(tmp_path, text))
    assert (first.id, first.code, first.kind) == (want, sig.name, kind)
    assert first.fix and first.causes


@pytest.mark.parametrize(("status", "want"), [
    (134, "process-aborted"), (135, "process-bus-error"), (132, "process-illegal-instruction"),
    (136, "process-fpe"), (137, "worker-killed"), (139, "process-segfault"),
])
def test_a_shell_wrappers_128_plus_n_exit_status_is_read_as_its_signal(tmp_path, status, want):
    text = _exit_status_error(status)
    assert f"returned non-zero exit status {status}." in text
    [first] = _causes(_diagnose(tmp_path, text))
    assert first.id == want  # not the bare CalledProcessError


@pytest.mark.parametrize(("sig", "want"), [
    (signal.SIGBUS, "process-bus-error"), (signal.SIGFPE, "process-fpe"),
])
def test_bashs_report_of_a_killed_child_is_read(tmp_path, sig, want):
    text = _bash_report(sig)
    assert text.strip(), "bash printed nothing"
    [first] = _causes(_diagnose(tmp_path, text))
    assert first.id == want


def test_a_bus_error_names_shared_memory_and_the_check_that_catches_it():
    [first] = _causes(diagnose_paths([CORPUS / "dev/sigbus-docker-pytest-torchrun_slapo-114.log"]))
    assert first.id == "process-bus-error" and "os.shm" in first.check_ids and "--shm-size" in first.fix
    assert any("Fatal Python error: Bus error" in e.text for e in first.evidence)


@pytest.mark.parametrize(("name", "want"), [
    ("dev/sigill-avx2-gdb_pytorch-22338.log", "process-illegal-instruction"),  # gdb's report
    ("dev/sigfpe-caught-signal-8_streamvggt-10.log", "process-fpe"),  # UCX's signal handler
])
def test_a_debuggers_or_a_handlers_signal_report_names_it(name, want):
    [first] = _causes(diagnose_paths([CORPUS / name]))
    assert first.id == want and first.kind == "fault" and first.fix


# ---------------------------------------------------------------- stop signals: echoes of what came first


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_alone_is_the_cause_an_echo_of_an_earlier_fault_is_not(tmp_path, sig):
    stop = _torchrun_summary(-int(sig))
    [alone] = _causes(_diagnose(tmp_path, stop))
    assert (alone.id, alone.code, alone.kind) == ("process-stopped-by-signal", sig.name, "remote")
    # a rank that died of SIGBUS first: the stopped ranks are its consequence
    report = _diagnose(tmp_path, _torchrun_summary(-int(signal.SIGBUS)) + stop)
    assert [f.id for f in _causes(report)] == ["process-bus-error"]
    assert next(f for f in report.findings if f.id == "process-stopped-by-signal").role == "consequence"


def test_the_tasks_slurm_terminated_at_the_time_limit_are_its_consequences():
    report = diagnose_paths([CORPUS / "dev/slurm-time-limit-srun-terminated_desitarget-628.log"])
    [first] = _causes(report)
    assert (first.id, first.node) == ("slurm-time-limit", "nid01934") and "--time" in first.fix
    echoes = [f for f in report.findings if f.id == "process-stopped-by-signal"]
    assert echoes and all(f.role == "consequence" and f.caused_by.startswith("time limit") for f in echoes)


def test_a_healthy_torchrun_stop_of_the_survivors_is_no_signal_finding():
    # torchrun's `Sending process N closing signal SIGTERM` (pytorch#150916) is stopped-by-signal's, not ours
    report = diagnose_paths([CORPUS / "dev/signal15-survivor_pytorch-150916.log"])
    assert not {f.id for f in report.findings} & OURS


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("clean_*.log")))
def test_a_clean_run_gives_no_launcher_finding(name):
    assert not {f.id for f in diagnose_paths([DATA / name]).findings} & OURS


# ---------------------------------------------------------------- a worker's exit code, with its error or not


def test_torchruns_exit_1_with_nothing_else_says_where_the_ranks_error_is():
    [first] = _causes(diagnose_paths([LAUNCHERS / "torchrun-exit1-no-traceback_minigpt-4-237.log"]))
    assert (first.id, first.kind) == ("elastic-no-error-file", "wrapper")
    assert "Root Cause" in first.fix and "--log-dir" in first.fix and "--tee 3" in first.fix
    assert "TORCHELASTIC_ERROR_FILE" in first.fix and "record" in first.fix


def test_torchruns_agent_line_names_the_rank_and_its_exit_code():
    [first] = _causes(diagnose_paths([LAUNCHERS / "torchrun-exit1-agent-line_chinese-vicuna-113.log"]))
    assert (first.id, first.code) == ("worker-exited-with-error", "exit 1")
    assert first.title.startswith("Worker 0 exited with code 1")


def test_the_ranks_own_error_in_the_log_stays_the_cause(tmp_path):
    # the rank's DeepSpeed error (starcoder#77), torchrun's agent line and summary after it
    rank_error = _lines(CORPUS / "dev/deepspeed-batch-size-mismatch_starcoder-77.log")
    agent = _lines(LAUNCHERS / "torchrun-exit1-agent-line_chinese-vicuna-113.log")
    report = _diagnose(tmp_path, "\n".join([*rank_error, *agent]) + "\n" + _torchrun_summary(1))
    [first] = _causes(report)
    assert first.id == "deepspeed-batch-size-mismatch"
    assert not {f.id for f in report.findings} & {"worker-exited-with-error", "elastic-no-error-file"}


def test_a_ranks_plain_python_exception_stays_the_cause(tmp_path):
    try:
        {}["model.embed_tokens.weight"]
    except KeyError as exc:
        rank_error = "".join(traceback.format_exception_only(exc))
    agent = _lines(LAUNCHERS / "torchrun-exit1-agent-line_chinese-vicuna-113.log")
    report = _diagnose(tmp_path, rank_error + "\n".join(agent) + "\n" + _torchrun_summary(1))
    causes = _causes(report)
    assert causes[0].id == "python-exception" and causes[0].code == "KeyError"
    assert all(f.role == "consequence" for f in report.findings if f.id in OURS)


def test_an_sruns_exit_code_gives_way_to_the_preemption_that_caused_it(tmp_path):
    name = "dev/slurm-job-requeue-preempted_submitit-1708.log"
    assert [f.id for f in _causes(diagnose_paths([CORPUS / name]))] == ["slurm-preempted"]
    # the task exit line alone is srun's report of a task's own exit: it says where that task's output is
    exited = next(line for line in _lines(CORPUS / name) if "Exited with exit code" in line)
    [first] = _causes(_diagnose(tmp_path, exited))
    assert (first.id, first.code, first.node) == ("worker-exited-with-error", "exit 1", "SERVER_NAME")
    assert "--output=%x-%j-%t.out" in first.fix


# ---------------------------------------------------------------- schedulers


def test_slurms_memory_cgroup_kill_is_named_with_the_allocation_to_raise():
    [first] = _causes(diagnose_paths([CORPUS / "dev/slurm-oom-kill-srun_brain-score-950.log"]))
    assert (first.id, first.node) == ("slurm-oom-kill", "node107") and "MaxRSS" in first.fix


def test_a_slurm_line_a_warning_quotes_names_nothing(tmp_path):
    # submitit's own WARNING lines about the signals it forwards (submitit#1708) are no finding of ours
    warnings = [line for line in _lines(CORPUS / "dev/slurm-job-requeue-preempted_submitit-1708.log")
                if "submitit WARNING" in line]
    assert len(warnings) == 3
    assert not {f.id for f in _diagnose(tmp_path, "\n".join(warnings)).findings} & OURS


# ---------------------------------------------------------------- a C++ exception that ended the process


def test_an_uncaught_cpp_exception_is_an_envelope_naming_its_type():
    [first] = _causes(diagnose_paths([LAUNCHERS / "cpp-terminate-c10-error_pytorch-327.log"]))
    assert (first.id, first.code, first.kind) == ("cpp-uncaught-exception", "c10::Error", "wrapper")
    assert "what()" in first.fix


def test_a_specific_entry_on_the_terminate_line_wins_over_the_envelope():
    # gloo's IoException thrown on a peer's death (horovod#2907): the gloo entry, not the bare terminate
    report = diagnose_paths([LAUNCHERS / "gloo-terminate-abort_horovod-2907.log"])
    assert "cpp-uncaught-exception" not in {f.id for f in report.findings}
    assert _causes(report)[0].id == "gloo-peer-closed"
