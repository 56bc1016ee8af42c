"""ascend-check on snapshots of simulated nodes, standing in for live hosts in the training tests: the
snapshots are the check tests' own (tests/checks/checks_fakenode.py), the judge is the real ascend-check."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path

#: tests/checks/checks_fakenode.py: node snapshots rendered by the simulator, shared with the check tests
_FAKENODE = Path(__file__).resolve().parents[1] / "checks" / "checks_fakenode.py"


def fakenode():
    """The checks_fakenode module (one copy, whichever test folder imports it first)."""
    if "checks_fakenode" not in sys.modules:
        spec = importlib.util.spec_from_file_location("checks_fakenode", _FAKENODE)
        module = importlib.util.module_from_spec(spec)
        sys.modules["checks_fakenode"] = module
        spec.loader.exec_module(module)
    return sys.modules["checks_fakenode"]


def healthy(name: str = "node01", index: int = 0):
    return fakenode().fake_host(name, index=index)


def link_down(name: str, index: int):
    return fakenode().fake_host(name, index=index, faults=[("link-down", {"device": 3})])


def unreachable(name: str = "node09"):
    from ascend_ready.checks.snapshot import HostSnapshot

    return HostSnapshot(name=name, reachable=False, error=f"root@{name}:22: timed out")


def save_snapshot(directory: Path, *hosts) -> Path:
    from ascend_ready.checks.snapshot import Snapshot
    from ascend_ready.checks.snapshot import save_snapshot as save

    save(Snapshot(hosts={h.name: h for h in hosts}), directory)
    return directory


_WRAPPER = '''#!{python}
"""The real ascend-check, judging {snapshot} instead of the hosts the gate named (recorded in argv.txt)."""
import sys
from pathlib import Path

args, rest = sys.argv[1:], []
Path({argv!r}).write_text(" ".join(args) + "\\n")
while args:
    arg = args.pop(0)
    if arg in ("--hosts", "-i", "--inventory"):
        args.pop(0)
    else:
        rest.append(arg)
from ascend_ready.checks.cli import main

main(["--snapshot", {snapshot!r}, *rest], prog_name="ascend-check")
'''


def write_ascend_check(directory: Path, *hosts) -> Path:
    """An executable that runs the real ascend-check on a snapshot of `hosts` (none: an empty directory,
    which ascend-check refuses as a usage error) with the arguments the gate passed, less the host list."""
    snapshot = directory / "snapshot"
    if hosts:
        save_snapshot(snapshot, *hosts)
    else:
        snapshot.mkdir(exist_ok=True)
    script = directory / "ascend-check"
    argv = directory / "argv.txt"
    script.write_text(_WRAPPER.format(python=sys.executable, snapshot=str(snapshot), argv=str(argv)))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script
