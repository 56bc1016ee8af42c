"""The textfile a node's run leaves when it could not judge: the run failed (a configuration error, an
exception), passed its deadline, or was killed (the node_health unit's ExecStopPost writes it then, from
systemd's $SERVICE_RESULT). It replaces the last verdict at once, so an all-pass from before never stands
for a node that is no longer judged: no check status, the host not probed (ascend_check_host_reachable 0,
which AscendCheckNodeNotProbed alerts on), the time of this run, and why (ascend_check_run_failed).
"""

from __future__ import annotations

import time

__all__ = ["render_unjudged"]


def _label(value: str) -> str:
    """A Prometheus label value: backslash, quote and newline escaped (text exposition format)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_unjudged(host: str, reason: str, *, now: float | None = None) -> str:
    """node_exporter textfile text for a run of `host` that judged nothing, saying `reason`."""
    now = time.time() if now is None else now
    reason = " ".join(reason.split())[:200] or "unknown"
    return "\n".join([
        "# HELP ascend_check_host_reachable 1 when the host answered over SSH.",
        "# TYPE ascend_check_host_reachable gauge",
        f'ascend_check_host_reachable{{host="{_label(host)}"}} 0',
        "# HELP ascend_check_run_failed 1 when the last run could not judge the node, with why.",
        "# TYPE ascend_check_run_failed gauge",
        f'ascend_check_run_failed{{host="{_label(host)}",reason="{_label(reason)}"}} 1',
        "# HELP ascend_check_last_run_timestamp_seconds When the report was made.",
        "# TYPE ascend_check_last_run_timestamp_seconds gauge",
        f"ascend_check_last_run_timestamp_seconds {now:.0f}",
    ]) + "\n"
