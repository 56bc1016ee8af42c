"""Launch-time node facts: what a job needs to know about a node before it starts, read through the
preflight's own Host from one probe batch (checks/cluster/node_facts.py runs it for a set of nodes).

Their probes depend on the job, not the profile (the master it rendezvouses at, the paths it needs, the
controller's marker file), so each resource builds them from what the launch asks (`probes_for`); their
ids are the ones the pre-start probe has always recorded. The NUMA and NPU affinity of a node are the
preflight's own NumaNodes and NpuTopology resources, read from the same batch.

A fact not read (a probe that failed or printed nothing) is None, never a guess: the launcher refuses
or says what it did without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from shlex import quote

from ascend_ready.checks.probes import Probe
from ascend_ready.checks.resources.base import Resource

__all__ = ["JobInterpreter", "JobPaths", "LoginUser", "MasterRoute", "SharedRunDir"]

#: the code the job's interpreter runs to say which ascend-ready it imports
ASCEND_READY_CODE = "import ascend_ready; print(ascend_ready.__version__)"


def _resolve(master: str) -> str:
    """sh that sets $m to the master's address as the node resolves it (its resolver, its /etc/hosts), as
    torchrun will: an address stays as it is, a name is looked up. An IPv6 literal (it has a colon) is an
    address as it stands (ops-launch: `fd77::11` was looked up with getent ahostsv4, found nothing, and the
    node's route read as missing)."""
    return (f"m={quote(master)}; case \"$m\" in *:*) ;; *[!0-9.]*) "
            "m=$(getent ahostsv4 \"$m\" 2>/dev/null | awk 'NR==1 {print $1}');; esac; ")


class _Facts(Resource):
    def ok(self, probe_id: str) -> str | None:
        """stdout of a probe that ran, succeeded and printed something; else None (not known)."""
        res = self.host.optional(probe_id)
        return res.stdout if res is not None and res.rc == 0 and res.stdout.strip() else None

    def word(self, probe_id: str) -> str | None:
        return (self.ok(probe_id) or "").strip() or None


class MasterRoute(_Facts):
    """The master's address as the node resolves it, the route the kernel takes toward it and the node's
    addresses on the way (`ip -o route get`, `ip -o addr show to`)."""

    @staticmethod
    def probes_for(master: str) -> list[Probe]:
        resolve = _resolve(master)
        return [
            Probe("master", shell=resolve + 'echo "$m"',
                  description="the master's address as the node resolves it"),
            Probe("route", shell=resolve + 'ip -o route get "$m"'),
            Probe("addr", shell=resolve + 'ip -o addr show to "$m"'),
        ]

    @cached_property
    def master_ip(self) -> str | None:
        return self.word("master")

    @cached_property
    def route(self) -> str | None:
        return self.ok("route")

    @cached_property
    def addr(self) -> str | None:
        return self.ok("addr")


class LoginUser(_Facts):
    """Whom the node's SSH session logs in as, also where the batch runs through sudo (become)."""

    PROBE = Probe("login", shell='echo "${SUDO_USER:-$(id -un)}"')

    @cached_property
    def user(self) -> str | None:
        return self.word("login")


class JobPaths(_Facts):
    """Whether each path the job needs is there for the training user (`test FLAG PATH` as that user).
    The slot for what else the job's user needs of its paths (writability) is `probes_for`'s: a probe per
    label, read back by `missing`."""

    @staticmethod
    def probes_for(paths: Mapping[str, tuple[str, str]]) -> tuple[list[Probe], dict[str, str]]:
        """(probes, probe id -> label) for label -> (test flag, path); the interpreter is JobInterpreter's."""
        probes, labels = [], {}
        for n, (label, (flag, path)) in enumerate(paths.items()):
            if label == "python":
                continue
            labels[f"path-{n}"] = label
            probes.append(Probe(f"path-{n}", argv=("test", flag, path), as_user=True, description=label))
        return probes, labels

    def missing(self, labels: Mapping[str, str], paths: Mapping[str, tuple[str, str]]) -> dict[str, str]:
        """label -> path of every required path whose test did not pass (or did not run)."""
        out = {}
        for probe_id, label in labels.items():
            res = self.host.snapshot.probes.get(probe_id)
            if res is None or res.rc != 0:
                out[label] = paths[label][1]
        return out


class JobInterpreter(_Facts):
    """The job's interpreter as the node's shell expands its path (a ~user or glob path, which
    checks.preflight.training_env admits only of shell-inert characters, names exactly one), and the
    ascend-ready it imports."""

    @staticmethod
    def probes_for(flag: str, path: str) -> list[Probe]:
        word = path if path.startswith("~") or any(c in path for c in "*?[") else quote(path)
        return [
            Probe("interp", shell=f'set -- {word}; [ $# -eq 1 ] && test {flag} "$1" && echo "$1"',
                  as_user=True, description="the job's interpreter"),
            Probe("ascend-ready", shell=f'set -- {word}; "$1" -c {quote(ASCEND_READY_CODE)} 2>&1',
                  as_user=True, description="the ascend-ready the job's interpreter imports"),
        ]

    @cached_property
    def python(self) -> str | None:
        return self.word("interp")

    @cached_property
    def ascend_ready(self) -> tuple[int, str] | None:
        """(exit status, output) of the interpreter importing ascend_ready; None: not run."""
        res = self.host.snapshot.probes.get("ascend-ready")
        return None if res is None else (res.rc, res.stdout.rstrip("\n"))


class SharedRunDir(_Facts):
    """Whether the node sees the controller's run dir: it reads the marker file only the controller wrote."""

    @staticmethod
    def probes_for(marker: str) -> list[Probe]:
        return [Probe("shared", argv=("cat", marker), as_user=True,
                      description="the controller's marker file (a shared run dir)")]

    def sees(self, nonce: str | None) -> bool:
        return nonce is not None and self.word("shared") == nonce
