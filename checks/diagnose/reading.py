"""Reading logs: which files a path names, compressed and binary files, and a line's bytes as text."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ascend_ready.errors import ConfigError

__all__ = ["LOG_SUFFIXES", "MAX_TEXT", "NotALogError", "iter_log_files"]

#: An evidence line longer than this is shown around its match.
MAX_TEXT = 2000

#: The first bytes of a file that decide whether it is a log: a NUL byte there means binary (as git and
#: grep decide), as do the magic numbers of compressed files, which get their own hint.
SNIFF_BYTES = 8192
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd",
               b"PK\x03\x04": "zip"}
#: The compressed forms the standard library reads: a rotated log is read through them.
_READABLE = {b"\x1f\x8b": lambda fh: gzip.GzipFile(fileobj=fh), b"BZh": bz2.BZ2File,
             b"\xfd7zXZ": lzma.LZMAFile}

#: Files a directory walk reads: logs and captured outputs. Named files are always read.
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
_LOG_NAME_RE = re.compile(r"^(?:plog|device|dmesg|stdout|stderr)")
#: CANN's own logs: plog-<pid>_<time>.log, device-<pid>_<time>.log, and the launcher's <host>-plogs.log.
_PLOG_FILE_RE = re.compile(
    r"(?:^|[/\\])(?:plog|device)-[^/\\]*\.log(?:\.\d+)?(?:\.(?:gz|bz2|xz))?$|-plogs\.log$"
)
#: Rotated and compressed logs a walk also reads: train.log.1, plog-1.log.gz, stdout.log.2.xz.
_ROTATED_RE = re.compile(r"\.(?:log|txt|out|err)(?:\.\d+)?(?:\.(?:gz|bz2|xz|zst))?$")


def _decode(raw: bytes) -> str:
    """A line as text: UTF-8 when it is valid UTF-8, else GB18030 (CANN's plogs and messages on a Chinese
    locale are GBK, a subset), else UTF-8 with the bad bytes replaced."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gb18030")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


class NotALogError(ConfigError):
    """The input is binary or compressed: refused when named, skipped when a directory walk found it."""


def _refuse_binary(head: bytes, name: str) -> None:
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            raise NotALogError(
                f"{name}: a {kind}-compressed file, not a log",
                hint=f"decompress it first, e.g. {'zcat' if kind == 'gzip' else kind + ' -dc'} {name} | "
                "ascend-check diagnose -",
            )
    if b"\x00" in head[:SNIFF_BYTES]:
        raise NotALogError(
            f"{name}: binary file (NUL bytes in its first {SNIFF_BYTES} bytes), not a log",
            hint="give the job's text logs, CANN plogs (~/ascend/log) or saved dmesg output; "
            "a core dump or model file has nothing diagnose can read",
        )



# ---------------------------------------------------------------- paths


def _walk(paths: Iterable[str | Path]) -> Iterator[tuple[Path | None, str, bool]]:
    """(path, display name, named) of every file to read: named files as given, directories walked for
    logs. `-` is standard input (path None)."""
    for raw in paths:
        if str(raw) == "-":
            yield None, "<stdin>", True
            continue
        path = Path(raw).expanduser()
        if path.is_dir():
            found = False
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for fname in sorted(files):
                    if fname.endswith(LOG_SUFFIXES) or _LOG_NAME_RE.match(fname) or _ROTATED_RE.search(fname):
                        found = True
                        full = Path(root, fname)
                        yield full, str(full), False
            if not found:
                raise ConfigError(
                    f"no log files under {raw}",
                    hint=f"a directory is searched for *{', *'.join(LOG_SUFFIXES)}, plog-* and dmesg* "
                    "files; name any other file to read it",
                )
        elif path.exists():
            yield path, str(raw), True
        else:
            raise ConfigError(
                f"{raw}: no such file or directory",
                hint="give training or inference logs, plog directories (~/ascend/log) or saved dmesg output",
            )


def is_plog(name: str) -> bool:
    """Whether a file is one of CANN's plogs (or the launcher's copy of a node's plogs), by its name."""
    return _PLOG_FILE_RE.search(name) is not None


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path | None, str]]:
    """(path, display name) of every file to read: named files as given, directories walked for logs.
    `-` is standard input (path None)."""
    for path, name, _named in _walk(paths):
        yield path, name


def _node_of(path: Path, hosts: Sequence[str]) -> str | None:
    """The launcher writes each node's output to <log dir>/<host>.log and its plogs to <host>-plogs.log."""
    for host in hosts:
        if path.name in (f"{host}.log", f"{host}-plogs.log"):
            return host
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
