"""The job's output directory on a node, as the job's user sees it: can it be written, does it already
hold a run, and how much room its file system has (parsed by checks/parsers/output_dir.py).

The directory is the profile's `checkpoint_dir` (where checkpoints are written); the launcher's pre-start
probe (training/node_probe.py) reads it with a profile whose `checkpoint_dir` is the job's
--node-output-dir and whose `min_disk_free_gb` is the job's bound, through the same `Host` the preflight
judges with:

    host = Host(snapshot, profile)          # the snapshot holds the `output-dir` probe's result
    host.output_dir.state                   # OutputDirState (ParseError/ProbeFailed when unreadable)
    host.output_dir.problems(resume=False)  # ["cannot write ... as ascend: Permission denied", ...]

The probe writes nothing that stays: it creates one empty directory in the nearest existing ancestor as
the job's user and removes it at once (the only sure test of "may write": mode bits, ACLs, read-only
mounts and root squash all answer it).
"""

from __future__ import annotations

import shlex
from functools import cached_property

from ascend_ready.checks.parsers.output_dir import OutputDirState, parse_output_dir
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import Resource, profile_probe

__all__ = ["OUTPUT_DIR", "RUN_FILES", "OutputDir", "output_dir_script"]

#: what a directory that holds a run has (training/cli.py and the trainers write them)
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints", "final")
_TRY = ".ascend-ready-write-test.XXXXXX"


def output_dir_script(path: str) -> str:
    """The probe's shell: the nearest existing directory, a create-and-remove try in it, the run files
    `path` holds, then `df -Pk` of it. POSIX sh and coreutils only."""
    q = shlex.quote(path)
    runs = " ".join(RUN_FILES)
    return (
        f"d={q}; b=$d; "
        'while [ ! -e "$b" ]; do n=$(dirname "$b"); [ "$n" = "$b" ] && break; b=$n; done; '
        'echo "user $(id -un)"; echo "path $d"; echo "base $b"; '
        'if [ ! -d "$b" ]; then echo "writable no not a directory"; '
        f'elif t=$(mktemp -d "$b/{_TRY}" 2>&1); then rmdir "$t"; echo "writable yes"; '
        "else echo \"writable no ${t##*: }\"; fi; "
        f'for f in {runs}; do [ -e "$d/$f" ] && echo "run $f"; done; '
        'echo "df:"; df -Pk "$b" 2>&1; exit 0'
    )


@profile_probe("output-dir")
def OUTPUT_DIR(profile: HardwareProfile) -> dict:
    return {"shell": output_dir_script(profile.checkpoint_dir), "as_user": True,
            "description": "the job's output directory as the training user sees it"}


class OutputDir(Resource):
    """The profile's checkpoint directory (the job's output directory) as the training user sees it."""

    probes = (OUTPUT_DIR,)

    @cached_property
    def state(self) -> OutputDirState:
        return parse_output_dir(self.host.stdout("output-dir"))

    def problems(self, *, resume: bool, min_free_gb: float | None = None) -> list[str]:
        """Why the job may not write its run here: not writable by the job's user, a run already there
        (without --resume), less free space than `min_free_gb` (default: the profile's
        min_disk_free_gb). [] when it may."""
        s = self.state
        want = self.host.profile.min_disk_free_gb if min_free_gb is None else min_free_gb
        out = []
        if not s.writable:
            where = s.path if s.base == s.path else f"{s.base} (to create {s.path})"
            out.append(f"{where} is not writable by user {s.user}: {s.why_not or 'the try failed'}")
        if s.run_files and not resume:
            out.append(f"{s.path} already holds a run ({', '.join(s.run_files)})")
        if s.disk is None:
            out.append(f"the free space of {s.base} could not be read (df)")
        elif s.disk.avail_kb / 2**20 < want:  # GB as os.disk_free counts them (KiB / 2**20)
            out.append(f"{s.base} ({s.disk.mount}) has {s.disk.avail_kb / 2**20:.1f} GB free, the job's "
                       f"bound is {want:g} GB")
        return out
