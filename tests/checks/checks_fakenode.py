"""Synthetic snapshots for the check tests: a node's probe outputs rendered by the simulator's own
hardware model and renderers (the byte-faithful ones the simulated nodes serve), OS facts as a healthy
node prints them, and any probe replaced by a real captured sample.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from ascend_ready.checks.catalog import catalog
from ascend_ready.checks.profile import HardwareProfile, load_profile
from ascend_ready.checks.registry import select_checks
from ascend_ready.checks.runner import run_checks
from ascend_ready.checks.snapshot import HostSnapshot, ProbeResult, Snapshot
from ascend_ready.provision.resolver import resolve
from ascend_ready.sim.hw import numa as sim_numa
from ascend_ready.sim.hw.faults import inject_fault
from ascend_ready.sim.hw.simdir import render_dmesg, write_sysfs
from ascend_ready.sim.hw.state import NodeView, initial_state
from ascend_ready.sim.node.tool import npu_smi_run
from ascend_ready.sim.render import chrony, hccn, lspci
from ascend_ready.sim.render.hccn import update_conf

REPO = Path(__file__).resolve().parents[2]
#: what the SDC worker (checks/cluster/sdc_worker.py) printed here, on CPU torch with 2 ranks
SDC_DATA = Path(__file__).resolve().parent / "data" / "sdc"
REAL = REPO / "tests" / "parsers" / "real"
#: `npu-smi info -t topo` of a healthy 8x 910B3 A2 (ms-swift docs; the prompt line above it dropped)
A2_TOPO = REAL / "npu-smi-info-t-topo_910b3-8npu-hccs-prompt_24.1.rc1_ms-swift-doc.txt"
#: an A3's two dies in a container (sglang #30453): the A3 format, no CPU Affinity column, SIO
A3_TOPO = REAL / "npu-smi-info-t-topo_ascend910-93-a3-phyid-sio_container_sglang-30453.txt"

PROFILE_OF = {
    "atlas-800t-a2": "atlas-800t-a2",
    "atlas-800t-a3": "atlas-800t-a3",
    "atlas-300i-duo": "atlas-300i-duo",
}

STACK = resolve(product="910b")

HEALTHY_OS = {
    "thp-enabled": "always madvise [never]\n",
    "thp-defrag": "always defer defer+madvise madvise [never]\n",
    "sysctl": "kernel.numa_balancing = 0\nvm.max_map_count = 65530\n",
    "user-limits": "user root\nnofile 1048576 1048576\nmemlock unlimited unlimited\n",
    "accounts": (
        "root:x:0:0:root:/root:/bin/bash\n"
        "HwHiAiUser:x:1000:1000::/home/HwHiAiUser:/bin/bash\nHwHiAiUser:x:1000:\n"
    ),
    "glibc": "glibc 2.35\n",
    "kernel-headers": "kernel 5.15.0-91-generic\nheaders /lib/modules/5.15.0-91-generic/build\n",
    "disk-free": (
        "Filesystem     1024-blocks      Used Available Capacity Mounted on\n"
        "/dev/nvme0n1p2  3843118080 412345678 3430772402      11% /\n"
    ),
    "shm": (
        "Filesystem     1024-blocks  Used Available Capacity Mounted on\n"
        "tmpfs           792723456     0 792723456       0% /dev/shm\n"
    ),
    "clock": "NTPSynchronized=yes\n",
    # what the simulated node's chronyc prints (sim/render/chrony.py), which the clock-offset probe reads
    "clock-offset": chrony.tracking(True, now=0.0),
    # what the reboot-marker probe prints on a node that owes no reboot (checks/resources/os.py)
    "reboot-marker": "no marker /run/ascend-ready.reboot-required\n",
    # Ubuntu 22.04's own file, as the simulator's Ubuntu node carries it (sim/osfiles/ubuntu2204/SOURCE)
    "os-release": (REPO / "sim/osfiles/ubuntu2204/root/etc/os-release").read_text(),
    "set-env": "/usr/local/Ascend/cann/set_env.sh\n/usr/local/Ascend/ascend-toolkit/set_env.sh\n"
    "/usr/local/Ascend/nnal/atb/set_env.sh\n",
    "user-libs": (
        "LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/driver:/usr/local/Ascend/cann/lib64\n"
        "lib libascendcl.so /usr/local/Ascend/cann/lib64/libascendcl.so\n"
        "lib libhccl.so /usr/local/Ascend/cann/lib64/libhccl.so\n"
        "lib libascend_hal.so /usr/local/Ascend/driver/lib64/driver/libascend_hal.so\n"
    ),
}


def _versions() -> dict[str, str]:
    from ascend_ready.sim.packages import versionfiles as vf

    s = STACK
    site = "/usr/local/lib/python3.10/dist-packages"
    return {
        "driver-version": vf.driver_version_info(s.driver, s.firmware),
        "firmware-version": vf.firmware_version_info(s.firmware, s.driver),
        "toolkit-version": vf.toolkit_install_info(
            s.cann, "aarch64", f"/usr/local/Ascend/cann-{s.cann}/aarch64-linux"
        ),
        "cann-components": (
            "== /usr/local/Ascend/cann/aarch64-linux/ascend_ops_install.info\n"
            + vf.package_install_info(
                "Ascend-cann-910b-ops", s.cann, "aarch64", f"/usr/local/Ascend/cann-{s.cann}"
            )
            + f"== /usr/local/Ascend/nnal/atb/{s.cann}/ascend_nnal_install.info\n"
            + vf.package_install_info(
                "Ascend-cann-nnal", s.cann, "aarch64", f"/usr/local/Ascend/nnal/atb/{s.cann}"
            )
        ),
        "python-packages": (
            f"python 3.10.13\n"
            f"dist torch {s.torch} cp310-cp310-manylinux_2_28_aarch64 {site}\n"
            f"dist torch_npu {s.torch_npu} cp310-cp310-manylinux_2_28_aarch64 {site}\n"
            f"dist numpy 1.26.4 cp310-cp310-manylinux_2_17_aarch64.manylinux2014_aarch64 {site}\n"
        ),
    }


def _sysfs_outputs(state: dict) -> tuple[str, str]:
    """What the sysfs-pci-link and pci-topology probes print for the simulator's PCI tree."""
    attrs = (
        "class",
        "device",
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
        "aer_dev_correctable",
        "aer_dev_nonfatal",
        "aer_dev_fatal",
    )
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
        sysfs = Path(tmp) / "sysfs"
        write_sysfs(state, sysfs)
        bus = sysfs / "bus" / "pci" / "devices"
        link_lines, topo_lines = [], []
        for entry in sorted(bus.iterdir()):
            real = Path(os.path.realpath(entry))
            if (real / "vendor").read_text().strip() != "0x19e5":
                continue
            for attr in attrs:
                path = real / attr
                if path.is_file():
                    for line in path.read_text().splitlines():
                        if line:
                            link_lines.append(f"/sys/bus/pci/devices/{entry.name}/{attr}:{line}")
            topo_lines.append(f"{entry.name} {real.parent.name}")
    return "\n".join(link_lines) + "\n", "\n".join(topo_lines) + "\n"


def device_ips(state: dict) -> dict[int, dict[str, str]]:
    """A2-style dual-plane addressing: device d on 192.(d%4+1).<node>.<d+10>/16, gateway .0.1."""
    node = state["node"]["index"] + 1
    out = {}
    for npu in state["npus"]:
        for chip in npu["chips"]:
            if chip.get("nic") is None:
                continue
            d = chip["logic_id"]
            plane = d % 4 + 1
            out[d] = {
                "address": f"192.{plane}.{node}.{d + 10}",
                "netmask": "255.255.0.0",
                "gateway": f"192.{plane}.0.1",
                "netdetect": f"192.{plane}.0.1",
            }
    return out


def stand_ins(site: Path) -> None:
    """The simulator's stand-in torch and torch_npu packages of STACK under `site`."""
    from ascend_ready.sim.packages.wheels import torch_files, torch_npu_files

    for rel, text in {**torch_files(STACK.torch), **torch_npu_files(STACK.torch_npu)}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)


@cache
def training_env_output() -> str:
    """What the training-env probe prints in this checkout's venv (ascend-ready and its train extra) with
    the stand-in torch_npu beside it, as in a node venv python_env built (the probe's own code, run here)."""
    from ascend_ready.checks.resources.versions import _TRAINING_ENV

    with tempfile.TemporaryDirectory() as tmp:
        stand_ins(Path(tmp))
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": tmp}
        return subprocess.run(
            [sys.executable, "-c", _TRAINING_ENV], env=env, capture_output=True, text=True, check=True
        ).stdout


@cache
def torch_import_output(chips: int) -> str:
    """What the torch-import probe prints with the simulator's stand-in torch/torch_npu wheels on a
    node with `chips` /dev/davinciN (the probe's own code, run here against those packages)."""
    from ascend_ready.checks.resources.versions import _TORCH_IMPORT

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stand_ins(root / "site")
        (root / "fs/dev").mkdir(parents=True)
        for name in ("davinci_manager", "devmm_svm", "hisi_hdc", *(f"davinci{i}" for i in range(chips))):
            (root / "fs/dev" / name).touch()
        (root / "fs/lib").mkdir()
        for lib in ("libhccl.so", "libascendcl.so"):
            (root / "fs/lib" / lib).touch()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(root / "site"),
            "ASCEND_SIM_FSROOT": str(root / "fs"),
            "LD_LIBRARY_PATH": "/lib",
        }
        out = subprocess.run(
            [sys.executable, "-c", _TORCH_IMPORT], env=env, capture_output=True, text=True, check=True
        )
    return out.stdout


def render_topo(
    labels: list[str], link: Callable[[str, str], str], affinity: dict[str, str] | None, legend: str
) -> str:
    """`npu-smi info -t topo` as npu-smi prints it: `\\t   ` then `%-11s` per device (and `CPU Affinity`),
    one `%-11s` row per device, then the legend. The simulator renders no topology yet; this follows
    the two real captures above (tests/checks/test_check_suite_npu.py checks it reproduces them)."""
    head = "\t   " + "".join(f"{label:<11}" for label in labels) + ("CPU Affinity" if affinity else "")
    rows = [
        (
            f"{a:<11}"
            + "".join(f"{'X' if a == b else link(a, b):<11}" for b in labels)
            + (affinity[a] if affinity else "")
        ).rstrip()
        for a in labels
    ]
    return "\n".join([head.rstrip(), *rows]) + "\n\n" + legend


def real_topo_legend(path: Path = A3_TOPO) -> str:
    """The `Legend:` block of a real capture (the A3 one names SIO and HCCS_SW)."""
    text = path.read_text()
    return text[text.index("Legend:") :]


def topo_output(state: dict) -> str | None:
    """What `npu-smi info -t topo` prints on this node (None: inference cards, not read)."""
    family = state["product"]["family"]
    if family == "310p":
        return None
    if family == "910_93":
        chips = [
            (npu["id"], c["phy_id"])
            for npu in state["npus"]
            if npu.get("present", True)
            for c in npu["chips"]
        ]
        npu_of = {f"Phy-ID{phy}": npu for npu, phy in chips}
        labels = list(npu_of)
        return render_topo(
            labels, lambda a, b: "SIO" if npu_of[a] == npu_of[b] else "HCCS_SW", None, real_topo_legend()
        )
    return A2_TOPO.read_text().split("\n", 1)[1]


def machine_identity_output(name: str) -> str:
    """The machine-identity probe's output (checks/resources/identity.py) on machine `name`: its
    /etc/machine-id (32 hex digits, machine-id(5)) and a boot id (a UUID, proc(5)), derived from the name."""
    import hashlib
    import uuid

    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"machine-id {digest[:32]}\nboot-id {uuid.UUID(digest[32:64])}\n"


#: what the torch bandwidth probe (checks/resources/perf_torch.py) prints where ascend-dmi is installed: the
#: echo lines of its shell
TORCH_BW_SKIPPED = ("ascend-check torch-bandwidth v1\n"
                    "skipped: ascend-dmi is installed (its tests measure instead)\n")

#: the ascend-dmi calls of the full tier's performance probes (checks/resources/perf.py), per device
DMI_CALLS = {
    "ascend-dmi-flops": ["-f", "-t", "fp16", "-d", "{d}", "-q"],
    "ascend-dmi-h2d": ["--bw", "-t", "h2d", "-d", "{d}", "-s", "536870912", "--et", "50", "-q"],
    "ascend-dmi-d2h": ["--bw", "-t", "d2h", "-d", "{d}", "-s", "536870912", "--et", "50", "-q"],
    "ascend-dmi-d2d": ["--bw", "-t", "d2d", "-d", "{d}", "-q"],
}


def _ascend_dmi(put, state: dict, logic: list[int]) -> None:
    """What the simulator's ascend-dmi prints for the performance probes (sim/render/ascend_dmi.py)."""
    from ascend_ready.sim.render import ascend_dmi
    from ascend_ready.sim.render.npu_smi import ToolError

    def call(pid: str, args: list[str]) -> None:
        try:
            put(pid, ascend_dmi.run(state, args))
        except ToolError as err:
            put(pid, err.text, rc=err.rc)

    for d in logic:
        for pid, args in DMI_CALLS.items():
            call(f"{pid}.{d}", [a.replace("{d}", str(d)) for a in args])
    call("ascend-dmi-p2p", ["--bw", "-t", "p2p", "-q"])


def fake_host(
    name: str = "node01",
    hardware: str = "atlas-800t-a2",
    *,
    faults: list[tuple[str, dict]] = (),
    outputs: dict[str, str | ProbeResult] | None = None,
    drop: tuple[str, ...] = (),
    index: int = 0,
    profile: HardwareProfile | None = None,
    edit: Callable[[dict], None] | None = None,
) -> HostSnapshot:
    """A host snapshot with every catalogue probe filled; `outputs` replace probe stdout (or whole
    results), `drop` removes probes, `faults` are simulator faults applied to the hardware state and
    `edit` changes that state in place before anything is rendered (e.g. a sensor that reads NA)."""
    state = initial_state(hardware, node_index=index, node_name=name)
    for kind, params in faults:
        state = inject_fault(state, kind, **params)
    if edit is not None:
        edit(state)
    ips = device_ips(state)
    runtime = {str(d): {k: [v, 0] for k, v in vals.items()} for d, vals in ips.items()}
    view = NodeView(
        state, gen=1, runtime=runtime, driver_version=STACK.driver, firmware_version=STACK.firmware
    )
    cat = catalog(profile or load_profile(PROFILE_OF[hardware]))
    probes: dict[str, ProbeResult] = {}

    def put(pid: str, text: str, rc: int = 0, stderr: str = "") -> None:
        base, _, key = pid.partition(".")
        command = cat[base].command_for(key) if key else cat[base].command
        probes[pid] = ProbeResult(command=command, rc=rc, stdout=text, stderr=stderr)

    put("npu-smi-info", npu_smi_run(view, ["info"]))
    put("npu-smi-l", npu_smi_run(view, ["info", "-l"]))
    for npu in state["npus"]:
        if not npu.get("present", True):
            continue
        for chip in npu["chips"]:
            put(
                f"npu-smi-health.{npu['id']}.{chip['chip_id']}",
                npu_smi_run(view, ["info", "-t", "health", "-i", str(npu["id"]), "-c", str(chip["chip_id"])]),
            )
    logic = sorted(c["logic_id"] for n in state["npus"] if n.get("present", True) for c in n["chips"])
    topo = topo_output(state)
    if topo is not None:
        put("npu-smi-topo", topo)
    host_cpu = sim_numa.host_cpu(state)
    put("numa-nodes", sim_numa.grep_node_cpulists(host_cpu) if host_cpu else
        "/sys/devices/system/node/node0/cpulist:0-1\n")  # hardware without a presented host: this one's
    put(
        "dev-davinci",
        "\n".join(
            ["console", "null", *(f"davinci{d}" for d in logic), "davinci_manager", "devmm_svm", "hisi_hdc"]
        )
        + "\n",
    )
    _ascend_dmi(put, state, logic)
    put("lspci", lspci.run(view, ["-D", "-nn"]))
    put("lspci-vvv", lspci.run(view, ["-D", "-vvv", "-d", "19e5:"]))
    link, topo = _sysfs_outputs(state)
    put("sysfs-pci-link", link)
    put("pci-topology", topo)
    put("dmesg", render_dmesg(state))
    for d in logic:
        if d not in ips:
            continue
        for pid, args in (
            ("hccn-link", ["-link", "-g"]),
            ("hccn-net-health", ["-net_health", "-g"]),
            ("hccn-ip", ["-ip", "-g"]),
            ("hccn-tls", ["-tls", "-g"]),
        ):
            res = hccn.run(view, ["-i", str(d), *args])
            put(f"{pid}.{d}", res.text, rc=res.rc)
        res = hccn.run(view, ["-i", str(d), "-ping", "-g", "address", ips[d]["gateway"]])
        put(f"hccn-ping.{d}", res.text, rc=res.rc)
    put(
        "hccn-conf",
        update_conf("", ips) if ips else "",
        rc=0 if ips else 1,
        stderr="" if ips else "cat: /etc/hccn.conf: No such file or directory\n",
    )
    for pid, text in {**HEALTHY_OS, **_versions()}.items():
        put(pid, text)
    put("torch-import", torch_import_output(len(logic)))
    # ascend-dmi is installed (above): the torch bandwidth probe's shell says so and measures nothing
    put("torch-bandwidth", TORCH_BW_SKIPPED)
    put("training-env", training_env_output())
    put("machine-identity", machine_identity_output(name))
    put("npu-sdc", (SDC_DATA / "cpu-2ranks-clean.txt").read_text())
    # what the burn-in probe printed in 5 s on CPU torch, its samples of 2 NPUs from the simulator's
    # renderers (made as test_check_suite_burn_in.py's probe_output, without the fault)
    put("burn-in", (SDC_DATA.parent / "burn-in" / "cpu-2npus-clean.txt").read_text())
    probes["toolkit-version"].stderr = "/usr/local/Ascend/cann/aarch64-linux/ascend_toolkit_install.info\n"
    for pid, value in (outputs or {}).items():
        if isinstance(value, ProbeResult):
            probes[pid] = value
        else:
            put(pid, value)
    for pid in drop:
        probes.pop(pid, None)
    return HostSnapshot(name=name, address=f"10.0.0.{index + 1}", probes=probes)


#: the header line of `df -P -k`, for a disk-free output written by hand
DF_HEADER = "Filesystem 1024-blocks Used Available Capacity Mounted on\n"


def judge(host: HostSnapshot, profile: str | HardwareProfile = "atlas-800t-a2", tier: str = "full",
          select=()) -> dict:
    """Every selected check of `tier` run on one host's snapshot: {check id: CheckResult}."""
    prof = load_profile(profile) if isinstance(profile, str) else profile
    report = run_checks(
        Snapshot(hosts={host.name: host}), {host.name: prof}, select_checks(tier, select=select)
    )
    return {r.check_id: r for r in report.results}


def only(check_id: str, host: HostSnapshot, **kw):
    """The one result of check `check_id` on `host` (judge's keywords)."""
    return judge(host, select=[check_id], **kw)[check_id]
