"""`ascend-matrix` on bad input: a binary, garbled or missing matrix file, an unreadable host_vars file and
an unwritable -o are refused with `error:` and `hint:` lines, exit 2, no traceback, nothing on stdout and
nothing written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ascend_ready.provision.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def refused(result, *texts: str) -> str:
    err = result.stderr
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), result.output
    assert err.startswith("error: ") and "\nhint: " in err, err
    for text in texts:
        assert text in err, (text, err)
    assert result.stdout == ""
    return err


@pytest.mark.parametrize("command", [["show"], ["resolve", "--cann", "8.0.0"], ["judge", "--cann", "8.0.0"],
                                     ["packages", "cann-8.0.0-torch-2.1.0"]])
def test_a_binary_matrix_file(tmp_path, command):
    matrix = tmp_path / "matrix.yml"
    matrix.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03")  # a gzip header: matrix.yml.gz renamed
    err = refused(run("--matrix", str(matrix), *command),
                  f"matrix file {matrix} is not text (byte 1 is not UTF-8)",
                  "hint: pass a YAML matrix file with --matrix")
    assert len(err.splitlines()) == 2


def test_a_garbled_or_missing_matrix_file(tmp_path):
    garbled = tmp_path / "matrix.yml"
    garbled.write_text("cann: [8.0.0,\n")
    refused(run("--matrix", str(garbled), "show"), f"{garbled}: not valid YAML")
    refused(run("--matrix", str(tmp_path / "missing.yml"), "show"),
            f"cannot read matrix file {tmp_path / 'missing.yml'}: No such file or directory")


def test_hccn_devices_to_an_unwritable_dir_writes_nothing(tmp_path):
    (tmp_path / "file").write_text("")
    refused(run("hccn-devices", "--nodes", "node[01:02]", "--device-net", "192.168.{dev}.0/24",
                "-o", str(tmp_path / "file" / "host_vars")),
            f"-o {tmp_path / 'file' / 'host_vars'}: {tmp_path / 'file'} is not a directory")
    assert (tmp_path / "file").read_text() == ""


def test_hccn_devices_over_a_binary_host_vars_file_writes_nothing(tmp_path):
    host_vars = tmp_path / "host_vars"
    host_vars.mkdir()
    (host_vars / "node02.yml").write_bytes(b"\xff\xfe")
    refused(run("hccn-devices", "--nodes", "node[01:02]", "--device-net", "192.168.{dev}.0/24",
                "-o", str(host_vars)),
            f"cannot read {host_vars / 'node02.yml'}", "hint: fix or remove the file")
    assert sorted(p.name for p in host_vars.iterdir()) == ["node02.yml"]
