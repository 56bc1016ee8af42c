"""Fix lines with the real values: the host, training user, interpreter and inventory of the result
they are about, and ansible-playbook commands that run from where the user is.

A check's remediation is a template (`--limit <host>`, `su - <user>`, PLAYBOOK); the runner fills it
for each host with `localize`. A value the run does not know stays a placeholder, and the fix says so.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from ascend_ready.checks.registry import Remediation
from ascend_ready.fleet.inventory import INVENTORY_VAR

__all__ = ["INVENTORY_VAR", "PLAYBOOK", "localize", "playbook_command"]

#: where a check's command runs the playbooks: `PLAYBOOK + " --limit <host> --tags hccn"`
PLAYBOOK = "ansible-playbook -i <inventory> playbooks/site.yml"
#: what stands for an inventory the run did not have (--hosts, this node, an older snapshot)
UNKNOWN_INVENTORY = "INVENTORY"
#: the ascend-ready checkout holding the playbooks (None for an installed wheel without them)
REPO = Path(__file__).resolve().parents[1]


def playbook_command(inventory: str | None, cwd: Path | None = None) -> str:
    """`ansible-playbook -i INVENTORY playbooks/site.yml` as it runs from `cwd` (default: here): from
    the checkout's root as is, from anywhere else after a `cd` to it (ansible.cfg is read from there),
    with the inventory as an absolute path then."""
    cwd = (cwd or Path.cwd()).resolve()
    inv = shlex.quote(inventory) if inventory else UNKNOWN_INVENTORY
    if not (REPO / "playbooks" / "site.yml").is_file():
        return f"ansible-playbook -i {inv} playbooks/site.yml"
    if cwd == REPO:
        if inventory and Path(inventory).is_relative_to(REPO):
            inv = shlex.quote(str(Path(inventory).relative_to(REPO)))
        return f"ansible-playbook -i {inv} playbooks/site.yml"
    return f"cd {shlex.quote(str(REPO))} && ansible-playbook -i {inv} playbooks/site.yml"


def localize(remediation: Remediation | None, host, cwd: Path | None = None) -> Remediation | None:
    """`remediation` with the host's values in place of <host>, <user>, <python> and PLAYBOOK's
    <inventory>; where the inventory is unknown the text says what INVENTORY stands for."""
    if remediation is None:
        return None
    inventory = host.snapshot.vars.get(INVENTORY_VAR) or None
    values = {
        PLAYBOOK: playbook_command(inventory, cwd),
        "<host>": host.name,
        "<user>": host.profile.training_user,
        "<python>": host.profile.python,
        "<inventory>": shlex.quote(inventory) if inventory else UNKNOWN_INVENTORY,
    }

    def fill(text: str | None) -> str | None:
        if text is None:
            return None
        for placeholder, value in values.items():
            text = text.replace(placeholder, value)
        return text

    text, command = fill(remediation.text), fill(remediation.command)
    if not inventory and f"-i {UNKNOWN_INVENTORY} " in f"{text} {command}":
        text = f"{text} ({UNKNOWN_INVENTORY}: the Ansible inventory listing {host.name}; this run had none)"
    if (text, command) == (remediation.text, remediation.command):
        return remediation
    return remediation.model_copy(update={"text": text, "command": command})
