"""`chronyc tracking` of a simulated node: the node runs no time daemon (its clock is the host's), so the
output says what a chronyd synchronised to the site's NTP server would, or what an unsynchronised one says.

Format: chronyc's `tracking` report (chrony 4.x, `doc/chronyc.adoc`, "tracking" section: labels padded to 15
columns, then " : "); the unsynchronised form (reference ID 00000000, stratum 0, epoch reference time,
"Not synchronised") is chronyd's report before it has selected a source. Stdlib only.
"""

from __future__ import annotations

import time

#: the NTP server the site's nodes follow; chronyc prints the name when it resolves, the address with -n
NTP_SERVER = ("10.0.0.1", "ntp.cluster.local")
UPDATE_INTERVAL_S = 64
USAGE = "Unrecognized command\n"


def _ref_id(ip: str) -> str:
    return "".join(f"{int(octet):02X}" for octet in ip.split("."))


def poll_period(uptime_s: float) -> int:
    """Which of chronyd's polls (one per UPDATE_INTERVAL_S since boot) the report belongs to: the report
    changes only when chronyd polls, so the node's tool wrapper caches it per period."""
    return int(uptime_s) // UPDATE_INTERVAL_S


def _system_time(offset_s: float) -> str:
    """chronyc's System time value: the offset (+: the system clock is fast) as it prints it."""
    return f"{abs(offset_s):.9f} seconds {'fast' if offset_s > 0 else 'slow'} of NTP time"


def tracking(synced: bool, *, numeric: bool = False, now: float | None = None,
             uptime_s: float | None = None, offset_s: float = 0.0) -> str:
    """The `chronyc tracking` report; `now` (epoch seconds) and `uptime_s` place the reference time at the
    last poll, which chronyd makes every UPDATE_INTERVAL_S seconds since boot. `offset_s` (the clock-offset
    fault): a clock chronyd is still slewing back, synchronised all the same, as chronyd reports it then
    (its System time and Last offset say how far; Leap status stays Normal)."""
    if synced:
        now = time.time() if now is None else now
        since_poll = now % UPDATE_INTERVAL_S if uptime_s is None else int(uptime_s) % UPDATE_INTERVAL_S
        ip, name = NTP_SERVER
        ref = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(now - since_poll))
        fields = [("Reference ID", f"{_ref_id(ip)} ({ip if numeric else name})"), ("Stratum", "3"),
                  ("Ref time (UTC)", ref),
                  ("System time",
                   _system_time(offset_s) if offset_s else "0.000004213 seconds slow of NTP time"),
                  ("Last offset", f"{offset_s:+.9f} seconds" if offset_s else "-0.000002817 seconds"),
                  ("RMS offset", "0.000011342 seconds"),
                  ("Frequency", "12.418 ppm slow"), ("Residual freq", "-0.001 ppm"), ("Skew", "0.042 ppm"),
                  ("Root delay", "0.000412338 seconds"), ("Root dispersion", "0.000186271 seconds"),
                  ("Update interval", f"{UPDATE_INTERVAL_S}.4 seconds"), ("Leap status", "Normal")]
    else:
        fields = [("Reference ID", "00000000 ()"), ("Stratum", "0"),
                  ("Ref time (UTC)", "Thu Jan 01 00:00:00 1970"),
                  ("System time", "0.000000000 seconds fast of NTP time"),
                  ("Last offset", "+0.000000000 seconds"), ("RMS offset", "0.000000000 seconds"),
                  ("Frequency", "0.000 ppm slow"), ("Residual freq", "+0.000 ppm"), ("Skew", "0.000 ppm"),
                  ("Root delay", "1.000000000 seconds"), ("Root dispersion", "1.000000000 seconds"),
                  ("Update interval", "0.0 seconds"), ("Leap status", "Not synchronised")]
    return "".join(f"{label:<15} : {value}\n" for label, value in fields)


def run(synced: bool, args: list[str], *, uptime_s: float | None = None,
        offset_s: float = 0.0) -> tuple[str, int]:
    """(output, exit status) of `chronyc [-n] tracking`; other commands are refused as chronyc does."""
    numeric = False
    rest = list(args)
    while rest and rest[0].startswith("-"):
        if rest[0] != "-n":
            return f"chronyc: option {rest[0]} is not simulated\n", 1
        numeric = True
        rest.pop(0)
    if rest != ["tracking"]:
        return USAGE, 1
    return tracking(synced, numeric=numeric, uptime_s=uptime_s, offset_s=offset_s), 0
