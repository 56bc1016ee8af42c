"""Becoming another user on a node, written once for every way a command reaches it: the probe batch
(fleet/transport.py), a short command (Session.run) and a job's command line (fleet/plan.py, the Ray
cluster's commands). As Ansible attaches one become plugin to whichever connection was chosen, the
connection here only asks `Become` how to wrap what it runs.

Three forms, one per way a command holds its stdin:
- `Become.stdin_shell`: a batch read by `/bin/sh -s` on stdin goes through a checked sudo wrapper that
  answers on its first line (ok, or sudo's own refusal) before any probe runs; the become password, where
  there is one, is stdin's first line, never on a command line;
- `Become.command`: a command that owns its stdin (a job's guard protocol, a short command) runs as
  `sudo -n -H -u USER -- /bin/sh -c SCRIPT`, which fails at once rather than wait for a password;
- `LOGIN_SHELL_FUNCTION`: inside a batch that already runs as root, a probe that reads a user's own
  login environment (pam_limits, profile scripts sourcing set_env.sh) runs in that user's login shell.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ascend_ready.errors import HostUnreachable

__all__ = [
    "BECOME_HINT",
    "BECOME_OK",
    "LOGIN_SHELL_FUNCTION",
    "Become",
    "as_user",
]

#: The first line the batch's become wrapper prints, before the batch's own output.
BECOME_OK = "ascend-check-become: ok"
_BECOME_FAIL = "ascend-check-become: fail "
BECOME_HINT = (
    "let the SSH user run sudo without a password (a NOPASSWD rule in /etc/sudoers.d/), or give the "
    "become password (ansible_become_password in a vaulted file, or --ask-become-pass), or connect as "
    "root (ansible_user=root)"
)

#: sudo's message on one line after the fail tag, then the wrapper ends (no batch ran).
_FAIL_FN = f"""_f() {{ printf '{_BECOME_FAIL}%s\\n' "$(printf %s "$1" | tr '\\n' ' ')"; exit 0; }}"""
#: Without a password: sudo -n, which fails at once rather than wait for a prompt nobody answers.
_SUDO_N = f"""{_FAIL_FN}
e=$(sudo -n -u "$1" -- true 2>&1) || _f "$e"
echo '{BECOME_OK}'; exec sudo -n -u "$1" -- /bin/sh -s"""
#: With one: it comes as stdin's first line (`read` takes no more of stdin than that line). sudo -n
#: first (a NOPASSWD rule or a cached timestamp: the password line must not reach the batch's shell),
#: then the password checked once (-v), then the batch with the password in front of it (-k: sudo
#: asks, so the line is sudo's, whatever the timestamp settings).
_SUDO_S = f"""{_FAIL_FN}
IFS= read -r _p
if sudo -n -u "$1" -- true 2>/dev/null; then echo '{BECOME_OK}'; exec sudo -n -u "$1" -- /bin/sh -s; fi
e=$(printf '%s\\n' "$_p" | sudo -S -p '' -v 2>&1) || _f "$e"
echo '{BECOME_OK}'; {{ printf '%s\\n' "$_p"; exec cat; }} | sudo -S -k -p '' -u "$1" -- /bin/sh -s"""

#: The batch's `_as USER CMD` (checks/probes.py): CMD in USER's own login shell. As USER itself: its
#: login shell; as root: `su - USER`; else the frame's rc 125 says root or that user is needed.
LOGIN_SHELL_FUNCTION = """_as() { if [ "$_ME" = "$1" ]; then
    _ls=$(getent passwd "$1" 2>/dev/null | cut -d: -f7); "${_ls:-${SHELL:-/bin/sh}}" -lc "$2"
  elif [ "$_UID" = 0 ]; then su - "$1" -c "$2"
  else echo "ascend-check: need root or user '$1' to read its environment" >&2; return 125; fi; }"""


@dataclass(frozen=True)
class Become:
    """Run as `user` where the login user is not it. `password` (ansible_become_password) goes to sudo on
    stdin, and only for a batch (stdin_shell): a command that owns its stdin becomes with `sudo -n`."""

    user: str
    password: str | None = field(default=None, repr=False, compare=False)

    def needed(self, login_user: str | None) -> bool:
        return bool(self.user) and self.user != login_user

    def command(self, script: str, login_user: str | None) -> str:
        """`/bin/sh -c SCRIPT`, through `sudo -n -H -u USER` where USER is not the login user."""
        shell = f"/bin/sh -c {shlex.quote(script)}"
        if self.needed(login_user):
            return f"sudo -n -H -u {shlex.quote(self.user)} -- {shell}"
        return shell

    def stdin_shell(self, host: str, login_user: str | None) -> tuple[str, bytes | None]:
        """(the command a batch's session runs, what goes on its stdin before the batch; None: no
        wrapper, the batch's output starts at once). The wrapper answers first: see check_answer."""
        if not self.needed(login_user):
            return "/bin/sh -s", None
        if self.password is None:
            return f"/bin/sh -c {shlex.quote(_SUDO_N)} _ {shlex.quote(self.user)}", b""
        if "\n" in self.password:
            raise HostUnreachable(f"{host}: the become password holds a line break", hint=BECOME_HINT)
        head = self.password.encode() + b"\n"
        return f"/bin/sh -c {shlex.quote(_SUDO_S)} _ {shlex.quote(self.user)}", head

    def check_answer(self, host: str, login_user: str, line: str) -> None:
        """The stdin_shell wrapper's first line: ok, or sudo's own message as a per-host error saying
        what to do."""
        if line == BECOME_OK:
            return
        why = " ".join(line[len(_BECOME_FAIL):].split()) if line.startswith(_BECOME_FAIL) else (
            f"unexpected output {line!r}")
        hint = BECOME_HINT
        if "tty" in why:
            hint = f"allow sudo without a terminal for {login_user} (remove `Defaults requiretty` for it)"
        elif "not found" in why:
            hint = "install sudo on the node, or connect as root (ansible_user=root)"
        elif "incorrect password" in why or "Sorry" in why:
            hint = f"the become password is not {login_user}'s sudo password: fix ansible_become_password"
        raise HostUnreachable(
            f"{host}: sudo -u {self.user} as {login_user} failed: {why}; no probe ran", hint=hint
        )


def as_user(script: str, training_user: str | None, login_user: str | None) -> str:
    """`/bin/sh -c SCRIPT` as the training user where it is not the SSH user (Become.command)."""
    return Become(training_user or "").command(script, login_user)
