"""Assembles a self-extracting `.run` file: the POSIX-sh stub of run_header.sh plus a tar.gz payload.

Byte-for-byte reproducible (fixed mtimes, sorted members, gzip mtime 0) so SHA256SUMS stays stable.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from importlib import resources

#: payload path -> (content, executable)
Payload = dict[str, tuple[bytes, bool]]


def template(name: str) -> str:
    """A shell template shipped next to this module."""
    return resources.files(__package__).joinpath(name).read_text()


def _tar_gz(files: Payload) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        dirs: set[str] = set()
        for path in sorted(files):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(info)
            data, executable = files[path]
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o755 if executable else 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def make_run(label: str, entry: str, files: Payload) -> bytes:
    """The bytes of a `.run` whose stub checks the payload's SHA-256 and runs `sh ./<entry> "$@"`."""
    if entry not in files:
        raise ValueError(f"entry script {entry!r} is not in the payload")
    payload = _tar_gz(files)
    header = (template("run_header.sh")
              .replace("@LABEL@", label)
              .replace("@ENTRY@", entry)
              .replace("@SHA@", hashlib.sha256(payload).hexdigest())
              .replace("@SIZE@", str(len(payload))))
    # The stub must end in `exit` on its own line: dash stops reading there, before the binary payload.
    header = header.rstrip("\n") + "\n"
    skip = header.count("\n")
    header = header.replace("@SKIP@", str(skip))
    return header.encode() + payload
