"""Parser of the output-dir probe (checks/resources/output_dir.py): whether a job's output directory on a
node can be written by the job's user, what of a run it already holds, and the free space of the file
system it will be on.

The probe prints one known shape (`user`, `path`, `base`, `writable`, `run` lines, then `df:` and the
`df -Pk` of the nearest existing directory); any other line is a ParseError naming it, never skipped.
"""

from __future__ import annotations

from ascend_ready.checks.parsers.base import ParsedModel, fail, numbered_lines
from ascend_ready.checks.parsers.os_commands import DiskUsage, parse_df

__all__ = ["KIND", "OutputDirState", "parse_output_dir"]

KIND = "output-dir"


class OutputDirState(ParsedModel):
    """One node's view of a job's output directory, as the job's user sees it."""

    user: str
    """who the probe ran as (the job's user)"""
    path: str
    """the output directory"""
    base: str
    """the nearest directory that exists: `path` itself, or the ancestor `mkdir -p` would start from"""
    writable: bool
    """whether `user` could create (and remove) a directory in `base`"""
    why_not: str = ""
    """what the failed try said (`Permission denied`, `Read-only file system`), when not writable"""
    run_files: tuple[str, ...] = ()
    """what of a run `path` already holds (config.yaml, metrics.jsonl, checkpoints, final)"""
    disk: DiskUsage | None = None
    """`df -Pk base`; None when df could not read it"""


def parse_output_dir(text: str) -> OutputDirState:
    """Parse the output-dir probe's output; ParseError naming the first line outside its shape."""
    lines = [ln for ln in numbered_lines(text) if ln.strip()]
    if not lines:
        raise fail(KIND, "empty output",
                   hint="the probe printed nothing: check that /bin/sh runs on the node")
    fields: dict[str, str] = {}
    runs: list[str] = []
    df_at = None
    for i, line in enumerate(lines):
        if "\x00" in line:
            raise fail(KIND, "binary data (NUL byte) in input", line)
        if line.strip() == "df:":
            df_at = i
            break
        key, _, value = line.partition(" ")
        if key == "run":
            runs.append(value.strip())
        elif key in ("user", "path", "base", "writable") and key not in fields:
            fields[key] = value.strip()
        else:
            raise fail(KIND, "expected `user|path|base|writable|run VALUE` or `df:`", line)
    for key in ("user", "path", "base", "writable"):
        if not fields.get(key):
            raise fail(KIND, f"no `{key}` line", lines[-1])
    verdict, _, why = fields["writable"].partition(" ")
    if verdict not in ("yes", "no"):
        where = next(ln for ln in lines if ln.startswith("writable"))
        raise fail(KIND, "`writable` is neither yes nor no", where)
    disk = None
    if df_at is not None and len(lines) > df_at + 1:
        df_text = "\n".join(str(ln) for ln in lines[df_at + 1:])
        if not df_text.startswith("df: "):  # df's own error (`df: /x: No such file or directory`)
            disk = parse_df(df_text)
    return OutputDirState(user=fields["user"], path=fields["path"], base=fields["base"],
                          writable=verdict == "yes", why_not=why.strip(), run_files=tuple(runs), disk=disk)
