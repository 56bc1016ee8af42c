"""The textfile a node's run leaves when it could not judge: the run failed (a configuration error, an
exception), passed its deadline, or was killed (the node_health unit's ExecStopPost writes it then, from
systemd's $SERVICE_RESULT). It replaces the last verdict at once, so an all-pass from before never stands
for a node that is no longer judged: no check status, the host not probed (ascend_check_host_reachable 0,
which AscendCheckNodeNotProbed alerts on), the time of this run, and why (ascend_check_run_failed).
"""

from __future__ import annotations

import time

from ascend_ready.checks import textfile

__all__ = ["render_unjudged"]


def render_unjudged(host: str, reason: str, *, now: float | None = None) -> str:
    """node_exporter textfile text for a run of `host` that judged nothing, saying `reason`."""
    now = time.time() if now is None else now
    reason = " ".join(reason.split())[:200] or "unknown"
    failed = textfile.gauge(
        "ascend_check_run_failed", "1 when the last run could not judge the node, with why.",
        ["host", "reason"],
    )
    failed.add_metric([host, reason], 1)
    return textfile.render([textfile.host_reachable([(host, False)]), failed, textfile.last_run(now)])
