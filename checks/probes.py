"""Probes: the raw facts a check reads, batched into ONE POSIX sh script per host, and its demultiplexer.

The remote side needs only a POSIX shell and coreutils (`timeout`, `mktemp`, `cat`): no Python, so a
CentOS 7 node works. Each probe's stdout streams between marker lines carrying a per-run random nonce
(stderr and rc follow it), so no output can forge a frame. The framing forks only to copy a non-empty
stderr: on a simulated cluster every process of every node shares the same few cores.

One hung tool costs one time limit, not the host deadline: cheap single-shot probes run first, a
tool that timed out is not called again in the batch, and the per-device loops of each tool get a
share of what is left of the deadline. A probe that is not started says why (`ProbeResult.not_run`).
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ascend_ready.checks.snapshot import ProbeResult
from ascend_ready.fleet.become import LOGIN_SHELL_FUNCTION

__all__ = [
    "FOREACH",
    "GENERIC_COMMANDS",
    "Probe",
    "ProbeStream",
    "batch_order",
    "build_script",
    "deadline_reason",
    "new_stream",
    "not_run_result",
    "parse_stream",
    "probe_tools",
]

#: How a per-device probe finds its instances on the node: a sh snippet printing one key per line
#: (the key's words fill the probe's `{1}` `{2}` or `$1` `$2`). Keys are read from the output of
#: another probe where the node's own view decides (e.g. the NPU ids `npu-smi info -l` lists). Each
#: source runs once per batch; keys with other characters than [A-Za-z0-9 ] are dropped.
FOREACH: dict[str, str] = {
    # Device logic ids, from the device nodes: hccn_tool -i takes these. Builtins only.
    "davinci": (
        "for _d in /dev/davinci[0-9]*; do _d=${_d#/dev/davinci}; "
        'case $_d in *[!0-9]*) ;; *) echo "$_d" ;; esac; done'
    ),
    # "NPU CHIP" pairs from `npu-smi info -l` (NPU ID / Chip Count blocks): npu-smi -i/-c take these.
    "npu-chip": (
        'awk -F: \'/NPU ID/{gsub(/[ \\t]/,"",$2); n=$2} '
        '/Chip Count/{gsub(/[ \\t]/,"",$2); for(c=0;c<$2+0;c++) print n" "c}\' '
        '"$_T/npu-smi-l.out"'
    ),
}

#: what each foreach source's words are, for a command no instance of which ran (its ids unknown)
FOREACH_WORDS: dict[str, tuple[str, ...]] = {"davinci": ("<device>",), "npu-chip": ("<npu>", "<chip>")}

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SLOT_RE = re.compile(r"^\{([1-9])\}$")
_TOOL_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")

#: Commands that read a file, a filesystem or print: one of them hanging (a dead NFS mount, a sysfs
#: file) says nothing about their next call, which reads something else. Any other command is a
#: tool, and a tool that timed out is not called again in the batch (its driver is what hangs).
GENERIC_COMMANDS = frozenset(
    {"cat", "df", "ls", "head", "tail", "grep", "sed", "awk", "echo", "printf", "true", "false", "sleep",
     "getconf", "getent", "sh", "env", "stat", "readlink", "id", "uname", "test", "["}
)


@dataclass(frozen=True)
class Probe:
    """One raw fact: a command (argv, quoted for the shell) or a sh snippet, with its own time limit.

    `foreach` names a FOREACH source; the probe then runs once per key with id `<id>.<key>` (spaces
    in the key become dots), the key's words filling `{1}`, `{2}`... in argv or `$1`, `$2`... in a
    snippet.
    `needs` lists probes that must run first (their output may feed a FOREACH source).
    `background` runs it concurrently with the rest of the batch (slow login shells and interpreters,
    never the vendor tools: concurrent npu-smi calls can fail with dcmi error -8020 "device used").
    `as_user` runs the command in the training user's own login shell (`su - USER`), because limits
    (pam_limits) and library paths (profile scripts sourcing set_env.sh) are per-user facts.
    `tool` names the program whose hang makes the batch skip this probe: by default the command's
    program (not for GENERIC_COMMANDS), and for a snippet the batch's tool it calls; "" for none.
    """

    id: str
    argv: tuple[str, ...] = ()
    shell: str | None = None
    timeout_s: float | None = None
    foreach: str | None = None
    needs: tuple[str, ...] = ()
    as_user: bool = False
    background: bool = False
    description: str = ""
    tool: str | None = None

    def __post_init__(self) -> None:
        if not _ID_RE.match(self.id):
            raise ValueError(f"probe id {self.id!r}: use lowercase letters, digits and '-'")
        if bool(self.argv) == bool(self.shell):
            raise ValueError(f"probe {self.id}: give exactly one of argv or shell")
        if self.background and (self.foreach or self.needs):
            raise ValueError(f"probe {self.id}: a background probe cannot loop or depend on others")
        if self.foreach is not None and self.foreach not in FOREACH:
            raise ValueError(f"probe {self.id}: unknown foreach source {self.foreach!r}")
        if self.tool and not _TOOL_RE.match(self.tool):
            raise ValueError(f"probe {self.id}: tool {self.tool!r} is not a program name")

    @property
    def program_tool(self) -> str:
        """The tool this probe's own command runs ("" for a snippet or a generic command)."""
        if self.tool is not None:
            return self.tool
        if not self.argv:
            return ""
        name = self.argv[0].rsplit("/", 1)[-1]
        return "" if name in GENERIC_COMMANDS or not _TOOL_RE.match(name) else name

    @cached_property
    def command(self) -> str:
        """The command as a user would type it (what a failed check names)."""
        return (
            self.shell
            if self.shell is not None
            else " ".join(w if _SLOT_RE.match(w) else shlex.quote(w) for w in self.argv)
        )

    def command_for(self, key: str) -> str:
        """The command of one foreach instance, with the key's words in place."""
        cmd = self.command
        for i, word in enumerate(key.split("."), start=1):
            cmd = cmd.replace(f"{{{i}}}", word).replace(f'"${i}"', word).replace(f"${i}", word)
        return cmd


@dataclass
class _Env:
    user: str
    timeout_s: float


def _words(probe: Probe, env: _Env) -> str:
    """The probe as shell words after `timeout N`: its argv, or `sh -c SNIPPET _ "$@"`."""
    if probe.as_user:
        # A login shell of the training user: its limits (pam_limits) and profile (set_env.sh).
        # Without root we can only observe our own user; the frame's rc then says why (_as, below).
        return f"_as {shlex.quote(env.user)} {shlex.quote(probe.command)}"
    if probe.shell is not None:
        return f"sh -c {shlex.quote(probe.shell)}" + (' _ "$@"' if probe.foreach else "")
    return " ".join(f'"${m[1]}"' if (m := _SLOT_RE.match(w)) else shlex.quote(w) for w in probe.argv)


#: The script's runtime. `_now` reads /proc/uptime with builtins (10 ms resolution) instead of
#: forking `date` twice per probe; `_p` streams stdout between markers, `_q` also keeps it in a file
#: for probes whose output feeds a FOREACH loop; stderr is copied only when there is some.
#: Time limits: where /proc/uptime gives a clock, one watchdog process (a `sleep` every half second)
#: stops a probe that overruns its limit, with its whole process tree (TERM, then KILL 2 s later), and
#: the probe's rc reads 124/137 as from `timeout -k 2`. That costs no process per probe; starting
#: `timeout` for each of ~70 probes would cost as much as the vendor tools they run. Without
#: /proc/uptime each probe runs under `timeout`, where the node has it. The watchdog holds none of the
#: batch's output (or the channel would stay open after END) and ends with the batch's temp dir: a
#: TERM sent as it starts can be lost, and a finished batch whose parent has not reaped it still
#: answers `kill -0`.
#: Leftovers: the batch runs as its SSH session's leader (sshd calls setsid; the local transport starts
#: it in a session of its own), or under the become wrapper that leads it (its command line holds
#: `ascend-check-become`); in any other session (a shell's, where it was started by hand) none of this
#: is done, as the session holds more than the batch. Whatever the batch starts stays in its session,
#: also a tool's child that escaped its process tree by a double fork (reparented to init: `_kt`
#: cannot see it, and it holds the output pipe open, so the batch would never end). Before END,
#: `_reap` stops every process of the session that is neither the batch's descendant nor its ancestor
#: (sudo's wrapper) or their child (the session's processes from one `ps -s`, else a /proc scan, ten
#: times slower in sh);
#: and the watchdog, seeing the session leader's parent (sshd: the controller went away, or the host
#: deadline closed the connection) gone, stops the whole batch, escaped processes included.
#: Output: the probes run in `_main`, whose output `_co` passes on in one write per tick (`dd` takes
#: what the pipe holds; 50 ms while output flows, doubling up to 1 s while it trickles; a `cat` in
#: between doubles what the batch can write without waiting): sshd sends one SSH packet per read of its
#: pipe, and each packet costs the controller more CPU than the bytes in it (~190 packets per A2 node
#: when every marker went out alone, now a handful; a 10 s batch on a real node ~15). A batch cut by
#: the host deadline loses at most its last tick; at END, `_fin` wakes `_co` (USR1) so the last output
#: leaves at once.
#: Skipping: `_ok` lets a probe start unless its tool timed out earlier (`_H` lists those tools), the
#: batch's budget `_D` (the host deadline, on the node's clock) is spent, or the current tool's share
#: `_L` of it is; otherwise it prints a one-line N frame saying which, and the probe is not started.
_RUNTIME = r"""#!/bin/sh
LC_ALL=C; export LC_ALL
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/local/Ascend/driver/tools"; export PATH
_T=$(mktemp -d 2>/dev/null || { d=/tmp/ascend-check.$$; mkdir -m 700 "$d" && echo "$d"; }) || exit 97
_W=; _B=; _H=' '; _D=; _L=; _LS=
trap '[ -z "$_W" ] || kill "$_W" 2>/dev/null; rm -rf "$_T"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
_now() { _t=0; { read -r _u _x </proc/uptime; } 2>/dev/null || return 0; _c=${_u%%.*}${_u#*.}
  while :; do case $_c in 0?*) _c=${_c#0};; *) break;; esac; done; _t=$(( _c * 10 )); }
_kt() { _g=$1; _l=" $2 "; _m=1
  while [ -n "$_m" ]; do _m=
    for _f in /proc/[0-9]*/stat; do
      _s=; { read -r _s <"$_f"; } 2>/dev/null || continue
      _s=${_s##*) }; _c=${_f#/proc/}; _c=${_c%/stat}; set -- $_s
      case $_l in *" $2 "*) case $_l in *" $_c "*) ;; *) _l="$_l$_c "; _m=1 ;; esac ;; esac
    done
  done
  kill -s "$_g" $_l 2>/dev/null; }
_ses() { _sid=; _A=' '; _P=; _s=; { read -r _s </proc/$$/stat; } 2>/dev/null || return 0
  _s=${_s##*) }; set -- $_s; _x=$4; _c=$2
  [ "$_x" -gt 1 ] 2>/dev/null || return 0
  if [ "$_x" = $$ ]; then _sid=$_x; _P=$_c; return 0; fi
  grep -q ascend-check-become "/proc/$_x/cmdline" 2>/dev/null || return 0
  while [ "$_c" -gt 1 ] 2>/dev/null; do _A="$_A$_c "; _s=
    { read -r _s </proc/$_c/stat; } 2>/dev/null || break
    _s=${_s##*) }; set -- $_s
    if [ "$_c" = "$_x" ]; then _sid=$_x; _P=$2; return 0; fi
    _c=$2
  done; _A=' '; }
_esc() { _S=' '; _l=" $1 "; _x=$(ps -o pid=,ppid= -s "$_sid" 2>/dev/null) || _x=
  if [ -n "$_x" ]; then set -- $_x; while [ $# -ge 2 ]; do _S="$_S$1:$2 "; shift 2; done
  else for _f in /proc/[0-9]*/stat; do _s=; { read -r _s <"$_f"; } 2>/dev/null || continue
    _s=${_s##*) }; set -- $_s; [ "$4" = "$_sid" ] || continue
    _c=${_f#/proc/}; _S="$_S${_c%/stat}:$2 "; done; fi
  _m=1
  while [ -n "$_m" ]; do _m=
    for _e in $_S; do _c=${_e%%:*}; _pp=${_e#*:}
      case $_l in *" $_pp "*) case $_l in *" $_c "*) ;; *) _l="$_l$_c "; _m=1 ;; esac ;; esac
    done; done
  _k=
  for _e in $_S; do _c=${_e%%:*}; _pp=${_e#*:}
    case "$_l$_A" in *" $_c "*) continue ;; esac
    case $_A in *" $_pp "*) continue ;; esac
    _k="$_k $_c"; done; }
_reap() { [ -n "$_sid" ] || return 0; _esc $$; [ -n "$_k" ] || return 0
  kill -s TERM $_k 2>/dev/null; _i=0
  while [ "$_i" -lt 10 ]; do _i=$(( _i + 1 )); _z=
    for _c in $_k; do [ -d "/proc/$_c" ] && _z=1; done
    [ -n "$_z" ] || return 0; sleep 0.1 2>/dev/null || sleep 1; done
  kill -s KILL $_k 2>/dev/null; }
_gone() { trap '' TERM HUP; _me=$(exec sh -c 'echo $PPID'); _esc "$1"; _v=
  for _c in $_k $_l; do [ "$_c" = "$_me" ] || _v="$_v $_c"; done
  kill -s TERM $_v 2>/dev/null; sleep 2 2>/dev/null; kill -s KILL $_v 2>/dev/null; }
_wd() { exec </dev/null >/dev/null 2>&1
  while sleep 0.5 || sleep 1; do
    [ -d "$_T" ] && kill -0 "$1" || exit 0
    [ -z "$_sid" ] || [ -d "/proc/$_P" ] || { _gone "$1"; exit 0; }
    _now
    for _r in "$_T"/*.run; do
      _c=; { read -r _c _a _s <"$_r"; } 2>/dev/null; [ -n "$_c" ] || continue
      _o=${_r%.run}.to
      if [ ! -f "$_o" ]; then
        [ $(( _t - _a )) -ge "$_s" ] || continue
        echo "TERM $_t" >"$_o"; _kt TERM "$_c"
      else
        { read -r _g _k <"$_o"; } 2>/dev/null
        [ "$_g" = TERM ] && [ $(( _t - _k )) -ge 2000 ] && { echo KILL >"$_o"; _kt KILL "$_c"; }
      fi
    done
  done; }
_now
[ "$_t" -gt 0 ] && _ses
if [ "$_t" -gt 0 ]; then _wd $$ & _W=$!; _TO=; [ -z "@BUDGET@" ] || _D=$(( _t + @BUDGET@ ))
elif command -v timeout >/dev/null 2>&1; then _TO=1; else _TO=; fi
_run() { _s=$1; shift; _x=
  if [ -n "$_W" ]; then
    "$@" & _c=$!
    echo "$_c $_a $_s" >"$_T/$_id.run"
    wait "$_c"; _r=$?
    : >"$_T/$_id.run"
    if [ -f "$_T/$_id.to" ]; then _x=1; read -r _g _k <"$_T/$_id.to"; [ "$_g" = KILL ] && _r=137 || _r=124; fi
    return $_r
  elif [ -n "$_TO" ]; then
    timeout -k 2 "$(( _s / 1000 )).$(( _s % 1000 / 100 ))$(( _s % 100 / 10 ))$(( _s % 10 ))" "$@"; _r=$?
    case $_r in 124|137) _x=1 ;; esac; return $_r
  else "$@"; fi; }
_ok() { case $_H in *" $2 "*) printf '%s N %s tool %s\n' @N@ "$1" "$2"; return 1 ;; esac
  [ -n "$_D" ] || return 0
  _now
  if [ "$_t" -ge "$_D" ]; then printf '%s N %s deadline\n' @N@ "$1"; return 1; fi
  if [ -n "$_L" ] && [ "$_t" -ge "$_L" ]; then
    printf '%s N %s budget %s %s\n' @N@ "$1" "$2" "$_LS"; return 1; fi; }
_share() { [ -n "$_D" ] || return 0; _now; _LS=$(( (_D - _t) / $1 ))
  [ "$_LS" -gt 0 ] || _LS=0; _L=$(( _t + _LS )); }
@AS@
_tail() { _rc=$1; [ -z "$_x" ] || [ "$_tl" = - ] || _H="$_H$_tl "; _now; printf '
%s O %s %s %s
' @N@ "$_id" "$_rc" $(( _t - _a ))
  [ -s "$_T/$_id.e" ] && cat "$_T/$_id.e"; printf '
%s E %s
' @N@ "$_id"; }
_p() { _id=$1; _tl=$2; shift 2; _ok "$_id" "$_tl" || return 0; _now; _a=$_t; printf '%s B %s
' @N@ "$_id"
  _run "$@" 2>"$_T/$_id.e" </dev/null; _tail $?; }
_q() { _id=$1; _tl=$2; shift 2; _ok "$_id" "$_tl" || return 0; _now; _a=$_t; printf '%s B %s
' @N@ "$_id"
  _run "$@" >"$_T/$_id.out" 2>"$_T/$_id.e" </dev/null; _r=$?; cat "$_T/$_id.out"; _tail $_r; }
_co() { command -v dd >/dev/null 2>&1 || exec cat
  _z=25; trap : USR1; _c=$(exec sh -c 'echo $PPID'); echo "$_c" >"$_T/co.pid"
  while dd bs=1048576 count=1 2>"$_T/co"; do
    _r=; _n=0; { read -r _r _x; read -r _x; read -r _n _x; } <"$_T/co" 2>/dev/null
    [ "$_r" = 0+0 ] && break
    # Output flowing fast (16 KiB or more since the last tick): stay at 50 ms, or the 64 KiB pipe
    # fills and stalls the batch; a trickle (a slow tool, a hang): wait twice as long, up to 1 s.
    case $_n in *[!0-9]*|'') _n=0 ;; esac
    if [ "$_n" -ge 16384 ]; then _z=50; elif [ "$_n" -lt 4096 ]; then _z=$(( _z * 2 )); fi
    [ "$_z" -le 1000 ] || _z=1000
    if [ ! -f "$_T/done" ] && [ "$_n" -lt 49152 ]; then
      sleep "$(( _z / 1000 )).$(( _z % 1000 / 100 ))$(( _z % 100 / 10 ))" 2>/dev/null & _s=$!
      wait "$_s"; [ $? -gt 128 ] && kill "$_s" 2>/dev/null
    fi
  done; }
_fin() { : >"$_T/done"; { read -r _c <"$_T/co.pid"; } 2>/dev/null && kill -USR1 "$_c" 2>/dev/null; }
"""
#: `_as USER CMD`: a probe as the training user, as fleet/become.py writes it for every path
_RUNTIME = _RUNTIME.replace("@AS@", LOGIN_SHELL_FUNCTION)


def build_script(
    probes: Iterable[Probe],
    *,
    nonce: str | None = None,
    default_timeout_s: float = 10.0,
    user: str = "root",
    budget_s: float | None = None,
) -> tuple[str, str]:
    """The POSIX sh script that runs `probes`, and the nonce framing its output.

    Order: background probes start first (they overlap the rest), then single-shot probes that run no
    tool, then those that do, then the per-device loops grouped by tool, each after what it needs.
    `budget_s` is the time the batch may take (the host deadline less connecting): past it no probe
    starts, and the loops of each tool may use an equal share of what is left when they begin.

    Frame per probe instance, on stdout:
        `<nonce> B <id>\\n` stdout `\\n<nonce> O <id> <rc> <ms>\\n` stderr `\\n<nonce> E <id>\\n`
    or, for a probe that was not started, one line `<nonce> N <id> <why> [tool] [share ms]`;
    then `<nonce> END\\n` after the last. rc 124/137 from `timeout` mark a timed-out probe.
    """
    nonce = nonce or secrets.token_hex(12)
    budget = "" if budget_s is None else str(max(0, round(budget_s * 1000)))
    # Every host of a fan-out with the same profile runs the same batch: its text is made once.
    template = _template(tuple(probes), default_timeout_s, user, tuple(sorted(FOREACH.items())))
    return template.replace(_NONCE, nonce).replace(_BUDGET, budget), nonce


#: Placeholders of the template: NUL never occurs in a probe's command, so nothing else is replaced.
_NONCE, _BUDGET = "\0nonce\0", "\0budget\0"


@lru_cache(maxsize=64)
def _template(
    probes: tuple[Probe, ...], default_timeout_s: float, user: str, foreach: tuple[tuple[str, str], ...]
) -> str:
    """build_script's text with _NONCE and _BUDGET in place of the run's nonce and budget."""
    sources = dict(foreach)
    env = _Env(user=user, timeout_s=default_timeout_s)
    ordered, tools = _schedule(list(probes))
    needed = {n for p in ordered for n in p.needs}
    lines = [_RUNTIME.replace("@N@", _NONCE).replace("@BUDGET@", _BUDGET), "_main() {"]
    if any(p.as_user for p in ordered):
        lines.append("_ME=$(id -un 2>/dev/null); _UID=$(id -u 2>/dev/null)")
    loop_tools = list(dict.fromkeys(tools[p.id] for p in ordered if p.foreach is not None))
    current = None
    for probe in ordered:
        limit_ms = _limit_ms(probe.timeout_s or env.timeout_s)
        words = _words(probe, env)
        tool = tools[probe.id] or "-"
        if probe.background:
            # Frames of background probes go to files, printed after `wait`, so they never interleave.
            lines.append(f'_p {probe.id} {tool} {limit_ms} {words} >"$_T/{probe.id}.frame" & _B="$_B $!"')
        elif probe.foreach is None:
            lines.append(f"{'_q' if probe.id in needed else '_p'} {probe.id} {tool} {limit_ms} {words}")
        else:
            if tools[probe.id] != current:
                # This tool's loops may use an equal share of the budget the loops still to come leave.
                current = tools[probe.id]
                lines.append(f"_share {len(loop_tools) - loop_tools.index(current)}")
            # Keys come from the node, once per source; only [A-Za-z0-9 ] keys pass, so they cannot
            # inject into ids or argv. A loop whose tool is out is one N frame, not one per device.
            keys = f'"$_T/keys.{probe.foreach}"'
            lines.append(
                f"if _ok {probe.id} {tool}; then\n"
                f"[ -f {keys} ] || {{ {sources[probe.foreach]}; }} >{keys} 2>/dev/null\n"
                f"while read -r _k; do case $_k in ''|*[!A-Za-z0-9\\ ]*) continue ;; esac; set -- $_k; _j=; "
                f'for _w in $_k; do _j="$_j.$_w"; done; _p "{probe.id}$_j" {tool} {limit_ms} {words}; '
                f"done <{keys}; fi"
            )
    if any(p.background for p in ordered):
        # Not a bare `wait`: the watchdog runs until the script ends.
        lines.append('for _b in $_B; do wait "$_b"; done')
        lines.append('for _f in "$_T"/*.frame; do [ -f "$_f" ] && cat "$_f"; done')
    lines.append(f"_reap; printf '%s END\\n' {_NONCE}; _fin")
    lines.append("}\n_main | cat | _co")
    return "\n".join(lines) + "\n"


def _limit_ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def probe_tools(probes: Iterable[Probe]) -> dict[str, str]:
    """probe id -> the tool whose hang skips it ("" for none). A snippet that calls the program of
    another probe of the batch (`hccn_tool` in the gateway ping) goes with that program."""
    probes = list(probes)
    programs = sorted({p.program_tool for p in probes if p.program_tool}, key=len, reverse=True)
    found = {}
    for p in probes:
        tool = p.program_tool
        if not tool and p.tool is None and p.shell is not None:
            calls = (t for t in programs if re.search(rf"(?<![\w./-]){re.escape(t)}(?![\w.-])", p.shell))
            tool = next(calls, "")
        found[p.id] = tool
    return found


def batch_order(probes: Iterable[Probe]) -> list[Probe]:
    """The order build_script runs `probes` in (background ones first, started concurrently)."""
    return _schedule(list(probes))[0]


def _schedule(probes: list[Probe]) -> tuple[list[Probe], dict[str, str]]:
    """The batch order (see build_script) and each probe's tool."""
    tools = probe_tools(probes)
    ordered = _order(probes)
    single = [p for p in ordered if not p.background and p.foreach is None]
    loops = [p for p in ordered if p.foreach is not None]
    loop_tools = list(dict.fromkeys(tools[p.id] for p in loops))
    plan = (
        [p for p in ordered if p.background]
        + [p for p in single if not tools[p.id]]
        + [p for p in single if tools[p.id]]
        + [p for t in loop_tools for p in loops if tools[p.id] == t]
    )
    # Again in dependency order (stable): a probe stays after what it needs whatever its class.
    return _order(plan), tools


def _order(probes: list[Probe]) -> list[Probe]:
    """Probes with each one after the probes it needs (stable otherwise); unknown needs fail."""
    by_id = {p.id: p for p in probes}
    done: dict[str, Probe] = {}

    def visit(p: Probe, path: tuple[str, ...]) -> None:
        if p.id in done:
            return
        if p.id in path:
            raise ValueError(f"probe dependency cycle: {' -> '.join((*path, p.id))}")
        for need in p.needs:
            if need not in by_id:
                raise ValueError(f"probe {p.id} needs {need!r}, which is not in the batch")
            visit(by_id[need], (*path, p.id))
        done[p.id] = p

    for p in probes:
        visit(p, ())
    return list(done.values())


@dataclass
class ProbeStream:
    """Incremental demultiplexer of a running script's stdout: feed bytes, read finished frames.

    Only lines that start with the run's nonce are markers, and the nonce is random per run, so a
    probe printing marker-like text (even `END`) is read as data. `complete` turns True at the END
    marker. `finish()` turns a frame cut off by the host deadline into a timed-out result that keeps
    the output that had arrived. `host_deadline_s` only words the reason of probes not run for it.
    """

    nonce: str
    probes: dict[str, Probe]
    default_timeout_s: float = 10.0
    host_deadline_s: float | None = None
    results: dict[str, ProbeResult] = field(default_factory=dict)
    complete: bool = False
    garbage: bytearray = field(default_factory=bytearray)
    _buf: bytearray = field(default_factory=bytearray)
    _open: str | None = None  # instance id whose frame has begun
    _out: bytes | None = None  # its stdout, once the O marker arrived
    _rc_ms: tuple[int, int] = (0, 0)
    _scan: int = 0  # where the next marker search starts (output seen so far)
    _marks: tuple[bytes, bytes] = (b"", b"")  # the open frame's O and E markers

    def __post_init__(self) -> None:
        n = self.nonce.encode()
        self._end, self._begin, self._skipped = n + b" END", n + b" B ", n + b" N "

    @property
    def started(self) -> bool:
        """A probe has reported (fleet.transport.OutputSink): what a lost connection leaves is kept."""
        return bool(self.results)

    def feed(self, data: bytes) -> None:
        self._buf += data
        while not self.complete and self._step():
            pass

    def _marker(self, kind: str, instance: str) -> bytes:
        return f"\n{self.nonce} {kind} {instance}".encode()

    def _step(self) -> bool:
        if self._open is None:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return False
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            if line == self._end:
                self.complete = True
                return False
            if line.startswith(self._begin):
                self._open = line[len(self._begin) :].decode("ascii", "replace")
                self._marks = (self._marker("O", self._open) + b" ", self._marker("E", self._open) + b"\n")
            elif line.startswith(self._skipped):
                self._not_run(line[len(self._skipped) :].decode("ascii", "replace").split())
            else:
                self.garbage += line + b"\n"  # a login banner or shell noise: not ours
            return True
        if self._out is None:
            mark = self._marks[0]
            at = self._buf.find(mark, self._scan)
            if at < 0:
                self._scan = max(0, len(self._buf) - len(mark))
                return False
            nl = self._buf.find(b"\n", at + len(mark))
            if nl < 0:
                return False
            rc, ms = (int(x) for x in bytes(self._buf[at + len(mark) : nl]).split())
            self._out, self._rc_ms = bytes(self._buf[:at]), (rc, ms)
            del self._buf[: nl + 1]
            self._scan = 0
            return True
        mark = self._marks[1]
        at = self._buf.find(mark, self._scan)
        if at < 0:
            self._scan = max(0, len(self._buf) - len(mark))
            return False
        err = bytes(self._buf[:at])
        del self._buf[: at + len(mark)]
        self._store(self._open, self._out, err, *self._rc_ms)
        self._open, self._out, self._scan = None, None, 0
        return True

    def _not_run(self, words: list[str]) -> None:
        """An N frame: `<id> tool TOOL`, `<id> deadline` or `<id> budget TOOL SHARE_MS`."""
        if not words:
            return
        instance, why, args = words[0], words[1] if len(words) > 1 else "", words[2:]
        if why == "tool" and args:
            reason = f"`{args[0]}` timed out earlier in this batch"
        elif why == "budget" and len(args) >= 2 and args[1].isdigit():
            reason = (
                f"the per-device calls of `{args[0]}` used up their share of the host deadline "
                f"({int(args[1]) / 1000:g} s)"
            )
        else:
            reason = deadline_reason(self.host_deadline_s)
        base, _, key = instance.partition(".")
        probe = self.probes.get(base)
        self.results[instance] = not_run_result(probe, key, reason, self.default_timeout_s, instance)

    def _store(self, instance: str, out: bytes, err: bytes, rc: int, ms: int, *, cut: bool = False) -> None:
        base, _, key = instance.partition(".")
        probe = self.probes.get(base)
        limit = (probe.timeout_s if probe else None) or self.default_timeout_s
        # The watchdog and `timeout` give 124 (137 after KILL); a command exiting 124 on its own is
        # rare, and the elapsed time tells the two apart where the node has a clock (ms 0: it has none).
        timed_out = cut or (rc in (124, 137) and (ms >= 0.9 * limit * 1000 or ms == 0))
        command = (probe.command_for(key) if key else probe.command) if probe else instance
        self.results[instance] = ProbeResult(
            command=command,
            rc=rc,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=max(ms, 0) / 1000,
            timed_out=timed_out,
            timeout_s=limit,
        )

    def finish(self, why: str) -> None:
        """The batch ended (or was stopped) without END: keep the frame that was running, as timed out."""
        if self.complete or self._open is None:
            return
        out = self._out if self._out is not None else bytes(self._buf)
        self._store(self._open, out, why.encode(), -1, 0, cut=True)
        self._open, self._out = None, None


def deadline_reason(host_deadline_s: float | None) -> str:
    """Why a probe was not started when the batch ran out of time."""
    return "host deadline" + (f" of {host_deadline_s:g} s" if host_deadline_s else "")


def not_run_result(
    probe: Probe | None, key: str, reason: str, default_timeout_s: float = 10.0, instance: str = ""
) -> ProbeResult:
    """The result of a probe (or one device's instance, `key`) that was never started; a per-device probe
    none of whose instances started names its words (`npu-smi info -t health -i <npu> -c <chip>`)."""
    if probe and not key and probe.foreach:
        key = ".".join(FOREACH_WORDS.get(probe.foreach, ("<id>",) * 9))
    command = (probe.command_for(key) if key else probe.command) if probe else instance
    limit = (probe.timeout_s if probe else None) or default_timeout_s
    return ProbeResult(command=command, rc=-1, timeout_s=limit, not_run=reason)


def parse_stream(
    data: bytes, nonce: str, probes: Iterable[Probe], *, default_timeout_s: float = 10.0
) -> ProbeStream:
    """Demultiplex a whole captured script output (the streaming form is ProbeStream.feed)."""
    stream = new_stream(nonce, probes, default_timeout_s=default_timeout_s)
    stream.feed(data)
    return stream


def new_stream(
    nonce: str,
    probes: Iterable[Probe],
    *,
    default_timeout_s: float = 10.0,
    host_deadline_s: float | None = None,
) -> ProbeStream:
    return ProbeStream(
        nonce=nonce,
        probes={p.id: p for p in probes},
        default_timeout_s=default_timeout_s,
        host_deadline_s=host_deadline_s,
    )
