"""The launch gate trusts only what the preflight judged: a spec or preflight narrowed by --select/--skip
is refused naming the checks it left out (unless waived), and a spec of an unknown schema, from the
future or edited by hand is refused. Reports are ones `ascend-check --snapshot` really printed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from training_fakecheck import ADDRS, MASTER, ROUTES, healthy, save_snapshot, train

from ascend_ready.checks.cli import main as check_main
from ascend_ready.checks.cluster.launchspec import (
    LaunchSpec,
    LaunchSpecRefused,
    load_launch_spec,
    spec_from_report,
)
from ascend_ready.checks.profile import TRAINING_CHECKS, bundled_profiles, load_profile
from ascend_ready.checks.registry import all_checks
from ascend_ready.checks.report import Report
from ascend_ready.fleet.transport import Target


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    return save_snapshot(tmp_path_factory.mktemp("gate") / "snapshot", healthy("node01"),
                         healthy("node02", index=1))


def printed(snapshot: Path, *args: str) -> Report:
    result = CliRunner().invoke(check_main, ["--snapshot", str(snapshot), "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return Report.model_validate_json(result.stdout)


def spec_of(report: Report, **kw) -> LaunchSpec:
    targets = [Target(name=n, address=f"10.251.199.{11 + i}", user="root") for i, n in
               enumerate(("node01", "node02"))]
    return spec_from_report(report, targets, master_addr=MASTER, routes=ROUTES, addrs=ADDRS, **kw)


def write(tmp_path: Path, spec: LaunchSpec | dict) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(spec if isinstance(spec, str) else
                    json.dumps(spec) if isinstance(spec, dict) else spec.model_dump_json(indent=1))
    return path


def test_every_bundled_profile_names_real_quick_checks():
    checks = all_checks()
    assert set(TRAINING_CHECKS) <= set(checks)
    for name in bundled_profiles():
        required = load_profile(name).training_checks
        assert required and set(required) <= set(checks), name
        assert all(checks[c].tier == "quick" for c in required), name  # the default preflight judges them
    assert not any(c.startswith("hccl.") for c in load_profile("atlas-300i-duo").training_checks)


def test_a_whole_preflight_covers_training_and_records_what_it_ran(snapshot):
    report = printed(snapshot)
    assert report.schema_version == 3 and report.select == [] and report.skip == []
    assert set(TRAINING_CHECKS) <= set(report.selected_checks)
    assert all(h.training_checks == list(TRAINING_CHECKS) for h in report.hosts)
    spec = spec_of(report)
    assert spec.require_covered() == [] and spec.digest is None  # set on every write
    assert json.loads(spec.model_dump_json())["digest"] == spec.content_digest()


@pytest.mark.usefixtures("no_ssh")
def test_a_narrowed_spec_is_refused_naming_the_checks_not_judged(tmp_path, snapshot):
    report = printed(snapshot, "--select", "pcie.*")
    assert report.select == ["pcie.*"] and report.selected_checks == ["pcie.aer", "pcie.link_speed",
                                                                       "pcie.link_width"]
    spec = spec_of(report)
    assert list(spec.usable()) == ["node01", "node02"]  # every check it ran passed
    out = tmp_path / "run"
    result = train("--launch-spec", str(write(tmp_path, spec)), "-o", str(out), "--dry-run")
    assert result.exit_code == 1, result.output
    err = result.stderr
    assert "error: the launch spec's preflight did not judge every check training needs " \
           "(--tier quick --select 'pcie.*'); not judged on node01, node02: fleet.hardware, fleet.hccn" in err
    assert "npu.count" in err and "pcie.link_width" not in err.split("not judged on")[1]
    assert "hint: run the whole preflight" in err and "--waive CHECK" in err and not out.exists()


@pytest.mark.usefixtures("no_ssh")
def test_waived_checks_are_recorded_and_printed_at_the_launch(tmp_path, snapshot):
    report = printed(snapshot, "--skip", "npu.hbm_usage", "--skip", "os.shm")
    spec = spec_of(report, waived=["npu.hbm_usage"])
    assert json.loads(write(tmp_path, spec).read_text())["waived"] == ["npu.hbm_usage"]
    result = train("--launch-spec", str(tmp_path / "spec.json"), "-o", str(tmp_path / "r"), "--dry-run")
    assert result.exit_code == 1 and "not judged on node01, node02: os.shm" in result.stderr
    result = train("--launch-spec", str(tmp_path / "spec.json"), "-o", str(tmp_path / "r"), "--dry-run",
                   "--waive", "os.shm")
    assert result.exit_code == 0, result.output
    assert "WAIVED npu.hbm_usage (waived by the preflight's --waive)" in result.stderr
    assert "WAIVED os.shm (--waive)" in result.stderr


@pytest.mark.usefixtures("no_ssh")
def test_skip_preflight_is_the_whole_bypass(tmp_path, snapshot):
    spec = spec_of(printed(snapshot, "--select", "pcie.*"))
    result = train("--launch-spec", str(write(tmp_path, spec)), "-o", str(tmp_path / "r"), "--dry-run",
                   "--skip-preflight")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("version", [0, 7, "2"])
@pytest.mark.usefixtures("no_ssh")
def test_an_unknown_schema_version_is_refused(tmp_path, snapshot, version):
    data = json.loads(spec_of(printed(snapshot)).model_dump_json())
    data["schema_version"] = version
    out = tmp_path / "run"
    result = train("--launch-spec", str(write(tmp_path, data)), "-o", str(out))
    assert result.exit_code == 2, result.output
    assert f"has schema version {version!r}; this ascend-ready reads 1, 2" in result.stderr
    assert ("upgrade ascend-ready" in result.stderr) == (version == 7)
    assert "hint:" in result.stderr and "ascend-check -i INVENTORY --launch-spec FILE" in result.stderr
    assert not out.exists()


@pytest.mark.usefixtures("no_ssh")
def test_a_spec_from_the_future_is_refused(tmp_path, snapshot):
    spec = spec_of(printed(snapshot)).model_copy(update={"created_at": datetime(2030, 1, 1, tzinfo=UTC)})
    result = train("--launch-spec", str(write(tmp_path, spec)), "-o", str(tmp_path / "r"))
    assert result.exit_code == 1
    assert "error: the launch spec says it was made at 2030-01-01T00:00:00+00:00" in result.stderr
    assert "hint: check the clocks" in result.stderr and not (tmp_path / "r").exists()
    # two clocks a little apart are not refused
    spec.created_at = datetime.now(UTC) + timedelta(seconds=30)
    assert spec.usable()


@pytest.mark.usefixtures("no_ssh")
def test_a_spec_edited_by_hand_is_refused(tmp_path, snapshot):
    report = printed(snapshot, "--select", "pcie.*")
    data = json.loads(spec_of(report).model_dump_json())
    data["hosts"]["node01"]["judged_checks"] = sorted(all_checks())  # claim it judged everything
    result = train("--launch-spec", str(write(tmp_path, data)), "-o", str(tmp_path / "r"))
    assert result.exit_code == 1
    assert "was changed after ascend-check wrote it (its content digest does not match)" in result.stderr
    assert "hint: make it again" in result.stderr
    del data["digest"]
    with pytest.raises(LaunchSpecRefused, match=r"\(no digest\)"):
        load_launch_spec(write(tmp_path, data))


def test_a_schema_1_spec_still_reads_but_proves_no_coverage(tmp_path):
    v1 = {"schema_version": 1, "created_at": datetime.now(UTC).isoformat(), "master_addr": MASTER,
          "hosts": {"node01": {"address": MASTER, "verdict": "pass", "devices": [0]}}}
    spec = load_launch_spec(write(tmp_path, v1))
    assert spec.schema_version == 1 and list(spec.usable()) == ["node01"]
    with pytest.raises(LaunchSpecRefused, match=r"schema 1.*not judged on node01: fleet\.hardware"):
        spec.require_covered()
    assert spec.require_covered(TRAINING_CHECKS) == sorted(TRAINING_CHECKS)  # all waived: accepted


def test_a_narrowed_preflight_report_is_refused_by_the_gate(snapshot):
    from ascend_ready.training import preflight

    lines: list[str] = []
    with pytest.raises(LaunchSpecRefused, match=r"the preflight did not judge .*--select 'os\.\*'"):
        preflight.require_covered(printed(snapshot, "--select", "os.*"), (), lines.append)
    preflight.require_covered(printed(snapshot), ("npu.count",), lines.append)
    assert lines == ["preflight: WAIVED npu.count (--waive): training starts without it judged"]


def test_waive_names_a_check_and_needs_a_launch_spec(snapshot):
    result = CliRunner().invoke(check_main, ["--snapshot", str(snapshot), "--waive", "npu.count"])
    assert result.exit_code == 2 and "no --launch-spec FILE was asked for" in result.stderr
    result = CliRunner().invoke(check_main, ["--hosts", "n1", "--waive", "npu.cout", "--launch-spec", "x"])
    assert result.exit_code == 2 and "--waive 'npu.cout' is no check id" in result.stderr
    assert "did you mean npu.count" in result.stderr
