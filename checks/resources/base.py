"""The resource layer's core: a node's raw probe results, the probes a resource declares, and the
errors that make a check `error` (a probe that failed, hung or never ran).

A resource (one small class per thing a check reads, as in pytest-testinfra) declares the probes it
runs next to the code that reads their output; a check names the resources it reads and its probe
list is derived from them, so no check can forget a probe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult
from ascend_ready.errors import AscendReadyError

__all__ = [
    "HostBase",
    "ProbeDef",
    "ProbeFailed",
    "Resource",
    "probe",
    "probe_ids",
    "profile_probe",
    "resource_closure",
]

R = TypeVar("R", bound="Resource")
V = TypeVar("V")


class ProbeFailed(AscendReadyError):
    """A probe gave no usable output (hung, never ran, not installed, cut): its checks are `error`."""

    exit_code = 1


@dataclass(frozen=True)
class ProbeDef:
    """A probe a resource runs: its id, how its command is built for a profile, what must run first."""

    id: str
    build: Callable[[HardwareProfile], Probe]
    needs: tuple[ProbeDef, ...] = ()

    def __call__(self, profile: HardwareProfile) -> Probe:
        return self.build(profile)


def probe(id: str, *, needs: tuple[ProbeDef, ...] = (), **fields) -> ProbeDef:
    """A probe whose command is the same for every profile."""
    fixed = Probe(id, needs=tuple(n.id for n in needs), **fields)
    return ProbeDef(id, lambda _profile: fixed, needs)


def profile_probe(id: str) -> Callable[[Callable[[HardwareProfile], dict]], ProbeDef]:
    """Decorator: a probe whose fields (`argv`/`shell`, ...) depend on the profile (paths, users)."""

    def wrap(fields: Callable[[HardwareProfile], dict]) -> ProbeDef:
        return ProbeDef(id, lambda profile: Probe(id, **fields(profile)))

    return wrap


class Resource:
    """One thing a check reads on a node. `probes`: what it runs; `requires`: resources it reads too."""

    probes: ClassVar[tuple[ProbeDef, ...]] = ()
    requires: ClassVar[tuple[type[Resource], ...]] = ()

    def __init__(self, host: HostBase):
        self.host = host


def resource_closure(reads: Iterable[type[Resource]]) -> list[type[Resource]]:
    """`reads` and every resource they require, in order (each resource before those it requires)."""
    out: list[type[Resource]] = []

    def visit(cls: type[Resource]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Resource)):
            raise TypeError(f"reads=[...] takes resource classes, not {cls!r}")
        if cls in out:
            return
        out.append(cls)
        for dep in cls.requires:
            visit(dep)

    for cls in reads:
        visit(cls)
    return out


def probe_ids(reads: Iterable[type[Resource]]) -> tuple[str, ...]:
    """The probe ids a check that reads `reads` needs: what `collect` runs for it."""
    ids: dict[str, None] = {}
    for cls in resource_closure(reads):
        for p in cls.probes:
            ids.setdefault(p.id, None)
    return tuple(ids)


_MISSING = ("No such file", "not found", "cannot access")


def numeric_key(key: str) -> tuple[int, ...]:
    """Sort key of a per-device instance key (`3`, `0.1`)."""
    return tuple(int(x) if x.isdigit() else -1 for x in key.split("."))


class Fleet:
    """The hosts judged together in one run, with a memo for what fleet.* checks derive from all of them."""

    def __init__(self, hosts: list[HostBase], reference: dict | None = None):
        self.hosts = hosts
        self.memo: dict[str, object] = {}
        #: node-local mode: the fleet's fingerprints as the controller recorded them
        #: ("<check id>:<product>" -> node -> field -> value), which a lone host is compared with
        self.reference: dict[str, dict[str, dict[str, str]]] = reference or {}

    def __len__(self) -> int:
        return len(self.hosts)

    def per_host(self, key: str, value: Callable[[HostBase], V], *,
                 product: str | None = None) -> dict[str, V]:
        """host name -> `value(host)` for every host judged together (of `product` where given), memoised
        under `key` for the run. A host whose value raises AscendReadyError is left out: its own check says
        why, and it is no part of what the others are compared with."""
        if key not in self.memo:
            out: dict[str, V] = {}
            for peer in self.hosts:
                if product is not None and peer.profile.product != product:
                    continue
                try:
                    out[peer.name] = value(peer)
                except AscendReadyError:
                    continue
            self.memo[key] = out
        return self.memo[key]  # type: ignore[return-value]


def short_command(command: str, limit: int = 160) -> str:
    """A probe's command as a message shows it: an inline script (`python -c '<28 lines>'`, a long sh
    snippet) is cut to its program and `<script>`, never pasted whole."""
    if "\n" not in command and len(command) <= limit:
        return command
    head, sep, _ = command.partition(" -c ")
    if sep and "\n" not in head and len(head) <= limit:
        return f"{head} -c <script>"
    first = command.splitlines()[0] if command.strip() else command
    return (first[: limit - 4] + " ...") if len(first) > limit - 4 else first + " ..."


class HostBase:
    """A node as its snapshot shows it, with the profile it is judged against; resources by class.

    While the runner judges a check that declares `reads`, only those resources (and the ones they
    require) and their probes may be read: reading anything else is a bug in the check or the
    resource, reported as one, never a silently missing probe.
    """

    def __init__(self, snapshot: HostSnapshot, profile: HardwareProfile):
        self.snapshot = snapshot
        self.profile = profile
        self.name = snapshot.name
        self._resources: dict[type[Resource], Resource] = {}
        self._allowed: tuple[str, set[type[Resource]], set[str]] | None = None
        #: every host judged in the same run (fleet.* checks compare this host with them)
        self.fleet: Fleet = Fleet([self])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @contextmanager
    def reading(self, check_id: str, reads: Iterable[type[Resource]]) -> Iterator[None]:
        """Limit reads to `reads` while check `check_id` runs."""
        closure = resource_closure(reads)
        self._allowed = (check_id, set(closure), set(probe_ids(closure)))
        try:
            yield
        finally:
            self._allowed = None

    def resource(self, cls: type[R]) -> R:
        """The host's instance of resource `cls` (made once, parsed lazily)."""
        if self._allowed is not None and cls not in self._allowed[1]:
            raise RuntimeError(
                f"check {self._allowed[0]} reads {cls.__name__}, which its reads=[...] do not name"
            )
        if cls not in self._resources:
            self._resources[cls] = cls(self)
        return self._resources[cls]  # type: ignore[return-value]

    # ------------------------------------------------------------ raw access (for resources)

    def _guard(self, probe_id: str) -> None:
        base = probe_id.partition(".")[0]
        if self._allowed is not None and base not in self._allowed[2]:
            raise RuntimeError(
                f"check {self._allowed[0]} reads probe {base!r}, "
                "which no resource of its reads=[...] declares"
            )

    def result(self, probe_id: str) -> ProbeResult:
        """The probe's result; one that was not collected, never ran or hung raises ProbeFailed."""
        self._guard(probe_id)
        res = self.snapshot.probes.get(probe_id)
        if res is None:
            raise ProbeFailed(
                f"no output of probe {probe_id!r} in the snapshot of {self.name}",
                hint="collect again with this ascend-check version",
            )
        not_run = getattr(res, "not_run", None)
        if not_run:
            raise ProbeFailed(
                f"`{short_command(res.command)}` not run: {not_run}",
                hint="the probe never started, so nothing is known about what it reads; "
                "fix the cause named and run ascend-check again",
            )
        if res.timed_out:
            limit = f" after {res.timeout_s:g} s" if res.timeout_s else ""
            why = f" ({res.stderr.strip()})" if res.rc == -1 and res.stderr.strip() else ""
            raise ProbeFailed(
                f"`{short_command(res.command)}` timed out{limit}{why}",
                hint="the tool hangs: check the driver (dmesg) before anything else",
            )
        return res

    def stdout(self, probe_id: str, *, ok_rc: tuple[int, ...] = (0,)) -> str:
        """stdout of a probe that must succeed; otherwise ProbeFailed naming the command and its error."""
        res = self.result(probe_id)
        if res.rc not in ok_rc:
            err = (res.stderr.strip() or res.stdout.strip()).splitlines()
            shown = short_command(res.command)
            program = shown.split()[0] if shown.split() else ""
            said = err[-1] if err else ""
            if said.startswith("ascend-check: no interpreter "):  # _python's shell form (~user, a glob)
                program = said.split()[3]
            if res.rc == 127 and program.startswith(("/", "~")) and "python" in program.rsplit("/", 1)[-1]:
                raise ProbeFailed(
                    f"no interpreter {program} on the node (the training venv is missing)",
                    hint="build it (ansible-playbook site.yml --tags python_env), or name the venv's python "
                    "with --python / ascend_check_python",
                )
            hint = "the command is not installed or not on PATH" if res.rc == 127 else None
            raise ProbeFailed(f"`{shown}` exited {res.rc}" + (f": {err[-1]}" if err else ""), hint=hint)
        return res.stdout

    def file(self, probe_id: str) -> str | None:
        """Contents a `cat`-like probe read, or None when the file does not exist."""
        res = self.result(probe_id)
        if res.rc != 0 and any(m in res.stderr for m in _MISSING):
            return None
        return self.stdout(probe_id)

    def optional(self, probe_id: str) -> ProbeResult | None:
        """The probe's result when it ran to the end, else None (for a source with a fallback)."""
        self._guard(probe_id)
        res = self.snapshot.probes.get(probe_id)
        if res is None or getattr(res, "not_run", None) or res.timed_out:
            return None
        return res

    def instances(self, base: str) -> dict[str, ProbeResult]:
        """Per-device results of a foreach probe, key (`3`, `0.1`) -> result, in device order."""
        self._guard(base)
        marker = self.snapshot.probes.get(base)
        if marker is not None:  # the batch stopped before the loop: the whole probe failed
            self.result(base)
        prefix = base + "."
        found = {
            pid[len(prefix) :]: res for pid, res in self.snapshot.probes.items() if pid.startswith(prefix)
        }
        return {key: found[key] for key in sorted(found, key=numeric_key)}
