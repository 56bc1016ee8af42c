"""`hccn_tool` outputs and setters, and the /etc/hccn.conf text, rendered from a node view.

Pure: `run` returns the text, the exit status and the settings to persist; the node tool stores them
(simdir runtime/ and /etc/hccn.conf), as the real tool writes both the device and the file.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field

from ascend_ready.sim.fabric import Fabric, echo
from ascend_ready.sim.hw.state import NodeView, find_chip_by_logic
from ascend_ready.sim.render.npu_smi import ToolError, driver_major

_SET_KEYS = {"ip": ("address", "netmask"), "gateway": ("gateway",), "netdetect": ("address",),
             "tls": ("enable",)}
USAGE = "Usage: hccn_tool -i <device_id> -<command> -g|-s [param value ...]\n"


@dataclass
class Result:
    text: str = ""
    rc: int = 0
    changes: dict = field(default_factory=dict)   # {logic id: {nic key: value}}
    cacheable: bool = True


@dataclass
class Command:
    device: int
    name: str
    mode: str           # "g" or "s"
    params: dict


def parse(args: list[str]) -> Command:
    """hccn_tool accepts its options in any order: `-i 0 -ip -g`, `-g -tls -i 0`, `-ip -s address A ...`."""
    device, name, mode, rest = None, None, None, []
    it = iter(args)
    for arg in it:
        if arg == "-i":
            value = next(it, None)
            if value is None or not value.isdigit():
                raise ToolError(f"Invalid device id: {value or ''}\n" + USAGE)
            device = int(value)
        elif arg in ("-g", "-s"):
            mode = arg[1]
        elif arg.startswith("-") and name is None:
            name = arg[1:]
        else:
            rest.append(arg)
    if device is None or name is None or mode is None or len(rest) % 2:
        raise ToolError(USAGE)
    return Command(device, name, mode, dict(zip(rest[::2], rest[1::2], strict=True)))


def _nic(view: NodeView, device: int) -> dict:
    hit = find_chip_by_logic(view.state, device)
    if hit is None or hit[1]["nic"] is None:
        raise ToolError(f"Invalid device id: {device}\n" + USAGE)
    return hit[1]["nic"]


def _net_health(view: NodeView, device: int, nic: dict) -> str:
    if nic["link"] == "DOWN":
        return "Fault"
    if nic["net_health"] != "Success":
        return nic["net_health"]
    # Health is probed against the netdetect address; until one is set the probe never starts.
    return "Success" if view.nic_value(device, "netdetect") else "Init"


def _ping(view: NodeView, cmd: Command, fabric: Fabric | None) -> str:
    target, pkt = cmd.params.get("address"), cmd.params.get("pkt", "3")
    if not target or set(cmd.params) - {"address", "pkt"} or not pkt.isdigit() or not 0 < int(pkt) <= 10000:
        raise ToolError(USAGE)
    count = int(pkt)
    received = echo(view, cmd.device, target, count, fabric).received
    # Shape of the ArthurChiao 910B1 capture: a reply line per packet that came back (the first pays the
    # ARP/QP setup, 1.418 ms, then ~0.03 ms), none for a lost one, then the summary with two decimals.
    times = [1.418, 0.034, 0.040]
    out = f"device {cmd.device} PING {target}\n"
    out += "".join(f"recv seq={k},time={times[k % 3]:.6f}ms\n" for k in range(count) if received[k])
    got = sum(received)
    return out + (f"{count} packets transmitted, {got} received, "
                  f"{100 * (count - got) / count:.2f}% packet loss\n")


def _tls(device: int, switch: int) -> str:
    # Vendor doc example of `hccn_tool -i 0 -tls -g` (HCCL troubleshooting guide, EI0005 TLS mismatch).
    return (f"dev_id:{device}, tls switch[{switch}](0:disable, 1:enable), tls preconfigured[1](0:non-preset, "
            f"1:preset), tls alarm time threshold[60]days\n"
            f"dev_id:{device}, [pub cert] info:\n"
            "         issuer[/C=CN/ST=GD/O=HUAWEI/OU=2012/CN=2_1thCA]\n"
            "         start_time[Wed Feb 19 03:19:21 2020 GMT]\n"
            "         end_time[Sat Feb 16 03:19:21 2030 GMT]\n")


def _link_stat(view: NodeView, device: int, nic: dict, now: float) -> str:
    # '[devid N]' up to 23.x drivers (MindCluster capture), '[device N]' later (MindCluster docs).
    tag = f"[devid {device}]" if driver_major(view) <= 23 else f"[device {device}]"
    events = nic["link_events"][::-1]   # newest first, as the tool prints them
    out = (f"{tag}current time        : {time.asctime(time.gmtime(now))}\n"
           f"{tag}link up count       : {sum(1 for _t, kind in events if kind == 'UP')}\n"
           f"{tag}link change records :\n")
    return out + "".join(f"{tag}    {time.asctime(time.gmtime(t))}    LINK {kind}\n" for t, kind in events)


def _optical(nic: dict) -> str:
    # Key spelling of the MindCluster FaultDiag report ('present              : not present'); a DOWN
    # port reports loss of signal on every lane.
    los = "0xff" if nic["link"] == "DOWN" else "0x0"
    rows = [("present", "present"), ("Vendor Name", "HUAWEI"), ("Tx Los Flag", "0x0"), ("Rx Los Flag", los),
            ("Tx LoL Flag", "0x0"), ("Rx LoL Flag", los)]
    return "".join(f"{key:<21}: {value}\n" for key, value in rows)


def _lldp(view: NodeView, device: int, nic: dict) -> str:
    node = view.state["node"]
    if nic["link"] == "DOWN":
        return ""   # no LLDPDU arrives on a dead port: nothing to print
    return ("Chassis ID TLV\n"
            f"\tMAC: 6c:e5:f7:{node['index'] & 0xFF:02x}:00:01\n"
            "Port ID TLV\n"
            f"\tIfname: 200GE1/0/{node['index'] * 8 + device + 1}\n"
            "Time to Live TLV\n"
            "\t121\n"
            "System Name TLV\n"
            "\tleaf-01\n"
            "End of LLDPDU TLV\n")


def run(view: NodeView, args: list[str], *, now: float | None = None,
        fabric: Fabric | None = None) -> Result:
    """One `hccn_tool` invocation against the node view; `fabric`: the cluster's, for `-ping`."""
    try:
        cmd = parse(args)
        nic = _nic(view, cmd.device)
        return _dispatch(view, cmd, nic, time.time() if now is None else now, fabric)
    except ToolError as err:
        return Result(err.text, err.rc, cacheable=False)


def _dispatch(view: NodeView, cmd: Command, nic: dict, now: float, fabric: Fabric | None) -> Result:
    d = cmd.device
    if cmd.mode == "s":
        wanted = _SET_KEYS.get(cmd.name)
        if wanted is None or set(cmd.params) != set(wanted):
            raise ToolError(USAGE)
        if cmd.name == "tls":
            if cmd.params["enable"] not in ("0", "1"):
                raise ToolError(USAGE)
            return Result(changes={d: {"tls": int(cmd.params["enable"])}}, cacheable=False)
        for key, value in cmd.params.items():
            if key in ("address", "netmask", "gateway"):
                try:
                    ipaddress.IPv4Address(value)
                except ValueError:
                    raise ToolError(f"Invalid {key}: {value}\n") from None
        key_map = {"ip": {"address": "address", "netmask": "netmask"}, "gateway": {"gateway": "gateway"},
                   "netdetect": {"address": "netdetect"}}[cmd.name]
        return Result(changes={d: {key_map[k]: v for k, v in cmd.params.items()}}, cacheable=False)
    if cmd.name == "ping":
        return Result(_ping(view, cmd, fabric), cacheable=False)
    if cmd.params:
        raise ToolError(USAGE)
    if cmd.name == "link":
        return Result(f"link status: {nic['link']}\n")
    if cmd.name == "net_health":
        return Result(f"net health status: {_net_health(view, d, nic)}\n")
    if cmd.name == "ip":
        address, netmask = view.nic_value(d, "address"), view.nic_value(d, "netmask")
        if address is None:
            return Result("Get ipconf failed, because no ip was preset there!\n", rc=1, cacheable=False)
        return Result(f"ipaddr:{address}\nnetmask:{netmask}\n")
    if cmd.name == "gateway":
        gateway = view.nic_value(d, "gateway")
        return Result(f"default gateway:{gateway or ''}, Iface:eth{d}\n")
    if cmd.name == "netdetect":
        return Result(f"netdetect address: {view.nic_value(d, 'netdetect') or ''}\n")
    if cmd.name == "tls":
        return Result(_tls(d, int(view.nic_value(d, "tls") or 0)))
    if cmd.name == "fec":
        return Result("fec mode: rs FEC mode\n")
    if cmd.name == "link_stat":
        return Result(_link_stat(view, d, nic, now), cacheable=False)
    if cmd.name == "optical":
        return Result(_optical(nic))
    if cmd.name == "lldp":
        return Result(_lldp(view, d, nic))
    if cmd.name == "stat":
        return Result("packet statistics:\nroce_rx_err_pkt_num:0\nroce_tx_err_pkt_num:0\n")
    raise ToolError(USAGE)


# ---------------------------------------------------------------- /etc/hccn.conf

_CONF_ORDER = ("address", "netmask", "netdetect", "gateway", "send_arp_status")


def update_conf(text: str, changes: dict) -> str:
    """/etc/hccn.conf with `changes` ({device: {nic key: value}}) applied: one block per device in the
    order of the ArthurChiao 910B1 capture (address, netmask, netdetect, gateway, send_arp_status)."""
    other, entries = [], {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        name, _, dev = key.rpartition("_")
        if sep and name and dev.isdigit():
            entries[(int(dev), name)] = value
        elif line.strip():
            other.append(line)
    for device, values in changes.items():
        for key, value in values.items():
            if key != "tls":
                entries[(int(device), key)] = value

    def order(item):
        (dev, name), _value = item
        return dev, _CONF_ORDER.index(name) if name in _CONF_ORDER else len(_CONF_ORDER), name

    lines = other + [f"{name}_{dev}={value}" for (dev, name), value in sorted(entries.items(), key=order)]
    return "".join(line + "\n" for line in lines)
