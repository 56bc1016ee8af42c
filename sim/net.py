"""The simulated cluster's private network: a bridge in a hub namespace, one veth per node, one for the host.

The host keeps a blackhole route for the subnet forever, so no packet for it can leave the machine even
when the cluster is down. Nodes' default route points at the hub, which routes nowhere: facts such as
Ansible's default_ipv4 look as on a real host, yet nothing a node sends can leave the subnet.

IPv6 is off until asked for (enable_ipv6, sim/cluster.py enable_ipv6): then the host's veth and every node's
eth0 also hold an address of the run dir's unique-local /64 (fd77:<tag>::/64), with a blackhole for it on
the host and no IPv6 default route in a node, so a test can name nodes by IPv6 address end to end.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import subprocess
from dataclasses import dataclass

from ascend_ready.errors import SimError

DEFAULT_SUBNET = "10.251.0.0/24"
# Lower priority than the connected route of the host veth, which wins while the cluster is up.
BLACKHOLE_METRIC = 4000000000


@dataclass(frozen=True)
class Network:
    subnet: ipaddress.IPv4Network
    tag: str  # short, per run dir: keeps interface and namespace names of two run dirs apart

    @classmethod
    def for_run_dir(cls, run_dir: str, subnet: str | None = None) -> Network:
        net = ipaddress.ip_network(subnet or os.environ.get("ASCEND_SIM_SUBNET", DEFAULT_SUBNET))
        if not net.is_private:
            raise SimError(f"subnet {net} is not private",
                           hint="use an RFC 1918 subnet such as 10.251.0.0/24")
        if net.num_addresses < 16:
            raise SimError(f"subnet {net} is too small", hint="use a /24 or larger")
        return cls(net, hashlib.sha256(run_dir.encode()).hexdigest()[:4])

    @property
    def hub(self) -> str:
        return f"ascend-sim-{self.tag}"

    @property
    def host_if(self) -> str:
        return f"asim{self.tag}h"

    def node_if(self, index: int) -> str:
        return f"asim{self.tag}n{index}"

    @property
    def host_ip(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def gateway_ip(self) -> str:
        """The hub's own address: a dead-end gateway (no route beyond the subnet, no forwarding)."""
        return str(self.subnet.broadcast_address - 1)

    @property
    def subnet6(self) -> ipaddress.IPv6Network:
        """The cluster's IPv6 network (off until enable_ipv6): a unique-local /64 (RFC 4193) per run dir."""
        return ipaddress.IPv6Network(f"fd77:{self.tag}::/64")

    @property
    def host_ip6(self) -> str:
        return str(self.subnet6.network_address + 1)

    def node_ip6(self, index: int) -> str:
        """Node i (from 1) gets ::1i (hex), as node01 = fd77:<tag>::11: the IPv4 scheme's last digits."""
        return str(self.subnet6.network_address + 0x10 + index)

    def node_ip(self, index: int) -> str:
        """Node i (from 1) gets .10+i, leaving the low addresses to the host side."""
        addr = self.subnet.network_address + 10 + index
        if addr not in self.subnet or addr >= self.subnet.broadcast_address - 1:
            raise SimError(f"no address left in {self.subnet} for node {index}", hint="use a larger subnet")
        return str(addr)

    # -- lifecycle ---------------------------------------------------------------------------------

    def check_free(self) -> None:
        """Refuse a subnet that this machine already routes (another cluster, a real network)."""
        in_use = [r for r in _ip(["-o", "route", "show", "root", str(self.subnet)]).stdout.splitlines()
                  if not r.startswith("blackhole")]
        if in_use:
            raise SimError(f"subnet {self.subnet} is already routed on this machine: {in_use[0].strip()}",
                           hint="another cluster may be running there; pick another with --subnet or "
                                "ASCEND_SIM_SUBNET")

    def create_hub(self) -> None:
        self.check_free()
        self.ensure_blackhole()
        _ip(["netns", "add", self.hub])
        _ip_batch([
            "link add br0 type bridge",
            "link set lo up",
            "link set br0 up",
            f"addr add {self.gateway_ip}/{self.subnet.prefixlen} dev br0",
        ], netns=self.hub)
        _ip(["link", "add", self.host_if, "type", "veth", "peer", "name", "host0", "netns", self.hub])
        _ip_batch(["link set host0 master br0", "link set host0 up"], netns=self.hub)
        # Nothing that arrives from the cluster may be forwarded by the host, even where ip_forward is on.
        for knob in (f"ipv4/conf/{self.host_if}/forwarding", f"ipv6/conf/{self.host_if}/disable_ipv6"):
            with open(f"/proc/sys/net/{knob}", "w") as fh:
                fh.write("0" if "forwarding" in knob else "1")
        _ip_batch([f"addr add {self.host_ip}/{self.subnet.prefixlen} dev {self.host_if}",
                   f"link set {self.host_if} up"])

    def ensure_blackhole(self) -> None:
        _ip(["route", "replace", "blackhole", str(self.subnet), "metric", str(BLACKHOLE_METRIC)])
        # A cluster run earlier in a smaller subnet inside this one left its blackhole: more specific than
        # this cluster's connected route, it would swallow the packets to the nodes it covers (their sshd
        # never answers). This subnet's own blackhole covers it now.
        routes = _ip(["-o", "route", "show", "root", str(self.subnet)]).stdout
        for inner in blackholes_inside(self.subnet, routes):
            _ip(["route", "del", "blackhole", str(inner), "metric", str(BLACKHOLE_METRIC)], check=False)

    def attach(self, index: int, pid: int) -> None:
        """Give node `index` (PID `pid`) its eth0 on the hub bridge and its address."""
        hub_if = self.node_if(index)
        _ip(["link", "add", hub_if, "netns", self.hub, "type", "veth",
             "peer", "name", "eth0", "netns", str(pid)])
        _ip_batch([f"link set {hub_if} master br0", f"link set {hub_if} up"], netns=self.hub)
        _ip_batch(["link set lo up",
                   f"addr add {self.node_ip(index)}/{self.subnet.prefixlen} dev eth0",
                   "link set eth0 up",
                   f"route add default via {self.gateway_ip} dev eth0"], pid=pid)

    def enable_ipv6(self, nodes: dict[int, int]) -> None:
        """Dual-stack: the host's veth and each node's eth0 (index -> PID) get an address of `subnet6`, as a
        rack whose management network also carries IPv6. No IPv6 default route anywhere and a blackhole for
        the /64 on the host, so nothing leaves the cluster; `nodad`: usable at once (no duplicate
        address detection on a private bridge)."""
        _ip(["-6", "route", "replace", "blackhole", str(self.subnet6), "metric", str(BLACKHOLE_METRIC)])
        with open(f"/proc/sys/net/ipv6/conf/{self.host_if}/disable_ipv6", "w") as fh:
            fh.write("0")
        with open(f"/proc/sys/net/ipv6/conf/{self.host_if}/forwarding", "w") as fh:
            fh.write("0")
        _ip(["addr", "replace", f"{self.host_ip6}/64", "dev", self.host_if, "nodad"])
        for index, pid in nodes.items():
            _sysctl_in(pid, "net.ipv6.conf.eth0.disable_ipv6", "0")
            _ip_batch([f"addr replace {self.node_ip6(index)}/64 dev eth0 nodad"], pid=pid)

    def disable_ipv6(self, nodes: dict[int, int]) -> None:
        """Back to IPv4 only: the addresses enable_ipv6 gave go, IPv6 is off on the host's veth again."""
        for pid in nodes.values():
            _ip_batch([f"addr flush dev eth0 to {self.subnet6}"], pid=pid)
        if os.path.exists(f"/sys/class/net/{self.host_if}"):
            _ip(["addr", "flush", "dev", self.host_if, "to", str(self.subnet6)], check=False)
            with open(f"/proc/sys/net/ipv6/conf/{self.host_if}/disable_ipv6", "w") as fh:
                fh.write("1")

    def destroy(self) -> None:
        """Remove the hub and the host veth (and so the connected route); the blackhole route stays."""
        if self.hub in netns_list():
            _ip(["netns", "del", self.hub])
        if os.path.exists(f"/sys/class/net/{self.host_if}"):
            _ip(["link", "del", self.host_if], check=False)

    def exists(self) -> bool:
        return self.hub in netns_list()

    def shape(self, index: int, pid: int, mbit: float) -> None:
        """Cap node `index` (PID `pid`) at `mbit` Mbit/s each way: a token bucket on its eth0 (what it
        sends) and on its port of the hub's bridge (what it receives), as a port negotiated down does."""
        rate = f"{mbit:g}mbit"
        # 10 ms of the rate per bucket (at least a 9000-byte frame): below the timer tick's worth, tbf
        # cannot reach its rate; far above it, a short burst would pass at the veth's own speed.
        burst = str(max(9000, round(mbit * 1e6 / 8 / 100)))

        def tbf(dev: str) -> list[str]:
            return ["qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", burst,
                    "latency", "100ms"]

        _tc(tbf("eth0"), pid=pid)
        _tc(tbf(self.node_if(index)), netns=self.hub)

    def unshape(self, index: int, pid: int | None) -> None:
        """Undo `shape` (nothing to do where no cap is set)."""
        if pid is not None and "tbf" in _tc(["qdisc", "show", "dev", "eth0"], pid=pid, check=False).stdout:
            _tc(["qdisc", "del", "dev", "eth0", "root"], pid=pid)
        if self.exists() and "tbf" in _tc(["qdisc", "show", "dev", self.node_if(index)], netns=self.hub,
                                          check=False).stdout:
            _tc(["qdisc", "del", "dev", self.node_if(index), "root"], netns=self.hub)

    def shaped(self, pid: int) -> str | None:
        """The rate node PID `pid`'s eth0 is capped at (`tc qdisc show` says it: "200Mbit"), None if none."""
        fields = _tc(["qdisc", "show", "dev", "eth0"], pid=pid, check=False).stdout.split()
        return fields[fields.index("rate") + 1] if "tbf" in fields and "rate" in fields else None


def blackholes_inside(subnet: ipaddress.IPv4Network, routes: str) -> list[ipaddress.IPv4Network]:
    """The simulator's blackholes (`ip -o route show root SUBNET` lines of its metric) strictly inside
    `subnet`."""
    out = []
    for line in routes.splitlines():
        fields = line.split()
        if fields[:1] == ["blackhole"] and len(fields) > 1 and f"metric {BLACKHOLE_METRIC}" in line:
            net = ipaddress.ip_network(fields[1] if "/" in fields[1] else f"{fields[1]}/32", strict=False)
            if net != subnet and net.subnet_of(subnet):
                out.append(net)
    return out


def netns_list() -> list[str]:
    return sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else []


def _ip(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SimError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def _tc(args: list[str], *, pid: int | None = None, netns: str | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["tc", *args]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    if pid:
        cmd = ["nsenter", f"--net=/proc/{pid}/ns/net", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SimError(f"{' '.join(cmd)}: {proc.stderr.strip()}",
                       hint="the host needs tc (iproute2) and the sch_tbf qdisc")
    return proc


def _sysctl_in(pid: int, key: str, value: str) -> None:
    """`key` = `value` in the network namespace of `pid` (its /proc/sys/net is that namespace's)."""
    proc = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "sysctl", "-qw", f"{key}={value}"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimError(f"sysctl {key}={value} in the node of PID {pid}: {proc.stderr.strip()}")


def _ip_batch(lines: list[str], *, netns: str | None = None, pid: int | None = None) -> None:
    cmd = ["ip"]
    if netns:
        cmd += ["-n", netns]
    if pid:
        cmd = ["nsenter", f"--net=/proc/{pid}/ns/net", *cmd]
    proc = subprocess.run([*cmd, "-batch", "-"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SimError(f"{' '.join(cmd)} -batch: {proc.stderr.strip()}")
