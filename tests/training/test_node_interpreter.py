"""The job's interpreter is judged on every node before anything starts: it must import ascend-ready of
the controller's version (the pre-start probe, checks/cluster/node_facts.py, run here by the real /bin/sh)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

import pytest

from ascend_ready import __version__
from ascend_ready.checks.cluster.node_facts import FactQuery, fact_probes, read_facts
from ascend_ready.checks.collect import collect_host
from ascend_ready.errors import ConfigError
from ascend_ready.fleet.transport import LOCAL, FanoutOptions, Target
from ascend_ready.training import node_probe


def _facts(python: str):
    """The pre-start probes of this machine through the preflight's own batch, as the launcher runs them."""
    query = FactQuery("127.0.0.1", {"python": ("-x", python)})
    probes, labels = fact_probes(query)
    me = getpass.getuser()
    snap = collect_host(Target(name="node01", address=LOCAL), probes, FanoutOptions(), user=me)
    return read_facts(snap, query, labels)


def test_an_interpreter_with_this_ascend_ready_may_start():
    facts = _facts(sys.executable)
    assert facts.ascend_ready == (0, __version__)
    node_probe.refuse_missing({"node01": facts}, {"node01": sys.executable})


def test_an_interpreter_without_ascend_ready_is_refused_naming_the_node_and_path(tmp_path):
    bare = tmp_path / "python"  # a venv the playbook built before it installed ascend-ready (issue 18)
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    with pytest.raises(ConfigError) as err:
        node_probe.refuse_missing({"node02": _facts(str(bare))}, {"node02": str(bare)})
    assert (f"node02: {bare} cannot import ascend_ready (ModuleNotFoundError: No module named "
            "'ascend_ready')") in err.value.message
    assert "nothing was started" in err.value.message and "--python" in err.value.hint


def test_another_ascend_ready_version_is_refused_naming_both(tmp_path):
    (tmp_path / "ascend_ready").mkdir()
    (tmp_path / "ascend_ready" / "__init__.py").write_text('__version__ = "0.0.9"\n')
    other = tmp_path / "python"
    other.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path} exec {sys.executable} \"$@\"\n")
    other.chmod(0o755)
    with pytest.raises(ConfigError) as err:
        node_probe.refuse_missing({"node01": _facts(str(other))}, {"node01": str(other)})
    assert f"node01: {other} has ascend-ready 0.0.9, this controller {__version__}" in err.value.message


def test_a_missing_interpreter_is_named_once_as_missing(tmp_path):
    gone = str(Path(tmp_path) / "venv" / "bin" / "python")
    with pytest.raises(ConfigError) as err:
        node_probe.refuse_missing({"node01": _facts(gone)}, {"node01": gone})
    assert f"node01: python {gone} is not there" in err.value.message
    assert "cannot import" not in err.value.message


def test_a_home_relative_venv_is_expanded_by_the_nodes_shell_and_started_exactly(tmp_path, monkeypatch):
    """The inventory's ~user/venvs/ascend-<stack>/bin/python (the venv python_env built) is expanded on the
    node, and the job starts that exact path."""
    venv = Path(tmp_path) / "venvs" / "ascend-s1" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (venv / "python").chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path))
    facts = _facts("~/venvs/ascend-*/bin/python")
    assert facts.python == str(venv / "python") and not facts.missing
    assert facts.ascend_ready == (0, __version__)
