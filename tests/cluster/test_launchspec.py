"""The launch spec is refused when stale, failed everywhere, or older than the nodes' versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ascend_ready.checks.cluster.launchspec import (
    LaunchSpec,
    LaunchSpecHost,
    LaunchSpecRefused,
    load_launch_spec,
)
from ascend_ready.errors import ConfigError

FP = {"cann": "8.2.RC1", "driver": "25.2.0"}


def _spec(**overrides) -> LaunchSpec:
    hosts = {
        "node01": LaunchSpecHost(address="10.0.0.1", verdict="pass", devices=list(range(8)), fingerprint=FP),
        "node02": LaunchSpecHost(address="10.0.0.2", verdict="fail", failed_checks=["pcie.link_width"],
                                 fingerprint=FP),
    }
    return LaunchSpec(hosts=hosts, master_addr="10.0.0.1", **overrides)


def test_a_fresh_spec_starts_only_the_hosts_that_passed():
    assert list(_spec().usable()) == ["node01"]


def test_a_stale_spec_is_refused_with_its_age():
    spec = _spec(created_at=datetime.now(UTC) - timedelta(hours=2), valid_s=3600)
    with pytest.raises(LaunchSpecRefused, match="was valid for 3600 s") as exc:
        spec.usable()
    assert exc.value.exit_code == 1


def test_a_spec_without_a_passing_host_is_refused_naming_the_checks():
    spec = _spec()
    spec.hosts["node01"].verdict = "error"
    with pytest.raises(LaunchSpecRefused, match=r"node02 \(fail: pcie.link_width\)"):
        spec.usable()


def test_versions_changed_since_the_spec_are_refused():
    spec = _spec()
    spec.check_versions({"node01": FP})
    with pytest.raises(LaunchSpecRefused, match=r"node01: cann was 8\.2\.RC1, is now 8\.0\.0"):
        spec.check_versions({"node01": {**FP, "cann": "8.0.0"}})
    with pytest.raises(LaunchSpecRefused, match="could not be read again"):
        spec.check_versions({})


def test_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(_spec().model_dump_json())
    assert load_launch_spec(path).hosts["node01"].devices == list(range(8))
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_launch_spec(path)
    path.write_text('{"hosts": {"x": {"verdict": "maybe"}}}')
    with pytest.raises(ConfigError, match=r"hosts\.x"):
        load_launch_spec(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_launch_spec(tmp_path / "missing.json")
