"""Burn-in (`ascend-check --tier burn-in --duration D`): the duration it runs for and how its time series
are judged (a drop over time, counters that grow, a chip that throttles or runs too hot), as pure functions.

The node side (the load and the sampling beside it) is checks/resources/burn_in.py; the checks that read
it are checks/suite/test_burn_in.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ascend_ready.errors import ConfigError

#: seconds the burn-in probe may run past its duration: the load's last round, the closing samples
MARGIN_S = 180.0

__all__ = [
    "DROP_FRACTION",
    "FLEET_FLOOR",
    "MAX_DURATION_S",
    "MIN_DURATION_S",
    "THROTTLE_TEMP_C",
    "Growth",
    "counter_growth",
    "drop_over_time",
    "parse_duration",
    "throttled_at",
]

#: the shortest burn-in worth a first and a last part, and a day as the longest
MIN_DURATION_S, MAX_DURATION_S = 5.0, 86400.0
#: a device whose load's last part runs more than this fraction below its first part fails
DROP_FRACTION = 0.10
#: the share of the window compared: its first and its last fifth (a minute each of a 5-minute burn-in)
PART = 0.2
#: until the per-SKU floors apply to the burn-in's torch figures: a device below this fraction of the
#: fleet's median fails
FLEET_FLOOR = 0.8
#: above this the chip throttles (MindCluster ToolBox user guide, toolboxug_0016: "above 90 C")
THROTTLE_TEMP_C = 90

_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """Seconds of a `--duration` such as `60s`, `10m` or `2h` (a unit is required); ConfigError otherwise."""
    m = _DURATION_RE.match(text.strip())
    if not m:
        raise ConfigError(f"--duration {text!r} is not a duration",
                          hint="give a number and a unit: 60s, 10m, 2h")
    seconds = float(m[1]) * _UNIT_S[m[2]]
    if not MIN_DURATION_S <= seconds <= MAX_DURATION_S:
        raise ConfigError(f"--duration {text!r} is {seconds:g} s: burn-in takes {MIN_DURATION_S:g} s to "
                          f"{MAX_DURATION_S / 3600:g} h", hint="e.g. --duration 10m")
    return seconds


def _parts(points: Sequence[tuple[float, float]], start: float, end: float):
    span = end - start
    first = [v for t, v in points if t <= start + PART * span]
    last = [v for t, v in points if t >= end - PART * span]
    return first, last


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class Drop:
    """A device's figure in the first and last part of the window; `fraction` below 0 is a rise."""

    first: float
    last: float

    @property
    def fraction(self) -> float:
        return 1 - self.last / self.first if self.first > 0 else 0.0


def drop_over_time(points: Sequence[tuple[float, float]], start: float, end: float) -> Drop | None:
    """The mean of `points` (seconds into the window, figure) in the window's first part against its last
    part; None where one part holds no point (too short a window for the rounds the load made)."""
    first, last = _parts(points, start, end)
    if not first or not last or len(points) < 2:
        return None
    return Drop(_mean(first), _mean(last))


@dataclass(frozen=True)
class Growth:
    """A counter of one subject (device NIC, chip) that grew in the window."""

    subject: str
    counter: str
    first: int
    last: int

    def line(self) -> str:
        return f"{self.subject}: {self.counter} {self.first} -> {self.last} (+{self.last - self.first})"


def counter_growth(first: Mapping[str, Mapping[str, int]], last: Mapping[str, Mapping[str, int]],
                   counters: Sequence[str] | None = None) -> list[Growth]:
    """Counters (subject -> name -> value) that grew between the window's first and last reading; only the
    names in `counters` where given. A counter that went down was cleared in the window: not growth."""
    out = []
    for subject, values in last.items():
        before = first.get(subject, {})
        for name, value in values.items():
            if counters is not None and name not in counters:
                continue
            if name in before and value > before[name]:
                out.append(Growth(subject, name, before[name], value))
    return out


def throttled_at(samples: Sequence[tuple[float, int | None, int | None, int | None]]) -> float | None:
    """The first time (seconds into the window) a chip ran loaded below its rated AI Core clock, from
    (t, AICore use %, curFreq MHz, rated MHz) samples of `npu-smi info -t common`; None if it never did.
    An idle chip clocks down to save power: only a loaded one below its clock is throttled."""
    for t, busy, current, rated in samples:
        if busy and current is not None and rated and current < rated:
            return t
    return None
