"""The probe `ascend-check collect --plogs` adds for a support bundle: the tails of the newest CANN plogs.

`fetch_plogs` brings the same tails of a failed job's nodes into its log directory for the diagnosis.
Bounded on the node: the newest PLOG_FILES files of ~/ascend/log (or ASCEND_PROCESS_LOG_PATH) and
/root/ascend/log, PLOG_TAIL_BYTES of each, every file behind a `==> path <==` line as `tail` prints it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ascend_ready.checks.collect import collect
from ascend_ready.checks.profile import DEFAULT_PROFILE, load_profile
from ascend_ready.checks.resources.base import probe
from ascend_ready.errors import AscendReadyError
from ascend_ready.fleet.transport import FanoutOptions, Target

__all__ = ["PLOGS", "PLOG_FILES", "PLOG_TAIL_BYTES", "PROBES", "fetch_plogs"]

PLOG_FILES = 8
PLOG_TAIL_BYTES = 64 * 1024

#: In the training user's login shell: their HOME, and their ASCEND_PROCESS_LOG_PATH if the profile sets
#: one. `ls -t` orders by age across both roots; awk drops the same file listed twice (HOME=/root).
PLOGS = probe(
    "plogs",
    shell=(
        'set --; for d in "${ASCEND_PROCESS_LOG_PATH:-$HOME/ascend/log}" /root/ascend/log; do '
        'for s in debug/plog run/plog; do for f in "$d/$s"/plog-*.log; do '
        '[ -f "$f" ] && set -- "$@" "$f"; done; done; done; '
        '[ $# -gt 0 ] || { echo "no plog-*.log under ${ASCEND_PROCESS_LOG_PATH:-$HOME/ascend/log} '
        'or /root/ascend/log" >&2; exit 0; }; '
        f"ls -1t \"$@\" | awk '!seen[$0]++' | head -n {PLOG_FILES} | "
        f'while IFS= read -r f; do echo "==> $f <=="; tail -c {PLOG_TAIL_BYTES} "$f"; echo; done'
    ),
    as_user=True,
    background=True,
    timeout_s=30,
    description=f"tails of the {PLOG_FILES} newest CANN plogs (collect --plogs, for ascend-check diagnose)",
)

#: Probes no check reads; the catalogue lists them so `collect --plogs` can plan them.
PROBES = (PLOGS,)


def fetch_plogs(targets: Sequence[Target], log_dir: Path, fanout: FanoutOptions,
                log: Callable[[str], None]) -> None:
    """The tails of each node's newest CANN plogs (the `collect --plogs` probe, bounded on the node) into
    LOG_DIR/<host>-plogs.log, so the diagnosis of a failed job reads the runtime's own logs too."""
    if not targets:
        return
    plogs = PLOGS(load_profile(DEFAULT_PROFILE))
    try:
        snaps = collect(list(targets), lambda t: ([plogs], t.user or "root"), fanout)
    except AscendReadyError as exc:
        log(f"note: the nodes' plogs were not read: {exc.message}")
        return
    for snap in snaps:
        res = snap.probes.get(plogs.id)
        if res is not None and res.stdout.strip():
            (log_dir / f"{snap.name}-plogs.log").write_text(res.stdout)
