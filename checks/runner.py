"""Runs the check suite in-process with pytest over a snapshot and turns outcomes into a Report.

pytest collects checks/suite and parametrizes `host` per node; our plugin's test loop calls each check
itself, so assertion failures, warnings, skips and probe/parse errors become result rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ascend_ready.checks import registry
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.registry import CheckSpec, CheckWarning
from ascend_ready.checks.remediation import localize
from ascend_ready.checks.report import CheckResult, HostStatus, Report, Series
from ascend_ready.checks.resources import Host
from ascend_ready.checks.resources.base import Fleet
from ascend_ready.checks.snapshot import Snapshot
from ascend_ready.errors import AscendReadyError, ConfigError

__all__ = ["run_checks"]

SUITE_DIR = Path(registry.__file__).resolve().parent / "suite"


class _Plugin:
    #: the suite's conftest looks for this marker to tell a real run from a bare `pytest checks/suite`
    ascend_check_runner = True

    def __init__(self, hosts: list[Host], specs: Sequence[CheckSpec]):
        self.hosts = hosts
        self.selected = {s.id for s in specs}
        self.results: list[CheckResult] = []
        self.collection_errors: list[str] = []

    def pytest_generate_tests(self, metafunc):
        if "host" in metafunc.fixturenames:
            metafunc.parametrize("host", self.hosts, ids=[h.name for h in self.hosts])

    def pytest_collection_modifyitems(self, session, config, items):
        items[:] = [
            i
            for i in items
            if getattr(getattr(i, "function", None), "__check__", None) is not None
            and i.function.__check__.id in self.selected
        ]

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_errors.append(str(report.longrepr))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """Call each check directly: a check needs only `host`, so pytest's per-test setup/teardown
        and reporting machinery (most of the time on 32 hosts x 30 checks) is skipped."""
        for item in session.items:
            self.results.append(self.run_item(item))
        return True

    def pytest_itemcollected(self, item):
        extra = set(getattr(item, "fixturenames", ())) - {"host", "request"}
        if extra:
            raise pytest.UsageError(f"{item.nodeid}: a check takes only `host`, not {sorted(extra)}")

    def run_item(self, item) -> CheckResult:
        spec: CheckSpec = item.function.__check__
        host: Host = item.callspec.params["host"]
        registry.take_evidence()
        registry.take_fix_command()
        registry.take_series()
        started = time.perf_counter()
        status, message = "pass", ""
        try:
            with host.reading(spec.id, spec.reads):
                item.obj(host=host)
        except CheckWarning as exc:
            status, message = "warn", str(exc)
        except AssertionError as exc:
            status, message = "fail", _assert_message(exc)
        except pytest.skip.Exception as exc:
            status, message = "skip", exc.msg or "does not apply"
        except pytest.fail.Exception as exc:
            status, message = "fail", exc.msg
        except AscendReadyError as exc:
            # A parse error or a probe that timed out: the fact could not be judged, which is never a pass.
            status, message = "error", exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
        except Exception as exc:  # a bug in a check must not hide the other results
            status, message = "error", f"internal error in {spec.function}: {type(exc).__name__}: {exc}"
        remediation = spec.remediation
        command = registry.take_fix_command()
        if remediation is not None and command is not None:
            remediation = remediation.model_copy(update={"command": command})
        remediation = localize(remediation, host)  # this host's name, user, inventory in the fix
        return CheckResult(
            check_id=spec.id,
            host=host.name,
            status=status,
            severity=spec.severity,
            tier=spec.tier,
            title=spec.title,
            message=message,
            evidence=registry.take_evidence(),
            series=[Series(**s) for s in registry.take_series()] or None,
            remediation=remediation,
            duration_s=round(time.perf_counter() - started, 4),
        )


def _assert_message(exc: AssertionError) -> str:
    text = str(exc)
    # pytest's rewritten asserts append "\nassert ..." after our message; keep the sentence.
    head = text.split("\nassert ", 1)[0].strip()
    return head or text.strip() or "assertion failed"


@contextmanager
def _isolated_env():
    """No user PYTEST_ADDOPTS, no third-party plugins: the suite must behave the same everywhere."""
    saved = {
        k: os.environ.get(k) for k in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")
    }
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ.pop("PYTEST_PLUGINS", None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_checks(
    snapshot: Snapshot,
    profiles: dict[str, HardwareProfile],
    specs: Sequence[CheckSpec],
    *,
    tier: str = "quick",
    profile_name: str = "",
    source: str = "live",
    tool_version: str = "",
    started: float | None = None,
    fleet_reference: dict | None = None,
) -> Report:
    """Judge every reachable host of `snapshot` with `specs`; `profiles` maps host name -> its profile.
    `fleet_reference`: the fleet's recorded fingerprints, for a node judged alone (see Fleet)."""
    started = time.monotonic() if started is None else started
    hosts = [Host(h, profiles[name]) for name, h in snapshot.hosts.items() if h.reachable]
    fleet = Fleet(hosts, fleet_reference)
    for host in hosts:
        host.fleet = fleet
    plugin = _Plugin(hosts, specs)
    if hosts and specs:
        args = [
            str(SUITE_DIR),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:terminal",
            "-p",
            "no:warnings",
            "-p",
            "no:logging",
            "-p",
            "no:junitxml",
            "-p",
            "no:doctest",
            "-p",
            "no:pastebin",
            "-p",
            "no:stepwise",
            "-p",
            "no:legacypath",
            "-p",
            "no:unraisableexception",
            "-p",
            "no:threadexception",
            "-p",
            "no:faulthandler",
            "-s",
            "--import-mode=importlib",
            "-c",
            os.devnull,
            "--rootdir",
            str(SUITE_DIR),
            "--confcutdir",
            str(SUITE_DIR),
        ]
        with _isolated_env():
            rc = pytest.main(args, plugins=[plugin])
        if plugin.collection_errors or rc not in (0, 5):
            raise ConfigError(
                "the check suite could not be collected:\n" + "\n".join(plugin.collection_errors),
                hint="this is a bug in ascend-check; please report it",
            )
    order = {s.id: i for i, s in enumerate(sorted(specs, key=lambda s: s.id))}
    host_order = {name: i for i, name in enumerate(snapshot.hosts)}
    results = sorted(plugin.results, key=lambda r: (host_order.get(r.host, 0), order.get(r.check_id, 0)))
    return Report(
        tool_version=tool_version,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        tier=tier,
        profile=profile_name,
        source=source,
        duration_s=round(time.monotonic() - started, 3),
        hosts=[
            HostStatus(
                name=h.name, address=h.address, reachable=h.reachable, error=h.error, collect_s=h.collect_s
            )
            for h in snapshot.hosts.values()
        ],
        results=results,
    )
