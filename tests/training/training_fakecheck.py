"""ascend-check on snapshots of simulated nodes, standing in for live hosts in the training tests: the
snapshots are the check tests' own (tests/checks/checks_fakenode.py), the judge is the real ascend-check;
and the launch spec made from the report it prints, with the routes two simulated nodes print."""

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


# ---------------------------------------------------------------- the launch spec ascend-check makes of them

# `ip -o route get 10.251.199.11` / `ip -o addr show to 10.251.199.11` on two simulated nodes
ROUTES = {
    "node01": "local 10.251.199.11 dev lo src 10.251.199.11 uid 0 \\    cache <local> \n",
    "node02": "10.251.199.11 dev eth0 src 10.251.199.12 uid 0 \\    cache \n",
}
ADDRS = {"node01": "2: eth0    inet 10.251.199.11/24 scope global eth0\\       valid_lft forever "
                   "preferred_lft forever\n"}
MASTER = "10.251.199.11"


def printed_report(directory: Path, *hosts):
    """The report `ascend-check --snapshot DIR --format json` prints for simulator-rendered hosts."""
    from click.testing import CliRunner

    from ascend_ready.checks.cli import main as check_main
    from ascend_ready.checks.report import Report

    snap = save_snapshot(directory / "snapshot", *hosts)
    result = CliRunner().invoke(check_main, ["--snapshot", str(snap), "--format", "json"])
    return Report.model_validate_json(result.stdout)


def launch_spec(directory: Path, *hosts, targets=None, **kw):
    """The launch spec made from that printed report and the captures above: node0N at 10.251.199.(11+i)
    as root unless `targets` (spec_from_report's keywords, `devices` say)."""
    from ascend_ready.checks.cluster.launchspec import spec_from_report
    from ascend_ready.fleet.transport import Target

    targets = targets or [Target(name=h.name, address=f"10.251.199.{11 + i}", user="root")
                          for i, h in enumerate(hosts)]
    return spec_from_report(printed_report(directory, *hosts), targets, master_addr=MASTER, routes=ROUTES,
                            addrs=ADDRS, **kw)


def spec_file(directory: Path, spec) -> Path:
    """`spec` written where --launch-spec reads it."""
    path = directory / "spec.json"
    path.write_text(spec.model_dump_json(indent=1))
    return path


def train(*args: str):
    """`ascend-train grpo -c tiny ARGS max_steps=2`, in process."""
    from click.testing import CliRunner

    from ascend_ready.training.cli import main

    return CliRunner().invoke(main, ["grpo", "-c", "tiny", *args, "max_steps=2"])
