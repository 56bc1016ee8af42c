"""Output paths checked before any work: a CLI refuses a directory it could not create or write before
it probes a host, runs a preflight or writes a byte (ascend-check collect -o, ascend-train -o)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ascend_ready.errors import ConfigError

__all__ = ["check_input_path", "check_output_dir", "check_output_file"]


def check_output_dir(path: str | os.PathLike, option: str) -> None:
    """ConfigError unless `path` is a writable directory or could be created as one; creates nothing."""
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{option} {path}: exists and is not a directory", hint="name a new directory")
    existing = target
    while not existing.exists():  # the nearest ancestor that exists decides whether mkdir -p can succeed
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            f"{option} {path}: {existing} is not a directory", hint="pick a path under a directory"
        )
    why = _cannot_write_in(existing)
    if why:
        raise ConfigError(
            f"{option} {path}: cannot write in {existing} ({why})", hint="pick a directory you may write"
        )


def check_output_file(path: str | os.PathLike | None, option: str) -> None:
    """ConfigError unless the file `path` could be written: not a directory, in an existing directory one
    may write in, not a read-only file. None (option not given) passes; creates nothing."""
    if not path:
        return
    target = Path(path).expanduser()
    parent = target.parent if str(target.parent) else Path(".")
    try:
        if target.is_dir():
            raise ConfigError(f"{option} {path} is a directory", hint=f"name a file in it, e.g. {path}/out")
        if not parent.is_dir():
            raise ConfigError(f"{option} {path}: directory {parent} does not exist",
                              hint=f"create it first (mkdir -p {parent}), or name a file in an existing one")
    except OSError as exc:  # a symlink loop, a name too long
        raise ConfigError(f"{option} {path}: {exc.strerror or exc}", hint="name a plain file path") from None
    why = _cannot_write_in(parent)
    if not why and target.exists() and not os.access(target, os.W_OK):
        why = "the file is read-only"
    if why:
        raise ConfigError(f"{option} {path}: not writable ({why})",
                          hint="pick a file in a directory you may write")


def _cannot_write_in(directory: Path) -> str:
    """Why a file cannot be created in `directory` ('' when it can). Tried for real, with a file removed at
    once: os.access says yes to root on /proc or a read-only mount, where the write then fails."""
    import secrets

    if not os.access(directory, os.W_OK | os.X_OK):
        return "permission denied"
    probe = directory / f".ascend-ready-write-test-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return ""


def check_input_path(path: str | os.PathLike, what: str | None, *, hint: str,
                     directory: bool | None = None) -> None:
    """ConfigError saying exactly why `path` (`what`: e.g. "the snapshot directory") cannot be read: no
    such file, a symlink loop, a part of it that is no directory, permission denied, or (`directory`
    True/False) a file where a directory is wanted, or the other way round."""
    import errno
    import stat

    where = f"{what} {path}" if what else str(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        why = {errno.ENOENT: "no such file or directory",
               errno.ELOOP: "a symlink loop (too many levels of symbolic links)",
               errno.ENOTDIR: "a part of the path is not a directory",
               errno.EACCES: "permission denied",
               errno.ENAMETOOLONG: "file name too long"}.get(exc.errno, exc.strerror or str(exc))
        raise ConfigError(f"{where}: {why}", hint=hint) from None
    if directory is True and not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{where}: not a directory", hint=hint)
    if directory is False and stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{where}: a directory, not a file", hint=hint)
