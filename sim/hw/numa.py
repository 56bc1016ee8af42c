"""The host CPU and NUMA layout a simulated node presents: sysfs node files, `lscpu`, `numactl -H`, each NPU's
NUMA node, and how a binding to presented CPUs lands on the few real CPUs the simulator runs on.

Shape (Atlas 800T/800I A2 hosts: 4 x Kunpeng 920 48-core, 192 CPUs, 8 NUMA nodes of 24 CPUs each):
  - `lscpu` of an Atlas 800I A2 with 8x 910B3 (kvcache-ai/ktransformers#1776: "Kunpeng 920 (192 cores, NUMA 8
    nodes)", NUMA node0 CPU(s) 0-23 ... node6 144-167) and of 910B3 hosts in vllm-project/vllm-ascend#7553
    (BIOS model "HUAWEI Kunpeng 920 5250", 4 sockets x 48 cores, L3 8 instances) and #10504 (util-linux 2.37
    layout, CPU max MHz 2600);
  - `npu-smi info -t topo` CPU Affinity of an 8x 910B host (ArthurChiao's 910B1 notes, ms-swift's 910B3
    capture): 24-CPU ranges, NPUs on nodes 0, 2, 4 and 6 (sim/render/npu_smi.py topo);
  - node distances: the Kunpeng 920 pattern of 12 between the two dies of a socket and 20-24 across sockets
    (Kunpeng BoostKit tuning guides' `numactl -H`); the 4-socket matrix extends that pattern (inferred).

Binding on a host with fewer CPUs than presented (the simulator shares a small machine): presented CPU c of P
maps onto the (c*R//P + k) mod R-th of the R real CPUs the node may use, k the simulated node's index (so
that the first ranks of two simulated nodes do not share one real CPU); a NUMA node's 24 CPUs land on one
real CPU, nodes 0-3 and 4-7 on different ones of two; the simulated `numactl` binds to that set (visible as
Cpus_allowed_list in /proc/PID/status) and records the presented binding in ASCEND_SIM_NUMA for
`numactl --show`. Memory policy is recorded, not applied: the host kernel has one NUMA node.
"""

from __future__ import annotations

import os

#: Kunpeng 920 5250 in an Atlas 800T/800I A2 (see the module docstring for the captures)
KUNPENG_920_4P = {
    "model_name": "Kunpeng-920",
    "bios_model_name": "HUAWEI Kunpeng 920 5250",
    "sockets": 4,
    "cores_per_socket": 48,
    "numa_nodes": 8,
    "max_mhz": 2600,
    # 2 TB across 8 nodes less what firmware and the kernel keep (illustrative, not captured)
    "node_mem_mb": 257560,
}
#: numactl --show / the binding record (inherited by the exec'd command)
BINDING_ENV = "ASCEND_SIM_NUMA"


def host_cpu(state: dict) -> dict | None:
    """The presented host CPU of a node state; None where the profile presents none (the real host's)."""
    return state.get("host_cpu")


def total_cpus(host: dict) -> int:
    return host["sockets"] * host["cores_per_socket"]


def cpus_per_node(host: dict) -> int:
    return total_cpus(host) // host["numa_nodes"]


def node_cpus(host: dict, node: int) -> range:
    n = cpus_per_node(host)
    return range(node * n, (node + 1) * n)


def cpulist(cpus) -> str:
    """The kernel's cpulist spelling of a CPU set: `0-23,48-71`."""
    cpus = sorted(set(cpus))
    parts, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            parts.append(f"{start}-{c}" if c != start else f"{c}")
            start = None
    return ",".join(parts)


def cpumap(host: dict, cpus) -> str:
    """The kernel's cpumap spelling: 32-bit hex words, most significant first, comma separated."""
    mask = sum(1 << c for c in cpus)
    words = (total_cpus(host) + 31) // 32
    return ",".join(f"{(mask >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def distance(host: dict, a: int, b: int) -> int:
    """SLIT distance between NUMA nodes a and b (two dies per socket)."""
    if a == b:
        return 10
    if a // 2 == b // 2:
        return 12
    return 20 + 2 * (a % 2) + 2 * (b % 2)


def npu_node(host: dict, bus_id: str) -> int:
    """NUMA node of the PCIe root complex serving bus `bus_id` (`0000:C1:00.0`): the 256 buses split
    evenly over the nodes (with 8: 0xC1 -> 6, 0x01 -> 0, 0x81 -> 4, 0x41 -> 2, as the captured affinities)."""
    return int(bus_id[5:7], 16) * host["numa_nodes"] // 256


def sysfs_files(host: dict) -> dict[str, str]:
    """/sys/devices/system/node/: relative path -> contents, as the kernel writes them."""
    nodes = f"0-{host['numa_nodes'] - 1}"
    files = {name: nodes + "\n" for name in ("online", "possible", "has_cpu", "has_memory",
                                             "has_normal_memory")}
    for n in range(host["numa_nodes"]):
        cpus = node_cpus(host, n)
        files[f"node{n}/cpulist"] = cpulist(cpus) + "\n"
        files[f"node{n}/cpumap"] = cpumap(host, cpus) + "\n"
        files[f"node{n}/distance"] = " ".join(str(distance(host, n, m))
                                              for m in range(host["numa_nodes"])) + "\n"
    return files


def grep_node_cpulists(host: dict) -> str:
    """What `grep -H . /sys/devices/system/node/node*/cpulist` prints on the presented host."""
    return "".join(f"/sys/devices/system/node/node{n}/cpulist:{cpulist(node_cpus(host, n))}\n"
                   for n in sorted(range(host["numa_nodes"]), key=str))


def lscpu(host: dict) -> str:
    """`lscpu` (util-linux 2.37, the layout of the vllm-ascend#10504 capture) of the presented host."""
    total, n = total_cpus(host), host["numa_nodes"]
    rows = [
        ("Architecture:", "aarch64"), ("CPU op-mode(s):", "64-bit"), ("Byte Order:", "Little Endian"),
        ("CPU(s):", str(total)), ("On-line CPU(s) list:", f"0-{total - 1}"), ("Vendor ID:", "HiSilicon"),
        ("BIOS Vendor ID:", "HiSilicon"), ("Model name:", host["model_name"]),
        ("BIOS Model name:", host["bios_model_name"]), ("Model:", "0"), ("Thread(s) per core:", "1"),
        ("Core(s) per socket:", str(host["cores_per_socket"])), ("Socket(s):", str(host["sockets"])),
        ("Stepping:", "0x1"), ("Frequency boost:", "disabled"),
        ("CPU max MHz:", f"{host['max_mhz']:.4f}"), ("CPU min MHz:", "200.0000"), ("BogoMIPS:", "200.00"),
        ("Flags:", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
                   "fcma dcpop asimddp asimdfhm ssbs"),
        ("L1d cache:", f"{total * 64 // 1024} MiB ({total} instances)"),
        ("L1i cache:", f"{total * 64 // 1024} MiB ({total} instances)"),
        ("L2 cache:", f"{total * 512 // 1024} MiB ({total} instances)"),
        ("L3 cache:", f"{n * 24} MiB ({n} instances)"),
        ("NUMA node(s):", str(n)),
        *[(f"NUMA node{k} CPU(s):", cpulist(node_cpus(host, k))) for k in range(n)],
    ]
    return "".join(f"{key:<38}{value}\n" for key, value in rows)


def numactl_hardware(host: dict) -> str:
    """`numactl -H` (numactl 2.0.x): per node its CPUs, size and free memory, then the distance matrix."""
    n = host["numa_nodes"]
    out = [f"available: {n} nodes (0-{n - 1})"]
    for k in range(n):
        size = host["node_mem_mb"]
        out += [f"node {k} cpus: " + " ".join(str(c) for c in node_cpus(host, k)),
                f"node {k} size: {size} MB", f"node {k} free: {size - 2048 - 97 * k} MB"]
    out.append("node distances:")
    out.append("node " + "".join(f"{k:>4}" for k in range(n)) + " ")
    out += [f"{a:>3}: " + "".join(f"{distance(host, a, b):>4}" for b in range(n)) + " " for a in range(n)]
    return "\n".join(out) + "\n"


def real_cpus(host: dict, presented, allowed: list[int], node_index: int = 0) -> set[int]:
    """The real CPUs standing for `presented` ones: c -> allowed[(c * R // P + k) % R] (see the module)."""
    total, real = total_cpus(host), sorted(allowed)
    return {real[(c * len(real) // total + node_index) % len(real)] for c in presented}


def parse_nodes(text: str, host: dict) -> list[int] | None:
    """numactl's node argument (`2`, `0,2`, `0-3`, `all`) -> nodes; None when one is out of range."""
    if text == "all":
        return list(range(host["numa_nodes"]))
    nodes: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        nodes += range(int(lo), int(hi if sep else lo) + 1)
    return nodes if nodes and all(0 <= k < host["numa_nodes"] for k in nodes) else None


NUMACTL_USAGE = (
    "usage: numactl [--all | -a] [--interleave= | -i <nodes>] [--preferred= | -p <node>]\n"
    "               [--physcpubind= | -C <cpus>] [--cpunodebind= | -N <nodes>]\n"
    "               [--membind= | -m <nodes>] [--localalloc | -l] command args ...\n"
    "       numactl [--show | -s]\n"
    "       numactl [--hardware | -H]\n"
)


def numactl_show(host: dict, environ: dict[str, str]) -> str:
    """`numactl --show` for this process: the presented binding recorded by a numactl above it, else all."""
    record = dict(item.split("=", 1) for item in environ.get(BINDING_ENV, "").split(";") if "=" in item)
    everything = ",".join(str(k) for k in range(host["numa_nodes"]))
    cpunodes = [int(k) for k in record.get("cpunodebind", everything).split(",")]
    memnodes = record.get("membind")
    cpus = sorted(c for k in cpunodes for c in node_cpus(host, k))
    return (f"policy: {'bind' if memnodes else 'default'}\npreferred node: current\n"
            f"physcpubind: {' '.join(map(str, cpus))} \ncpubind: {' '.join(map(str, cpunodes))} \n"
            f"nodebind: {' '.join(map(str, cpunodes))} \n"
            f"membind: {' '.join((memnodes or everything).split(','))} \n")


def numactl(host: dict, args: list[str], environ: dict[str, str], node_index: int = 0
            ) -> tuple[str, int, list[str] | None]:
    """One `numactl` call -> (output, status, the command to exec bound, or None).

    Binds this process's real CPUs (sched_setaffinity, inherited through exec) before returning a command."""
    if args in (["-H"], ["--hardware"]):
        return numactl_hardware(host), 0, None
    if args in (["-s"], ["--show"]):
        return numactl_show(host, environ), 0, None
    cpunodes = memnodes = None
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt, sep, value = args[i].partition("=")
        if not sep:
            if i + 1 >= len(args):
                return NUMACTL_USAGE, 1, None
            i, value = i + 1, args[i + 1]
        nodes = parse_nodes(value, host)
        if nodes is None:
            return f"libnuma: Warning: node argument {value} is out of range\n\n<{value}> is invalid\n" \
                   + NUMACTL_USAGE, 1, None
        if opt in ("--cpunodebind", "-N"):
            cpunodes = nodes
        elif opt in ("--membind", "-m"):
            memnodes = nodes
        else:
            return NUMACTL_USAGE, 1, None
        i += 1
    command = args[i:]
    if not command:
        return NUMACTL_USAGE, 1, None
    record = []
    if cpunodes is not None:
        presented = [c for k in cpunodes for c in node_cpus(host, k)]
        os.sched_setaffinity(0, real_cpus(host, presented, node_allowed_cpus(), node_index))
        record.append("cpunodebind=" + ",".join(map(str, cpunodes)))
    if memnodes is not None:
        record.append("membind=" + ",".join(map(str, memnodes)))
    environ[BINDING_ENV] = ";".join(record)
    return "", 0, command


def node_allowed_cpus() -> list[int]:
    """The real CPUs the whole node may use: those of its PID 1 (a binding above never narrows the map)."""
    try:
        return sorted(os.sched_getaffinity(1))
    except OSError:
        return sorted(os.sched_getaffinity(0))
