"""`ascend-check` with CliRunner: every exit code (0, 1, 2, 3), the report formats, collect/snapshot,
list, schema and parse."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.snapshot import HostSnapshot, Snapshot, load_snapshot, save_snapshot


@pytest.fixture
def runner():
    return CliRunner()


def snapshot_dir(tmp_path, *hosts, name="snap"):
    path = tmp_path / name
    save_snapshot(Snapshot(hosts={h.name: h for h in hosts}), path)
    return str(path)


def test_exit_0_on_a_healthy_snapshot(runner, tmp_path):
    snap = snapshot_dir(tmp_path, fake_host("node01"), fake_host("node02", index=1))
    result = runner.invoke(main, ["--snapshot", snap])
    assert result.exit_code == 0, result.output
    from ascend_ready.checks.registry import select_checks

    assert f"2 host(s), 0 unreachable; {2 * len(select_checks('quick'))} pass in" in result.stdout


def test_exit_0_with_warnings(runner, tmp_path):
    snap = snapshot_dir(tmp_path, fake_host(faults=[("chip-health", {"npu": 2, "level": "Warning"})]))
    result = runner.invoke(main, ["--snapshot", snap, "--select", "npu.*"])
    assert result.exit_code == 0
    assert "npu.health" in result.stdout and "warn" in result.stdout


def test_exit_1_when_a_check_fails(runner, tmp_path):
    snap = snapshot_dir(tmp_path, fake_host(faults=[("pcie-width", {"npu": 2, "width": 8})]))
    result = runner.invoke(main, ["--snapshot", snap])
    assert result.exit_code == 1
    assert "0000:c2:00.0 (NPU 2) trains at x8, should be x16" in result.stdout
    assert "1 fail" in result.stdout


def test_exit_1_when_a_check_cannot_be_judged(runner, tmp_path):
    host = fake_host(outputs={"npu-smi-info": "not a table\n"})
    result = runner.invoke(main, ["--snapshot", snapshot_dir(tmp_path, host), "--select", "npu.count"])
    assert result.exit_code == 1 and "error" in result.stdout


def test_exit_2_on_usage_and_config_errors(runner, tmp_path):
    cases = [
        (["--tier", "fast"], "invalid value for '--tier'"),
        (["--profile", "atlas-9000"], "error: no hardware profile 'atlas-9000'"),
        (["--snapshot", str(tmp_path)], "is not a snapshot: no manifest.json"),
        (["--select", "nothing.*", "--snapshot", str(tmp_path)], "no check matches --select/--skip"),
        (["-i", str(tmp_path / "missing.ini")], "cannot read inventory"),
        (["--hosts", "a", "-i", str(tmp_path / "x")], "give --hosts or -i INVENTORY, not both"),
    ]
    for args, text in cases:
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert text in result.output, (args, result.output)
        assert "Traceback" not in result.output
    bad_profile = tmp_path / "p.yml"
    bad_profile.write_text("product: X\nnpu_count: eight\nfans: 3\n")
    result = runner.invoke(
        main, ["--profile", str(bad_profile), "--snapshot", snapshot_dir(tmp_path, fake_host())]
    )
    assert result.exit_code == 2
    assert (
        "npu_count: Input should be a valid integer" in result.output
        and "fans: Extra inputs" in result.output
    )
    assert "hint: see `ascend-check schema profile`" in result.output or "hint:" in result.output


def test_exit_3_when_a_host_is_unreachable_and_none_failed(runner, tmp_path):
    result = runner.invoke(main, ["--hosts", "127.0.0.1:1", "--connect-timeout", "2", "--select", "os.thp"])
    assert result.exit_code == 3, result.output
    assert "unreachable" in result.stdout and "127.0.0.1:1" in result.stdout
    # in a snapshot: one reachable healthy host, one unreachable -> 3; with a failure as well -> 1
    gone = HostSnapshot(name="node09", reachable=False, error="root@10.0.0.9:22: timed out")
    assert (
        runner.invoke(main, ["--snapshot", snapshot_dir(tmp_path, fake_host(), gone, name="a")]).exit_code
        == 3
    )
    broken = fake_host("node02", faults=[("link-down", {"device": 0})])
    assert runner.invoke(main, ["--snapshot", snapshot_dir(tmp_path, broken, gone, name="b")]).exit_code == 1


def test_json_junit_and_prometheus_reports(runner, tmp_path):
    host = fake_host(faults=[("hot-chip", {"npu": 1, "temp_c": 90})])
    junit, prom = tmp_path / "r.xml", tmp_path / "ascend.prom"
    result = runner.invoke(
        main,
        [
            "--snapshot",
            snapshot_dir(tmp_path, host),
            "--format",
            "json",
            "--junit",
            str(junit),
            "--prometheus",
            str(prom),
        ],
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["schema_version"] == 3 and report["tier"] == "quick"
    hot = next(r for r in report["results"] if r["check_id"] == "npu.temperature")
    assert hot["status"] == "fail" and hot["message"] == "NPU 1 chip 0 at 90 °C (expected 10-70 °C)"
    assert hot["remediation"]["command"] == "npu-smi info -t temp -i 1 -c 0"  # the hot chip's own
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == "node01" and suite.get("failures") == "1"
    failure = suite.find("testcase[@name='npu.temperature']/failure")
    assert failure.get("message") == "NPU 1 chip 0 at 90 °C (expected 10-70 °C)"
    text = prom.read_text()
    assert (
        'ascend_check_status{check="npu.temperature",host="node01",severity="major",status="fail"} 1.0\n'
        in text
    )
    assert (
        'ascend_check_status{check="npu.temperature",host="node01",severity="major",status="pass"} 0.0\n'
        in text
    )
    assert 'ascend_check_host_reachable{host="node01"} 1.0\n' in text
    assert "# TYPE ascend_check_status gauge" in text


def test_collect_then_judge_offline(runner, tmp_path):
    out = tmp_path / "collected"
    result = runner.invoke(main, ["collect", "-o", str(out), "--select", "os.*", "--timeout", "5"])
    assert result.exit_code == 0, result.output
    snap = load_snapshot(out)
    (host,) = snap.hosts.values()
    assert {"thp-enabled", "sysctl", "user-limits", "glibc"} <= set(host.probes)
    assert "npu-smi-info" not in host.probes  # only what the selected checks read
    assert (out / host.name / "thp-enabled.out").read_text() == host.probes["thp-enabled"].stdout
    judged = runner.invoke(main, ["--snapshot", str(out), "--select", "os.*", "--format", "json"])
    assert judged.exit_code in (0, 1)
    assert {r["check_id"] for r in json.loads(judged.stdout)["results"]} >= {"os.thp", "os.glibc"}
    again = runner.invoke(main, ["collect", "-o", str(out)])
    assert again.exit_code == 2 and "already holds a snapshot" in again.output


def test_collect_exit_3_for_unreachable(runner, tmp_path):
    result = runner.invoke(
        main, ["--hosts", "127.0.0.1:1", "--connect-timeout", "1", "collect", "-o", str(tmp_path / "s")]
    )
    assert result.exit_code == 3 and "127.0.0.1 unreachable" in result.output
    assert load_snapshot(tmp_path / "s").hosts["127.0.0.1"].reachable is False


def test_list_schema_and_parse(runner, tmp_path, sample):
    listed = json.loads(runner.invoke(main, ["list", "--format", "json"]).stdout)
    ids = {c["id"] for c in listed}
    assert {"npu.health", "pcie.link_width", "hccl.tls", "os.thp", "versions.stack"} <= ids
    width = next(c for c in listed if c["id"] == "pcie.link_width")
    assert width["remediation"]["disruptive"] is True and "sysfs-pci-link" in width["probes"]
    assert "hccl.gateway_ping" not in {
        c["id"]
        for c in json.loads(runner.invoke(main, ["list", "--tier", "quick", "--format", "json"]).stdout)
    }
    schema = json.loads(runner.invoke(main, ["schema"]).stdout)
    assert schema["properties"]["schema_version"]["default"] == 3 and "CheckResult" in schema["$defs"]
    profile_schema = json.loads(runner.invoke(main, ["schema", "profile"]).stdout)
    assert profile_schema["additionalProperties"] is False and "npu_count" in profile_schema["properties"]
    path = tmp_path / "net.txt"
    path.write_text(sample("hccn_tool-net_health-g_socket-failed_mindcluster-faultdiag.txt"))
    parsed = runner.invoke(main, ["parse", "hccn-net-health", str(path)])
    assert parsed.exit_code == 0 and json.loads(parsed.stdout)["status"] == "Socket failed"


def test_inventory_profile_per_host_and_limit(runner, tmp_path):
    # A mixed snapshot: each host judged against the profile its inventory vars name.
    a3 = fake_host("a3node", hardware="atlas-800t-a3")
    a3.vars = {"ascend_check_profile": "atlas-800t-a3"}  # as `ascend-sim inventory` writes it
    duo = fake_host("duonode", hardware="atlas-300i-duo", index=1)
    duo.vars = {"ascend_check_profile": "atlas-300i-duo"}
    duo.groups = ["inference"]
    snap = snapshot_dir(tmp_path, a3, duo)
    result = runner.invoke(main, ["--snapshot", snap, "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["profile"] == "Atlas 300I Duo, Atlas 800T A3"
    limited = json.loads(
        runner.invoke(main, ["--snapshot", snap, "--limit", "inference", "--format", "json"]).stdout
    )
    assert {r["host"] for r in limited["results"]} == {"duonode"}
    # Judged against the A2 profile instead (no inventory choice, --profile), the A3 host fails its count.
    a3.vars = {}
    unnamed = snapshot_dir(tmp_path, a3, name="unnamed")
    forced = json.loads(
        runner.invoke(
            main,
            [
                "--snapshot",
                unnamed,
                "--profile",
                "atlas-800t-a2",
                "--limit",
                "a3node",
                "--select",
                "npu.count",
                "--format",
                "json",
            ],
        ).stdout
    )
    assert forced["results"][0]["status"] == "fail"


@pytest.mark.parametrize("what", ["report", "profile", "snapshot"])
def test_published_schemas_match_the_models(runner, what):
    from ascend_ready.checks.report import SCHEMA_DIR, json_schema

    published = json.loads((SCHEMA_DIR / f"{what}.schema.json").read_text())
    assert published == json_schema(what), (
        f"regenerate: ascend-check schema {what} > {SCHEMA_DIR}/{what}.schema.json"
    )
    assert json.loads(runner.invoke(main, ["schema", what]).stdout) == published


def test_the_published_launch_spec_schema_matches_the_model(runner):
    from ascend_ready.checks.cluster.launchspec import LaunchSpec
    from ascend_ready.checks.report import SCHEMA_DIR

    published = json.loads((SCHEMA_DIR / "launch-spec.schema.json").read_text())
    assert published == LaunchSpec.model_json_schema(), (
        f"regenerate: ascend-check schema launch-spec > {SCHEMA_DIR}/launch-spec.schema.json")
    assert json.loads(runner.invoke(main, ["schema", "launch-spec"]).stdout) == published


def test_launch_spec_needs_a_live_run_and_a_writable_path(runner, tmp_path):
    missing_dir = tmp_path / "no" / "dir" / "s.json"
    bad = runner.invoke(main, ["--hosts", "localhost", "--launch-spec", str(missing_dir)])
    assert bad.exit_code == 2 and "--launch-spec" in bad.output


def test_bundled_profiles_are_valid():
    from ascend_ready.checks.profile import bundled_profiles, load_profile

    assert bundled_profiles() == ["atlas-300i-duo", "atlas-800t-a2", "atlas-800t-a3"]
    a3 = load_profile("atlas-800t-a3")
    assert (a3.npu_count, a3.chips_per_npu, a3.pci_functions_per_npu, a3.matrix_product) == (
        8,
        2,
        2,
        "910_93",
    )


def test_a_snapshot_is_judged_with_the_tier_and_profiles_it_was_collected_with(runner, tmp_path):
    """A snapshot collected with --tier full --profile atlas-800t-a3 used to be judged, without
    options, as quick tier on the default A2 profile: other verdicts than the live run."""
    from ascend_ready.checks.profile import load_profile

    a3 = fake_host("a3node", hardware="atlas-800t-a3")
    a3.profile = load_profile("atlas-800t-a3")
    path = tmp_path / "snap"
    recorded = Snapshot(tier="full", select=["npu.*", "hccl.gateway_ping"], skip=[], hosts={a3.name: a3})
    save_snapshot(recorded, path)
    judged = runner.invoke(main, ["--snapshot", str(path), "--format", "json"])
    report = json.loads(judged.stdout)
    assert report["tier"] == "full" and report["profile"] == "Atlas 800T A3"
    ids = {r["check_id"]: r for r in report["results"]}
    assert "hccl.gateway_ping" in ids and not any(i.startswith(("os.", "pcie.")) for i in ids)
    assert ids["npu.count"]["status"] == "pass", ids["npu.count"]
    assert "warning:" not in judged.stderr
    # An option typed for the judging wins, with a warning saying what the collect recorded.
    forced = runner.invoke(
        main, ["--snapshot", str(path), "--tier", "quick", "--profile", "atlas-800t-a2", "--format", "json"]
    )
    report = json.loads(forced.stdout)
    assert report["tier"] == "quick" and "hccl.gateway_ping" not in {r["check_id"] for r in report["results"]}
    assert next(r for r in report["results"] if r["check_id"] == "npu.count")["status"] == "fail"
    assert (
        "warning: judging with --tier quick, but the snapshot was collected with --tier full" in forced.stderr
    )
    assert "warning: a3node: judged with profile 'Atlas 800T A2' (recorded: 'Atlas 800T A3')" in forced.stderr


def test_collect_records_tier_selection_and_each_hosts_profile(runner, tmp_path):
    out = tmp_path / "collected"
    result = runner.invoke(
        main,
        ["collect", "-o", str(out), "--select", "os.thp", "--profile", "atlas-800t-a3", "--timeout", "5"],
    )
    assert result.exit_code == 0, result.output
    snap = load_snapshot(out)
    (host,) = snap.hosts.values()
    assert (snap.tier, snap.select, snap.skip) == ("quick", ["os.thp"], [])
    assert host.profile is not None and host.profile.product == "Atlas 800T A3"
    judged = json.loads(runner.invoke(main, ["--snapshot", str(out), "--format", "json"]).stdout)
    assert [r["check_id"] for r in judged["results"]] == ["os.thp"] and judged["profile"] == "Atlas 800T A3"


def test_a_snapshot_of_an_older_version_still_loads_and_judges(runner, tmp_path):
    """Written before not_run, profile, tier, select and skip existed: resolved from its vars."""
    host = fake_host("node01")
    path = tmp_path / "old"
    save_snapshot(Snapshot(hosts={host.name: host}), path)
    manifest = json.loads((path / "manifest.json").read_text())
    for key in ("tier", "select", "skip"):
        del manifest[key]
    del manifest["hosts"]["node01"]["profile"]
    assert all("not_run" not in meta for meta in manifest["hosts"]["node01"]["probes"].values())
    (path / "manifest.json").write_text(json.dumps(manifest))
    snap = load_snapshot(path)
    assert snap.tier is None and snap.hosts["node01"].profile is None
    result = runner.invoke(main, ["--snapshot", str(path), "--select", "npu.count", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["profile"] == "Atlas 800T A2"


def test_profiles_are_resolved_once_per_host_when_collecting(monkeypatch):
    from ascend_ready.checks import preflight as pf

    calls = []
    real = pf.training_env
    monkeypatch.setattr(pf, "training_env", lambda *a, **k: calls.append(a) or real(*a, **k))

    def fake_collect(targets, plan, options, progress=None, while_waiting=None):
        return [fake_host(t.name, index=i) for i, t in enumerate(targets) if plan(t)]

    monkeypatch.setattr(pf, "collect", fake_collect)
    from ascend_ready.fleet.transport import Target

    options = pf.PreflightOptions(select=["npu.count"])
    report = pf.preflight([Target(name="n1", address="a"), Target(name="n2", address="b")], options)
    assert [r.status for r in report.results] == ["pass", "pass"]
    assert len(calls) == 2  # once per host, at collect time; judging read the recorded profiles


def test_junit_counts_agree_with_the_testcases(runner, tmp_path):
    """The root `tests` left out the synthetic host.reachable case of an unreachable host."""
    gone = HostSnapshot(name="node09", reachable=False, error="root@10.0.0.9:22: timed out")
    broken = fake_host("node02", faults=[("link-down", {"device": 0})])
    junit = tmp_path / "r.xml"
    runner.invoke(main, ["--snapshot", snapshot_dir(tmp_path, broken, gone), "--junit", str(junit)])
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    counted = {
        "tests": len(cases),
        "failures": len(root.findall(".//testcase/failure")),
        "errors": len(root.findall(".//testcase/error")),
        "skipped": len(root.findall(".//testcase/skipped")),
    }
    assert {k: int(root.get(k)) for k in counted} == counted
    for suite in root.findall("testsuite"):
        assert int(suite.get("tests")) == len(suite.findall("testcase")), suite.get("name")
        assert int(suite.get("errors")) == len(suite.findall("testcase/error"))
        assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
    assert counted["errors"] >= 1 and root.find(".//testcase[@name='host.reachable']") is not None


def test_every_cli_goes_through_the_one_guard():
    """ascend-check (with parse and every subcommand), ascend-matrix, ascend-train, ascend-sim and
    ascend-sim packages: one guard, ascend_ready.cli_guard, turns errors into messages and exit codes."""
    import importlib

    from ascend_ready.cli_guard import GuardedCommand, GuardedGroup
    from ascend_ready.sim.packages.cli import packages_command

    for module in ("checks.cli", "provision.cli", "training.cli", "sim.cli"):
        assert isinstance(importlib.import_module(f"ascend_ready.{module}").main, GuardedGroup), module
    assert isinstance(packages_command, GuardedGroup)
    assert isinstance(main.commands["parse"], GuardedCommand)


def test_interrupt_exits_130_and_errors_never_show_a_traceback(runner, tmp_path, monkeypatch):
    from ascend_ready.checks import snapshot

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(snapshot, "load_snapshot", interrupted)
    result = runner.invoke(main, ["--snapshot", str(tmp_path)])
    assert result.exit_code == 130 and "error: interrupted" in result.stderr
    assert "Traceback" not in result.output
    # a subcommand's error and a usage error
    missing = runner.invoke(main, ["parse", "lspci"])
    assert missing.exit_code == 2 and "error: KIND and FILE are required" in missing.stderr
    usage = runner.invoke(main, ["collect"])
    assert usage.exit_code == 2 and "missing option '-o'" in usage.output


def test_this_node_is_judged_by_the_profile_provisioning_recorded(runner, tmp_path, monkeypatch):
    import yaml

    from ascend_ready.checks import profile as profiles

    def disk_free(*args: str) -> str:
        result = runner.invoke(main, [*args, "--select", "os.disk_free", "--format", "json"])
        assert result.exit_code in (0, 1), result.output
        return json.loads(result.stdout)["results"][0]["status"]

    def recorded(name: str, min_gb: float) -> str:
        data = profiles.load_profile(None).model_dump(mode="json")
        data.update(checkpoint_dir=str(tmp_path), min_disk_free_gb=min_gb)
        (tmp_path / name).write_text(yaml.safe_dump(data))
        return str(tmp_path / name)

    monkeypatch.setattr(profiles, "NODE_PROFILE", recorded("node.yml", 1e9))
    assert disk_free() == "fail"  # no disk has 1e9 GB free: the node's file set the threshold
    monkeypatch.setattr(profiles, "NODE_PROFILE", recorded("node.yml", 0))
    assert disk_free() == "pass"
    # --profile beats it
    assert disk_free("--profile", recorded("given.yml", 1e9)) == "fail"
