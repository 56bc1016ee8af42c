"""Which machine a host is: /etc/machine-id and the kernel's boot id, read so that one machine listed twice
in an inventory (two names, two addresses) is seen as one (checks/cluster/aliases.py).

The boot id is random per boot (proc(5): /proc/sys/kernel/random/boot_id), so two hosts with the same
machine-id and boot id are one running kernel; a machine-id alone is not enough (cloned images share it).
"""

from __future__ import annotations

from functools import cached_property

from ascend_ready.checks.parsers import os_commands as parsed
from ascend_ready.checks.resources.base import Resource, probe

__all__ = ["MachineIdentity"]

MACHINE_IDENTITY = probe(
    "machine-identity",
    shell=(
        "printf 'machine-id %s\\n' \"$(cat /etc/machine-id 2>/dev/null)\"; "
        "printf 'boot-id %s\\n' \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\""
    ),
    description="/etc/machine-id and the boot id: which machine a host is",
)


class MachineIdentity(Resource):
    """The host's machine-id and boot id."""

    probes = (MACHINE_IDENTITY,)

    @cached_property
    def identity(self) -> parsed.MachineIdentityOutput:
        return parsed.parse_machine_identity(self.host.stdout("machine-identity"))
