"""The simulator's stand-in for python-build-standalone's `install_only` archive: the published name and
python/ layout, and a tree that runs from wherever it is unpacked (what python_env relies on under /opt)."""

from __future__ import annotations

import json
import subprocess
import tarfile

import pytest

from ascend_ready.provision import matrix as mx
from ascend_ready.provision import resolver as rv
from ascend_ready.sim.packages import standalone_python


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    build = rv.python_build_for(mx.load_matrix(), "3.11", "x86_64")
    if standalone_python.source_interpreter("3.11") is None:
        pytest.skip("no local CPython 3.11 to build the stand-in from")
    # the default cache: the provisioning tests' package sources reuse the same archive
    return standalone_python.build_archive(tmp_path_factory.mktemp("pbs"), build.file, "3.11")


def test_it_has_the_published_name_and_layout(archive):
    assert archive.name == "cpython-3.11.14+20251031-x86_64-unknown-linux-gnu-install_only.tar.gz"
    names = set(standalone_python.members(archive))
    assert {"python/bin/python3.11", "python/bin/python3", "python/lib/python3.11/os.py",
            "python/lib/python3.11/venv/__init__.py", "python/lib/python3.11/site-packages"} <= names
    assert {n.split("/", 1)[0] for n in names} == {"python"}
    assert not [n for n in names if n.startswith("python/lib/python3.11/site-packages/")]  # the host's own
    with tarfile.open(archive) as tar:
        assert {(m.uid, m.gid) for m in tar.getmembers()} == {(0, 0)}


def test_it_runs_from_where_it_is_unpacked(archive, tmp_path):
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="tar")
    moved = tmp_path / "opt-elsewhere"
    (tmp_path / "python").rename(moved)
    probe = "import sys, json, ssl, venv; print(json.dumps([sys.prefix, sys.version_info[:2]]))"
    proc = subprocess.run([str(moved / "bin" / "python3"), "-I", "-c", probe], env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=True)
    prefix, version = json.loads(proc.stdout)
    assert prefix == str(moved) and version == [3, 11]
    # a shared build finds its libpython next to itself, never in the tree it was copied from
    source_lib = str(standalone_python.source_interpreter("3.11") / "lib").encode()
    assert b"\0" + source_lib + b"\0" not in (moved / "bin" / "python3.11").read_bytes()
