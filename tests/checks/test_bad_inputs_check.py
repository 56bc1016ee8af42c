"""`ascend-check` on bad input: each one is refused with an `error:` line and a `hint:` saying what to do,
the documented exit code (2 usage/config, 3 unreachable), no traceback, and nothing written or probed."""

from __future__ import annotations

import json

import pytest
from checks_fakenode import fake_host
from click.testing import CliRunner

from ascend_ready.checks.cli import main
from ascend_ready.checks.snapshot import Snapshot, save_snapshot

#: a port nothing listens on: the connection is refused at once
CLOSED = "127.0.0.1:1"


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    """A healthy two-host snapshot, as `ascend-check collect` writes it."""
    path = tmp_path_factory.mktemp("snap") / "snap"
    save_snapshot(Snapshot(hosts={"node01": fake_host("node01"), "node02": fake_host("node02", index=1)}),
                  path)
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def refused(result, code: int, *texts: str) -> str:
    """Asserts the guard's answer: the exit code, `error:` + `hint:`, the texts, no traceback, no report."""
    out = result.output
    assert result.exit_code == code, out
    assert "Traceback" not in out and isinstance(result.exception, SystemExit), out
    assert out.startswith("error: ") and "\nhint: " in out, out
    for text in texts:
        assert text in out, (text, out)
    assert result.stdout == "", "no report on stdout"
    return out


def reports(tmp_path) -> list[str]:
    """--junit/--prometheus/--html options whose files must not appear when the input is refused."""
    return ["--junit", str(tmp_path / "r.xml"), "--prometheus", str(tmp_path / "r.prom"),
            "--html", str(tmp_path / "r.html")]


def nothing_written(tmp_path, *also):
    for name in ("r.xml", "r.prom", "r.html", *also):
        assert not (tmp_path / name).exists(), name


def copy_snapshot(snap, tmp_path):
    import shutil

    return shutil.copytree(snap, tmp_path / "copy")


def test_a_probe_output_that_is_not_utf8(snap, tmp_path):
    bad = copy_snapshot(snap, tmp_path)
    (bad / "node01" / "npu-smi-info.out").write_bytes(b"\xff\xfe NPU table\x80\n")
    out = refused(run("--snapshot", str(bad), *reports(tmp_path)), 2,
                  f"{bad / 'node01' / 'npu-smi-info.out'} is not UTF-8 text (byte 0 is 0xff)",
                  "collect it again with `ascend-check collect -o DIR`")
    assert len(out.splitlines()) == 2
    nothing_written(tmp_path)


def test_a_manifest_that_is_not_utf8(snap, tmp_path):
    bad = copy_snapshot(snap, tmp_path)
    (bad / "manifest.json").write_bytes(b"\x89PNG\r\n\x1a\n")
    refused(run("--snapshot", str(bad), *reports(tmp_path)), 2, "manifest.json is not UTF-8 text")
    nothing_written(tmp_path)


def test_collect_to_an_unwritable_path_is_refused_before_any_host_is_probed(tmp_path):
    (tmp_path / "file").write_text("in the way\n")
    out = refused(run("collect", "-o", str(tmp_path / "file" / "snap"), "--hosts", CLOSED), 2,
                  f"-o {tmp_path / 'file' / 'snap'}: {tmp_path / 'file'} is not a directory")
    assert "unreachable" not in out  # nothing was probed
    assert (tmp_path / "file").read_text() == "in the way\n"


def test_an_unwritable_report_file_is_refused_before_probing(tmp_path):
    (tmp_path / "file").write_text("")
    out = refused(run("--hosts", CLOSED, "--junit", str(tmp_path / "file" / "r.xml")), 2, "--junit")
    assert "unreachable" not in out


@pytest.mark.parametrize(("hosts", "text"), [
    ("root@:99999", "--hosts: no host name in 'root@:99999'"),
    ("root@node01:99999", "--hosts: port 99999 in 'root@node01:99999' is not 1-65535"),
    ("node01:0", "port 0"),
])
def test_a_bad_hosts_entry_is_a_usage_error_not_unreachable(hosts, text):
    refused(run("--hosts", hosts), 2, text)


def test_a_typo_in_select_beside_a_valid_one_is_refused_with_the_near_match(snap, tmp_path):
    result = run("--snapshot", str(snap), "--select", "npu.cuont", "--select", "npu.health",
                 *reports(tmp_path))
    refused(result, 2, "--select 'npu.cuont' is no check id", "did you mean npu.count?")
    nothing_written(tmp_path)
    # the same in collect, before any host is probed
    out = refused(run("collect", "-o", str(tmp_path / "s"), "--hosts", CLOSED, "--select", "npu.cuont",
                      "--select", "os.*"), 2, "did you mean npu.count?")
    assert "unreachable" not in out
    nothing_written(tmp_path, "s")


def test_list_with_a_select_that_matches_nothing():
    refused(run("list", "--select", "zzz"), 2, "no check matches --select/--skip",
            "`ascend-check list --tier full`")
    refused(run("list", "--skip", "*"), 2, "no check matches --select/--skip")


def test_a_full_tier_check_in_the_quick_tier_suggests_tier_full(tmp_path):
    refused(run("list", "--tier", "quick", "--select", "hccl.mesh"), 2,
            "--select 'hccl.mesh' matches only full-tier checks (hccl.mesh)", "hint: add --tier full")
    out = refused(run("--hosts", CLOSED, "--select", "hccl.mesh", *reports(tmp_path)), 2, "add --tier full")
    assert "unreachable" not in out
    nothing_written(tmp_path)
    assert run("list", "--tier", "full", "--select", "hccl.mesh").exit_code == 0


def inventory(tmp_path, profile_file: str, profile: str):
    inv = tmp_path / "inv"
    (inv / "host_vars").mkdir(parents=True)
    (inv / "group_vars").mkdir()
    (inv / "hosts.ini").write_text("[npu]\nnode01 ansible_host=127.0.0.1 ansible_port=1\n"
                                   "node02 ansible_host=127.0.0.1 ansible_port=1\n")
    (inv / profile_file).write_text(f"ascend_check_profile: {profile}\n")
    return inv


def test_a_bad_profile_in_host_vars_names_the_host_and_the_file(tmp_path):
    inv = inventory(tmp_path, "host_vars/node02.yml", "atlas-9000")
    origin = inv / "host_vars" / "node02.yml"
    out = refused(run("-i", str(inv / "hosts.ini"), *reports(tmp_path)), 2,
                  f"inventory host node02: ascend_check_profile 'atlas-9000' (set in {origin})"
                  ": no hardware profile 'atlas-9000'",
                  f"hint: fix ascend_check_profile in {origin}; give a profile file, or one of")
    assert "unreachable" not in out
    nothing_written(tmp_path)


def test_an_invalid_profile_file_in_group_vars_names_the_host_and_the_file(tmp_path):
    (tmp_path / "p.yml").write_text("product: X\nnpu_count: eight\n")
    inv = inventory(tmp_path, "group_vars/npu.yml", str(tmp_path / "p.yml"))
    refused(run("-i", str(inv / "hosts.ini")), 2, "inventory host node01:",
            f"(set in {inv / 'group_vars' / 'npu.yml'})", "npu_count: Input should be a valid integer")


@pytest.mark.parametrize("content", [None, b"\xff\xfe[npu]\n"])
def test_an_unreadable_inventory(tmp_path, content):
    path = tmp_path / "hosts.ini"
    if content is not None:
        path.write_bytes(content)
    refused(run("-i", str(path), *reports(tmp_path)), 2, str(path), "hint: give -i an Ansible inventory")
    nothing_written(tmp_path)


def test_unreachable_hosts_exit_3_naming_the_host_and_why():
    result = run("--hosts", CLOSED, "--connect-timeout", "2", "--select", "os.thp", "--format", "json")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    gone = {h["name"]: h["error"] for h in json.loads(result.stdout)["hosts"] if not h["reachable"]}
    assert "127.0.0.1" in gone and "Unable to connect to port 1 on 127.0.0.1" in gone["127.0.0.1"]


def test_a_passing_run_shows_a_host_by_check_group_grid(snap):
    result = run("--snapshot", str(snap))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(ln for ln in lines if "host" in ln)
    assert [w for w in header.replace("┃", " ").split()] == ["host", "fleet", "hccl", "npu", "os", "pcie",
                                                               "versions"]
    rows = {ln.split()[1]: ln for ln in lines if ln.startswith("│ node")}
    assert set(rows) == {"node01", "node02"} and all("pass" in row for row in rows.values())
    assert lines[-1].startswith("2 host(s), 0 unreachable;")
    # -v lists every check instead
    assert "npu.health" in run("--snapshot", str(snap), "-v").stdout
