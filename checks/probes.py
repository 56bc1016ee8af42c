"""Probes: the raw facts a check reads, batched into ONE POSIX sh script per host, and its demultiplexer.

The remote side needs only a POSIX shell and coreutils (`timeout`, `mktemp`, `cat`): no Python, so a
CentOS 7 node works. Each probe's stdout streams between marker lines carrying a per-run random nonce
(stderr and rc follow it), so no output can forge a frame. The framing forks only to copy a non-empty
stderr: on a simulated cluster every process of every node shares the same few cores.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from ascend_ready.checks.snapshot import ProbeResult

__all__ = ["FOREACH", "Probe", "ProbeStream", "build_script", "new_stream", "parse_stream"]

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

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SLOT_RE = re.compile(r"^\{([1-9])\}$")


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

    def __post_init__(self) -> None:
        if not _ID_RE.match(self.id):
            raise ValueError(f"probe id {self.id!r}: use lowercase letters, digits and '-'")
        if bool(self.argv) == bool(self.shell):
            raise ValueError(f"probe {self.id}: give exactly one of argv or shell")
        if self.background and (self.foreach or self.needs):
            raise ValueError(f"probe {self.id}: a background probe cannot loop or depend on others")
        if self.foreach is not None and self.foreach not in FOREACH:
            raise ValueError(f"probe {self.id}: unknown foreach source {self.foreach!r}")

    @property
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
_RUNTIME = r"""#!/bin/sh
LC_ALL=C; export LC_ALL
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/local/Ascend/driver/tools"; export PATH
_T=$(mktemp -d 2>/dev/null || { d=/tmp/ascend-check.$$; mkdir -m 700 "$d" && echo "$d"; }) || exit 97
_W=; _B=
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
_wd() { exec </dev/null >/dev/null 2>&1
  while sleep 0.5 || sleep 1; do
    [ -d "$_T" ] && kill -0 "$1" || exit 0
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
if [ "$_t" -gt 0 ]; then _wd $$ & _W=$!; _TO=
elif command -v timeout >/dev/null 2>&1; then _TO=1; else _TO=; fi
_run() { _s=$1; shift
  if [ -n "$_W" ]; then
    "$@" & _c=$!
    echo "$_c $_a $_s" >"$_T/$_id.run"
    wait "$_c"; _r=$?
    : >"$_T/$_id.run"
    if [ -f "$_T/$_id.to" ]; then read -r _g _k <"$_T/$_id.to"; [ "$_g" = KILL ] && _r=137 || _r=124; fi
    return $_r
  elif [ -n "$_TO" ]; then
    timeout -k 2 "$(( _s / 1000 )).$(( _s % 1000 / 100 ))$(( _s % 100 / 10 ))$(( _s % 10 ))" "$@"
  else "$@"; fi; }
_as() { if [ "$_ME" = "$1" ]; then "${SHELL:-/bin/sh}" -lc "$2"
  elif [ "$_UID" = 0 ]; then su - "$1" -c "$2"
  else echo "ascend-check: need root or user '$1' to read its environment" >&2; return 125; fi; }
_tail() { _rc=$1; _now; printf '
%s O %s %s %s
' @N@ "$_id" "$_rc" $(( _t - _a ))
  [ -s "$_T/$_id.e" ] && cat "$_T/$_id.e"; printf '
%s E %s
' @N@ "$_id"; }
_p() { _id=$1; shift; _now; _a=$_t; printf '%s B %s
' @N@ "$_id"
  _run "$@" 2>"$_T/$_id.e" </dev/null; _tail $?; }
_q() { _id=$1; shift; _now; _a=$_t; printf '%s B %s
' @N@ "$_id"
  _run "$@" >"$_T/$_id.out" 2>"$_T/$_id.e" </dev/null; _r=$?; cat "$_T/$_id.out"; _tail $_r; }
"""


def build_script(
    probes: Iterable[Probe], *, nonce: str | None = None, default_timeout_s: float = 10.0, user: str = "root"
) -> tuple[str, str]:
    """The POSIX sh script that runs `probes` in dependency order, and the nonce framing its output.

    Frame per probe instance, on stdout:
        `<nonce> B <id>\n` stdout `\n<nonce> O <id> <rc> <ms>\n` stderr `\n<nonce> E <id>\n`
    then `<nonce> END\n` after the last. rc 124/137 from `timeout` mark a timed-out probe.
    """
    nonce = nonce or secrets.token_hex(12)
    env = _Env(user=user, timeout_s=default_timeout_s)
    ordered = _order(list(probes))
    needed = {n for p in ordered for n in p.needs}
    # Background probes start first so they overlap the serial vendor-tool calls.
    ordered = [p for p in ordered if p.background] + [p for p in ordered if not p.background]
    lines = [_RUNTIME.replace("@N@", nonce)]
    if any(p.as_user for p in ordered):
        lines.append("_ME=$(id -un 2>/dev/null); _UID=$(id -u 2>/dev/null)")
    for probe in ordered:
        limit_ms = _limit_ms(probe.timeout_s or env.timeout_s)
        words = _words(probe, env)
        if probe.background:
            # Frames of background probes go to files, printed after `wait`, so they never interleave.
            lines.append(f'_p {probe.id} {limit_ms} {words} >"$_T/{probe.id}.frame" & _B="$_B $!"')
        elif probe.foreach is None:
            lines.append(f"{'_q' if probe.id in needed else '_p'} {probe.id} {limit_ms} {words}")
        else:
            # Keys come from the node, once per source; only [A-Za-z0-9 ] keys pass, so they cannot
            # inject into ids or argv.
            keys = f'"$_T/keys.{probe.foreach}"'
            lines.append(
                f"[ -f {keys} ] || {{ {FOREACH[probe.foreach]}; }} >{keys} 2>/dev/null\n"
                f"while read -r _k; do case $_k in ''|*[!A-Za-z0-9\\ ]*) continue ;; esac; set -- $_k; _j=; "
                f'for _w in $_k; do _j="$_j.$_w"; done; _p "{probe.id}$_j" {limit_ms} {words}; done <{keys}'
            )
    if any(p.background for p in ordered):
        # Not a bare `wait`: the watchdog runs until the script ends.
        lines.append('for _b in $_B; do wait "$_b"; done')
        lines.append('for _f in "$_T"/*.frame; do [ -f "$_f" ] && cat "$_f"; done')
    lines.append(f"printf '%s END\\n' {nonce}")
    return "\n".join(lines) + "\n", nonce


def _limit_ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


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
    the output that had arrived.
    """

    nonce: str
    probes: dict[str, Probe]
    default_timeout_s: float = 10.0
    results: dict[str, ProbeResult] = field(default_factory=dict)
    complete: bool = False
    garbage: bytearray = field(default_factory=bytearray)
    _buf: bytearray = field(default_factory=bytearray)
    _open: str | None = None  # instance id whose frame has begun
    _out: bytes | None = None  # its stdout, once the O marker arrived
    _rc_ms: tuple[int, int] = (0, 0)
    _scan: int = 0  # where the next marker search starts (output seen so far)

    def feed(self, data: bytes) -> None:
        self._buf += data
        while not self.complete and self._step():
            pass

    def _marker(self, kind: str, instance: str) -> bytes:
        return f"\n{self.nonce} {kind} {instance}".encode()

    def _step(self) -> bool:
        n = self.nonce.encode()
        if self._open is None:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return False
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            if line == n + b" END":
                self.complete = True
                return False
            if line.startswith(n + b" B "):
                self._open = line[len(n) + 3 :].decode("ascii", "replace")
            else:
                self.garbage += line + b"\n"  # a login banner or shell noise: not ours
            return True
        if self._out is None:
            mark = self._marker("O", self._open) + b" "
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
        mark = self._marker("E", self._open) + b"\n"
        at = self._buf.find(mark, self._scan)
        if at < 0:
            self._scan = max(0, len(self._buf) - len(mark))
            return False
        err = bytes(self._buf[:at])
        del self._buf[: at + len(mark)]
        self._store(self._open, self._out, err, *self._rc_ms)
        self._open, self._out, self._scan = None, None, 0
        return True

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


def parse_stream(
    data: bytes, nonce: str, probes: Iterable[Probe], *, default_timeout_s: float = 10.0
) -> ProbeStream:
    """Demultiplex a whole captured script output (the streaming form is ProbeStream.feed)."""
    stream = new_stream(nonce, probes, default_timeout_s=default_timeout_s)
    stream.feed(data)
    return stream


def new_stream(nonce: str, probes: Iterable[Probe], *, default_timeout_s: float = 10.0) -> ProbeStream:
    return ProbeStream(nonce=nonce, probes={p.id: p for p in probes}, default_timeout_s=default_timeout_s)
