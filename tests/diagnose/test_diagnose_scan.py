"""The streaming scanner: line numbers across chunk boundaries, binary and non-UTF-8 bytes, CRLF, over-long
lines, directories and their files, bounded evidence."""

from __future__ import annotations

import io

import pytest
from sample_support import read_sample

from ascend_ready.checks.diagnose import Scanner, diagnose_paths, scan
from ascend_ready.errors import ConfigError

EI0006 = read_sample("error_hccl_EI0006-getting-socket-timeout_vllm-ascend-486.txt").splitlines()[3]
LIBHCCL = "ImportError: libhccl.so: cannot open shared object file: No such file or directory"


def _scan_bytes(data: bytes, name: str = "x.log"):
    scanner = Scanner()
    scanner.scan_stream(io.BytesIO(data), name)
    return scanner.report()


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_line_numbers_survive_chunk_boundaries(monkeypatch, chunk):
    monkeypatch.setattr(scan, "CHUNK_BYTES", chunk)
    lines = [f"step {i} loss 0.{i}" for i in range(200)]
    lines[57], lines[143] = EI0006, LIBHCCL
    report = _scan_bytes(("\n".join(lines) + "\n").encode())
    assert [(f.code, f.evidence[0].line, f.evidence[0].text) for f in report.findings] == [
        ("EI0006", 58, EI0006),
        ("libhccl.so", 144, LIBHCCL),
    ]
    assert report.lines == 200


def test_non_utf8_bytes_and_late_nul_bytes_do_not_crash():
    # a log with bytes that are not UTF-8, and NUL bytes past the first 8 KiB (a file system that lost the
    # tail of a log after a crash fills it with zeros): read, not refused
    data = (
        b"\xff\xfe garbage \x80\x81\n" + b"x" * scan.SNIFF_BYTES + b"\n" + bytes(range(256)) + b"\n"
        + b"\xc3(" + LIBHCCL.encode() + b"\n"
    )
    report = _scan_bytes(data)
    [finding] = report.findings
    assert finding.code == "libhccl.so" and finding.evidence[0].line == 5  # bytes(range(256)) holds a \n
    assert finding.evidence[0].text.startswith("\ufffd(ImportError")


@pytest.mark.parametrize(
    ("head", "says"),
    [
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary file"),  # a core dump or an executable
        (b"\x28\xb5\x2f\xfd", "zstd-compressed"),  # a zstd bundle the standard library cannot read
        (b"\x1f\x8b\x08\x00", "damaged or truncated compressed file"),  # gzip is read; this one is broken
    ],
)
def test_a_named_binary_file_is_refused_naming_it(tmp_path, head, says):
    path = tmp_path / "core.1234"
    path.write_bytes(head + LIBHCCL.encode() + b"\n")
    with pytest.raises(ConfigError, match=f"{path}: (?:a )?{says}") as err:
        diagnose_paths([path])
    assert err.value.hint


def test_a_directory_walk_skips_binary_files_and_says_so(tmp_path):
    (tmp_path / "model.log").write_bytes(b"\x00\x01" * 100)
    (tmp_path / "train.log").write_text(LIBHCCL + "\n")
    said: list[str] = []
    report = diagnose_paths([tmp_path], progress=said.append)
    assert report.files == [str(tmp_path / "train.log")] and report.skipped == [str(tmp_path / "model.log")]
    assert [f.code for f in report.findings] == ["libhccl.so"]
    assert said == [f"diagnose: skipped {tmp_path / 'model.log'}: binary file (NUL bytes in its first 8192 "
                    "bytes), not a log"]


def test_crlf_and_a_last_line_without_newline():
    report = _scan_bytes(b"ok\r\n" + LIBHCCL.encode() + b"\r\nok\r\n" + EI0006.encode())
    assert [(f.code, f.evidence[0].line) for f in report.findings] == [("libhccl.so", 2), ("EI0006", 4)]
    assert not report.findings[0].evidence[0].text.endswith("\r")
    assert report.lines == 4


def test_an_over_long_line_is_cut_not_held(monkeypatch):
    monkeypatch.setattr(scan, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(scan, "MAX_LINE_BYTES", 4096)
    data = b"x" * 100_000 + LIBHCCL.encode() + b"y" * 100_000 + b"\n" + EI0006.encode() + b"\n"
    report = _scan_bytes(data)
    assert [(f.code, f.evidence[0].line) for f in report.findings] == [("libhccl.so", 1), ("EI0006", 2)]
    shown = report.findings[0].evidence[0].text
    assert len(shown) <= scan.MAX_TEXT and LIBHCCL in shown


def test_evidence_is_bounded_but_every_match_counted():
    report = _scan_bytes(("\n".join([EI0006] * 500) + "\n").encode())
    [finding] = report.findings
    assert finding.matches == 500 and len(finding.evidence) == scan.MAX_EVIDENCE
    assert [e.line for e in finding.evidence] == list(range(1, scan.MAX_EVIDENCE + 1))


def test_directories_are_walked_for_log_files(tmp_path):
    (tmp_path / "run" / "debug" / "plog").mkdir(parents=True)
    (tmp_path / "run" / "debug" / "plog" / "plog-42_20251118093313000.log").write_text(LIBHCCL + "\n")
    (tmp_path / "run" / "model.safetensors").write_bytes(LIBHCCL.encode())  # not a log: not read
    report = diagnose_paths([tmp_path / "run"])
    assert report.files == [str(tmp_path / "run" / "debug" / "plog" / "plog-42_20251118093313000.log")]
    assert [(f.code, f.actor) for f in report.findings] == [("libhccl.so", "pid 42")]


def test_missing_and_empty_paths_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file or directory") as err:
        diagnose_paths([tmp_path / "nope.log"])
    assert err.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no log files under"):
        diagnose_paths([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="no log given"):
        diagnose_paths([])


def test_an_unreadable_file_is_a_config_error(tmp_path, monkeypatch):
    log = tmp_path / "root-only.log"
    log.write_text("x\n")
    real_open = open

    def denied(path, *args, **kwargs):
        if str(path) == str(log):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", denied)
    with pytest.raises(ConfigError, match=r"cannot read .*root-only\.log: permission denied") as err:
        diagnose_paths([log])
    assert "sudo" in err.value.hint


def test_dmesg_uncorrectable_pcie_errors_are_found_corrected_ones_not(tmp_path):
    # the example of Documentation/PCI/pcieaer-howto.rst, as `dmesg` prints it, after a corrected error
    dmesg = tmp_path / "dmesg.txt"
    dmesg.write_text(
        "[ 3571.112240] pcieport 0000:c0:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "(Receiver ID)\n"
        "[ 3575.000001] 0000:50:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), "
        "type=Transaction Layer, (Requester ID)\n"
        "[ 3575.000002] 0000:50:00.0:   device [8086:0329] error status/mask=00100000/00000000\n"
    )
    [finding] = diagnose_paths([dmesg]).findings
    assert (finding.code, finding.evidence[0].line, finding.check_ids[0]) == ("AER", 2, "pcie.aer")
