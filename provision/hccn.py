"""Device NIC (RoCE) addresses of a fleet, derived from address ranges: the `hccn_devices` host
variable of every node (the hccn role's input), checked for overlaps and for room in each network.

Device d of node i (its position in the node list, from 0) gets host number FIRST_HOST + i in the
network of device d (a network template with `{dev}`), or FIRST_HOST + i * DEVICES + d when all device
NICs share one network. The gateway is a host number of the network (`.1`) or an address template.
"""

from __future__ import annotations

import ipaddress

from pydantic import Field

from ascend_ready.errors import ConfigError
from ascend_ready.provision.matrix import MatrixModel

#: NPUs of an Atlas 800T A2 (one device NIC each)
DEFAULT_DEVICES = 8


class DeviceNic(MatrixModel):
    """One entry of `hccn_devices` (playbooks/roles/hccn/meta/argument_specs.yml)."""

    id: int = Field(description="device id (hccn_tool -i)")
    address: str
    netmask: str
    gateway: str
    netdetect: str | None = Field(None, description="address link detection pings (default: the gateway)")


def _network(template: str, dev: int) -> ipaddress.IPv4Network:
    try:
        text = template.format(dev=dev)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"device network {template!r}: bad template ({exc})",
                          hint="write e.g. 192.168.{dev}.0/24 or 10.20.0.0/16") from None
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise ConfigError(f"device network {text!r} (device {dev}): {exc}",
                          hint="write the network address and prefix, e.g. 192.168.0.0/24") from None
    if net.version != 4:
        raise ConfigError(f"device network {text}: the device NICs take IPv4 addresses",
                          hint="use an IPv4 network")
    return net


def _host(net: ipaddress.IPv4Network, number: int, what: str) -> ipaddress.IPv4Address:
    """Host `number` of `net`; refuses the network and broadcast addresses and anything outside."""
    usable = net.num_addresses - 2 if net.prefixlen < 31 else net.num_addresses
    first = 1 if net.prefixlen < 31 else 0
    if not first <= number < first + usable:
        raise ConfigError(f"{what}: host number {number} does not fit {net} "
                          f"(hosts {first}..{first + usable - 1})",
                          hint="use a larger network, a lower --first-host, or fewer nodes per network")
    return net.network_address + number


def _address(spec: str, net: ipaddress.IPv4Network, dev: int, what: str) -> ipaddress.IPv4Address:
    """`.N` (host N of the device's network) or an address template such as 192.168.{dev}.254."""
    spec = spec.strip()
    if spec.startswith("."):
        try:
            return _host(net, int(spec[1:]), what)
        except ValueError:
            raise ConfigError(f"{what} {spec!r}: write .N for host N of the network, or an address",
                              hint="e.g. --gateway .1") from None
    try:
        addr = ipaddress.IPv4Address(spec.format(dev=dev))
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(f"{what} {spec!r}: not an IPv4 address or template ({exc})",
                          hint="e.g. .1 or 192.168.{dev}.1") from None
    if addr not in net:
        raise ConfigError(f"{what} {addr} is outside device {dev}'s network {net}",
                          hint="the gateway must be in the device NIC's own network")
    return addr


def plan_device_nics(nodes: list[str], device_net: str, *, gateway: str = ".1", first_host: int = 10,
                     devices: int = DEFAULT_DEVICES,
                     netdetect: str | None = None) -> dict[str, list[DeviceNic]]:
    """hccn_devices per node, in node order; ConfigError on a duplicate node, an overlap or no room."""
    if not nodes:
        raise ConfigError("no nodes given", hint="pass --nodes node[01:04] or -i INVENTORY")
    dupes = sorted({n for n in nodes if nodes.count(n) > 1})
    if dupes:
        raise ConfigError(f"node(s) listed twice: {', '.join(dupes)}", hint="name each node once")
    if devices < 1:
        raise ConfigError(f"--devices {devices}: a node has at least one device NIC",
                          hint="give --devices 1 or more (8 on an Atlas 800T A2)")
    per_device = "{dev}" in device_net
    nets = [_network(device_net, d) for d in range(devices)]
    if per_device:
        for a in range(devices):
            for b in range(a + 1, devices):
                if nets[a].overlaps(nets[b]):
                    raise ConfigError(f"device {a}'s network {nets[a]} and device {b}'s {nets[b]} overlap",
                                      hint="the {dev} part must give each device its own network, e.g. "
                                           "192.168.{dev}.0/24")
    out: dict[str, list[DeviceNic]] = {}
    owner: dict[ipaddress.IPv4Address, str] = {}
    gateways = {d: _address(gateway, nets[d], d, "gateway") for d in range(devices)}
    detects = {d: _address(netdetect, nets[d], d, "netdetect") for d in range(devices)} if netdetect else {}
    for d, gw in gateways.items():
        owner.setdefault(gw, f"the gateway of device {d}")
    for i, node in enumerate(nodes):
        nics = []
        for d in range(devices):
            number = first_host + i if per_device else first_host + i * devices + d
            addr = _host(nets[d], number, f"{node} device {d}")
            if addr in owner:
                raise ConfigError(f"{node} device {d} would get {addr}, which is {owner[addr]}",
                                  hint="move --first-host past the gateway, or pick another gateway")
            owner[addr] = f"{node} device {d}"
            nics.append(DeviceNic(id=d, address=str(addr), netmask=str(nets[d].netmask),
                                  gateway=str(gateways[d]), netdetect=str(detects[d]) if detects else None))
        out[node] = nics
    return out


def host_vars(plan: dict[str, list[DeviceNic]]) -> dict[str, dict]:
    """{node: {"hccn_devices": [...]}} as the inventory's host_vars hold them (no empty keys)."""
    return {node: {"hccn_devices": [n.model_dump(exclude_none=True) for n in nics]}
            for node, nics in plan.items()}


def _nic_lines(nics: list[DeviceNic], indent: str) -> list[str]:
    # One flow mapping per device, as the hccn role documents it: a rack's addresses read as a table.
    return [indent + "- {" + ", ".join(f"{k}: {v}" for k, v in n.model_dump(exclude_none=True).items()) + "}"
            for n in nics]


def render_host_vars(nics: list[DeviceNic], generated_by: str = "") -> str:
    """One node's host_vars file (yamllint clean)."""
    head = ["---"] + [f"# {line}" for line in generated_by.splitlines()]
    return "\n".join([*head, "hccn_devices:", *_nic_lines(nics, "  ")]) + "\n"


def render_plan(plan: dict[str, list[DeviceNic]]) -> str:
    """Every node's hccn_devices as one YAML mapping (the `hosts:` part of a YAML inventory)."""
    lines = ["---"]
    for node, nics in plan.items():
        lines += [f"{node}:", "  hccn_devices:", *_nic_lines(nics, "    ")]
    return "\n".join(lines) + "\n"
