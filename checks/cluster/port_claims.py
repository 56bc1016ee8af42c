"""A job's port slot claimed on the nodes themselves, atomically, so two controllers launching at once on the
same nodes never take the same ports (checks/cluster/port_plan.py decides which ports a slot means).

A claim is a directory `slot-N` in NODE_CLAIMS_DIR on each node, made with mkdir (atomic on every POSIX
file system: of two controllers making it at the same moment, exactly one succeeds), holding an `owner`
file (the job, its controller host, pid and boot id, the node's boot id when it was made). A job claims its
slot on all of its nodes, or on none of them:

1. the slot on every node at once (one round trip): all granted, it is the job's;
2. otherwise what it got is given back, and the slot is tried node by node in one order every controller
   uses (sorted names): of two racers the one that gets the first shared node goes on, the other moves to
   the next slot, so one of them always wins (no livelock, no deadlock: nothing is ever waited for).

A claim is released at the job's end (by its token: never another job's). One left by a job that died is
stale, and reaped (renamed away atomically, then removed, so two reapers never remove a fresh claim):
- on the node itself, when its node boot id is not the node's (the node rebooted: the job died with it);
- by the controller, when it names this controller host, with this boot id, and a pid that is gone (or
  another boot id: the controller rebooted).
- by the controller, when it was made inside a Slurm allocation (a job launched by `ascend-train` under
  sbatch or salloc: its controller is the batch host, which the next job's may not be) and Slurm says that
  job is over: `squeue` lists it in a final state, or no longer knows the id (squeue exits 1 with
  "slurm_load_jobs error: Invalid job id specified" for one unknown id: fractal-server#1681,
  MatterMiners/tardis#326). A squeue that fails otherwise (slurmctld unreachable) reaps nothing.
Any other claim of another controller host whose job is gone cannot be judged from here: it is respected,
and the refusal names it with the command that removes it.

NODE_CLAIMS_DIR is in /var/tmp (kept across a Slurm job's private /tmp and /dev/shm, and on every Linux),
mode 1777 like /var/tmp itself, so the claims of every user's jobs meet in one place.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ascend_ready.errors import ParseError, TrainingError

__all__ = ["CLAIM_REPLY_KIND", "NODE_CLAIMS_DIR", "NODE_CLAIMS_DIR_ENV", "ClaimReply", "NodeClaims", "RunOn",
           "boot_id", "claim_script", "describe_owner", "parse_claim_reply", "release_script",
           "slurm_job_over"]

NODE_CLAIMS_DIR = "/var/tmp/ascend-ready-port-claims"
#: another claims directory, the same on every node (a site whose /var/tmp is not shared by its users)
NODE_CLAIMS_DIR_ENV = "ASCEND_READY_NODE_CLAIMS_DIR"
CLAIM_REPLY_KIND = "port claim reply"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"

#: runs `script` on each of `nodes` (at once where it can) -> node -> (exit status, stdout)
RunOn = Callable[[Sequence[str], str], Mapping[str, tuple[int, str]]]


def boot_id() -> str:
    """This machine's boot id (a new one at every boot), "unknown" where the kernel does not say."""
    try:
        with open(_BOOT_ID) as fh:
            return fh.read().strip() or "unknown"
    except OSError:
        return "unknown"


def claim_script(directory: str, slot: int, owner: Mapping[str, object], reap: Sequence[str] = ()) -> str:
    """The node's side of a claim (POSIX sh): make `directory`/slot-N, write `owner` (with the node's boot
    id added) into it, print `granted`; else `held OWNER-JSON` (`held -` while its owner is being written)
    or `error WHY`. A held claim whose node boot id is not the node's, or whose token is in `reap` (the
    controller judged it stale), is reaped and the slot tried once more."""
    rest = json.dumps(dict(owner))[1:]  # '"token": ..., }': the node's boot id goes first
    stale_tokens = " ".join(shlex.quote(str(t)) for t in reap)
    ours = shlex.quote(f'"token": "{owner["token"]}"')
    return f"""d={shlex.quote(directory)}; s="$d/slot-{int(slot)}"; me=$(id -un 2>/dev/null || id -u)
boot=$(cat {_BOOT_ID} 2>/dev/null) || boot=unknown
if [ ! -d "$d" ]; then
  mkdir -p "$(dirname "$d")" 2>/dev/null
  e=$(mkdir -m 1777 "$d" 2>&1) || [ -d "$d" ] || {{
    echo "error cannot create $d as $me: ${{e##*: }}"; exit 0; }}
fi
reaped=
for _try in 1 2 3; do
  if e=$(mkdir "$s" 2>&1); then
    if printf '{{"node_boot_id": "%s", %s\\n' "$boot" {shlex.quote(rest)} >"$s/owner.$$" \\
       && mv "$s/owner.$$" "$s/owner"; then echo granted
    else rm -rf "$s"; echo "error cannot write $s as $me"; fi
    exit 0
  fi
  # gone again already (its job released it between the two): try once more
  [ -d "$s" ] || {{ [ "$_try" = 3 ] && {{ echo "error cannot create $s as $me: ${{e##*: }}"; exit 0; }}
    continue; }}
  o=$(cat "$s/owner" 2>/dev/null) || o=
  [ -n "$o" ] || {{ echo "held -"; exit 0; }}
  case "$o" in *{ours}*) echo granted; exit 0 ;; esac  # ours already (two names of one node)
  stale=
  case "$o" in *'"node_boot_id": "'"$boot"'"'*) ;; *) stale=rebooted ;; esac
  for t in {stale_tokens}; do case "$o" in *'"token": "'"$t"'"'*) stale=controller ;; esac; done
  [ -n "$stale" ] && [ -z "$reaped" ] || {{ echo "held $o"; exit 0; }}
  reaped=1
  tok=$(printf '%s\\n' "$o" | sed -n 's/.*"token": "\\([^"]*\\)".*/\\1/p')
  r="$d/.reap.$$"
  mv "$s" "$r" 2>/dev/null || continue
  case "$(cat "$r/owner" 2>/dev/null)" in
    *'"token": "'"$tok"'"'*) rm -rf "$r" ;;
    *) [ -e "$s" ] || mv "$r" "$s" ;;
  esac
done
echo "held $(cat "$s/owner" 2>/dev/null || echo -)"
"""


def release_script(directory: str, slot: int, token: str) -> str:
    """The node's side of a release: slot-N removed only while its owner holds `token` (renamed away
    first, so a claim made in between is put back, never removed); prints `released`."""
    t = shlex.quote(f'"token": "{token}"')
    return (f'd={shlex.quote(directory)}; s="$d/slot-{int(slot)}"; r="$d/.release.$$"\n'
            f'if grep -qF {t} "$s/owner" 2>/dev/null && mv "$s" "$r" 2>/dev/null; then\n'
            f'  if grep -qF {t} "$r/owner" 2>/dev/null; then rm -rf "$r"\n'
            f'  else [ -e "$s" ] || mv "$r" "$s"; fi\n'
            f"fi\necho released\n")


@dataclass(frozen=True)
class ClaimReply:
    """One node's answer to a claim: granted, held (by `owner`, None while it is being written), error."""

    status: str
    owner: dict | None = None
    why: str = ""


def parse_claim_reply(text: str) -> ClaimReply:
    """claim_script's one line; ParseError naming the line for anything else (a claim not read is not
    a claim granted)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) != 1:
        raise ParseError(CLAIM_REPLY_KIND, f"{len(lines)} lines, expected one (granted, held or error)",
                         line_no=lines[1][0] if len(lines) > 1 else None,
                         line=lines[1][1] if len(lines) > 1 else None)
    n, line = lines[0]
    word, _, rest = line.strip().partition(" ")
    if word == "granted" and not rest:
        return ClaimReply("granted")
    if word == "error" and rest:
        return ClaimReply("error", why=rest)
    if word == "held" and rest == "-":
        return ClaimReply("held")
    if word == "held":
        try:
            owner = json.loads(rest)
        except ValueError:
            owner = None
        if isinstance(owner, dict) and "token" in owner:
            return ClaimReply("held", owner=owner)
    raise ParseError(CLAIM_REPLY_KIND, "not granted, held OWNER or error WHY", line_no=n, line=line)


#: squeue's job states after which a job holds nothing (squeue(1), JOB STATE CODES); any other one, or one
#: this list does not know, counts as live
SLURM_FINAL_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "REVOKED", "SPECIAL_EXIT", "TIMEOUT"})
#: what squeue prints (stderr, exit 1) for one job id slurmctld no longer holds (past MinJobAge)
SQUEUE_UNKNOWN_JOB = "Invalid job id specified"


def slurm_job_over(job_id: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> bool:
    """Whether Slurm says job `job_id` is over: a final state, or an id it no longer knows. False whenever
    it cannot say (no squeue, slurmctld unreachable, a state not listed): a claim is reaped only on
    Slurm's word."""
    argv = ["squeue", "--noheader", "--jobs", str(job_id), "--states=all", "--format=%T"]
    try:
        proc = run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    if proc.returncode != 0:
        return SQUEUE_UNKNOWN_JOB in proc.stderr
    states = {line.strip() for line in proc.stdout.splitlines() if line.strip()}
    return not states or states <= SLURM_FINAL_STATES


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this machine lives (one another user owns counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe_owner(owner: Mapping | None) -> str:
    if not owner:
        return "a claim being made (its owner file is not written yet)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner.get("created", 0))))
    slurm = f"Slurm job {owner['slurm_job_id']}, " if owner.get("slurm_job_id") else ""
    return (f"job {owner.get('job_id')} (controller {owner.get('controller')}, {slurm}"
            f"pid {owner.get('pid')}, user {owner.get('user')}, since {since})")


class NodeClaims:
    """This job's claims on its nodes, through `run` (the fleet's sessions, or a Slurm step)."""

    def __init__(self, run: RunOn, job_id: str, directory: str | None = None,
                 slurm_over: Callable[[str], bool] = slurm_job_over):
        self.run = run
        self.directory = directory or os.environ.get(NODE_CLAIMS_DIR_ENV) or NODE_CLAIMS_DIR
        self.token = secrets.token_hex(8)
        self.owner = {"token": self.token, "job_id": job_id, "controller": socket.gethostname(),
                      "controller_boot_id": boot_id(), "pid": os.getpid(),
                      "user": os.environ.get("USER") or str(os.getuid()), "created": round(time.time(), 3)}
        if os.environ.get("SLURM_JOB_ID"):  # made inside an allocation: Slurm can say when that job is over
            self.owner["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
        self.slurm_over = slurm_over
        self.held: dict[int, list[str]] = {}

    def _stale(self, owner: Mapping | None) -> bool:
        """A claim of a job that is gone: of this controller host (its pid, or its boot), or of a Slurm job
        that Slurm says is over (whichever host launched it)."""
        if not owner or owner.get("token") == self.token:
            return False
        slurm_job = owner.get("slurm_job_id")
        other_job = slurm_job and str(slurm_job) != self.owner.get("slurm_job_id")
        if other_job and self.slurm_over(str(slurm_job)):
            return True
        if owner.get("controller") != self.owner["controller"]:
            return False
        if owner.get("controller_boot_id") != self.owner["controller_boot_id"]:
            return True
        return not pid_alive(int(owner.get("pid") or 0))

    def _try(self, nodes: Sequence[str], slot: int, reap: Sequence[str] = ()) -> dict[str, ClaimReply]:
        out = self.run(list(nodes), claim_script(self.directory, slot, self.owner, reap))
        replies = {}
        for node in nodes:
            rc, text = out.get(node, (-1, ""))
            try:
                replies[node] = parse_claim_reply(text)
            except ParseError as exc:
                replies[node] = ClaimReply("error", why=f"exit {rc}: {exc.message}")
        return replies

    def _try_reaping(self, nodes: Sequence[str], slot: int) -> dict[str, ClaimReply]:
        replies = self._try(nodes, slot)
        stale = {n: r.owner["token"] for n, r in replies.items()
                 if r.status == "held" and self._stale(r.owner)}
        if stale:
            replies.update(self._try(sorted(stale), slot, reap=sorted(set(stale.values()))))
        return replies

    def claim(self, slot: int, nodes: Sequence[str]) -> str | None:
        """Claim `slot` on every node: None when the job holds it on all of them, else why not (the node and
        the claim that holds it). TrainingError when a node cannot claim at all (its claims directory)."""
        nodes = sorted(set(nodes))
        try:
            replies = self._try_reaping(nodes, slot)
            got = [n for n in nodes if replies[n].status == "granted"]
            if len(got) == len(nodes):
                self.held[slot] = got
                return None
            self._give_back(slot, got)
            self._refuse_errors(replies)
            held = []  # a racer or a live job: node by node, in the order every controller uses
            for node in nodes:
                reply = self._try_reaping([node], slot)[node]
                if reply.status != "granted":
                    self._give_back(slot, held)
                    self._refuse_errors({node: reply})
                    return f"{node}: slot {slot} is claimed by {describe_owner(reply.owner)}"
                held.append(node)
            self.held[slot] = held
            return None
        except (KeyboardInterrupt, SystemExit):
            # interrupted while nodes answered: which of them granted is not known here, so the slot is
            # given back on all of them (a release removes only a claim that holds this job's token)
            self._give_back(slot, nodes)
            raise

    def _refuse_errors(self, replies: Mapping[str, ClaimReply]) -> None:
        errors = [f"{n}: {r.why}" for n, r in sorted(replies.items()) if r.status == "error"]
        if errors:
            self.release()
            raise TrainingError("the job's port slot could not be claimed on every node; nothing was started:"
                                "\n  " + "\n  ".join(errors),
                                hint=f"{self.directory} must be a directory every job's user may create in "
                                     f"(mode 1777, like /var/tmp): chmod 1777 {self.directory} on that node")

    def _give_back(self, slot: int, nodes: Sequence[str]) -> None:
        if nodes:
            self.run(list(nodes), release_script(self.directory, slot, self.token))

    def release(self) -> None:
        """Give back every slot this job holds (at its end, or when its launch is refused)."""
        for slot, nodes in sorted(self.held.items()):
            self._give_back(slot, nodes)
        self.held.clear()

    def removal_hint(self, slot: int) -> str:
        return f"rm -r {self.directory}/slot-{slot}"
