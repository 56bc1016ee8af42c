"""The probe catalogue: every command and file ascend-check reads on a node, named once.

Commands depend on the hardware profile (install root, users, checkpoint dir), so the catalogue is
built per profile. Checks name the probes they read; `plan()` batches what the selected checks need.
"""

from __future__ import annotations

import shlex

from ascend_ready.checks.probes import Probe
from ascend_ready.checks.profile import HardwareProfile

__all__ = ["catalog", "plan"]

#: sh loop head over the Huawei (19e5) PCI functions in sysfs: NPUs and their HiSilicon root ports.
#: Builtins only (`read`, `[`): a real host has hundreds of functions and a fork each would add up.
_HUAWEI_FUNCTIONS = (
    "for d in /sys/bus/pci/devices/*; do "
    'v=; read -r v < "$d/vendor" 2>/dev/null; [ "$v" = 0x19e5 ] || continue; '
)

#: The training Python's own view of its packages: version, and per installed distribution its
#: name, version and wheel tags. Python 3.6-compatible, stdlib only (it runs the node's interpreter).
_PY_PACKAGES = r"""
import os, site, sys, sysconfig
print("python " + sys.version.split()[0])
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
seen = set()
for d in dirs:
    if d in seen or not os.path.isdir(d):
        continue
    seen.add(d)
    for entry in sorted(os.listdir(d)):
        if not entry.endswith(".dist-info") or "-" not in entry:
            continue
        name, version = entry[:-10].split("-", 1)
        tags = []
        try:
            with open(os.path.join(d, entry, "WHEEL")) as fh:
                tags = [l.split(":", 1)[1].strip() for l in fh if l.startswith("Tag:")]
        except OSError:
            pass
        print("dist %s %s %s %s" % (name, version, ",".join(tags) or "-", d))
"""


#: The probe's import of torch_npu; torch_npu.npu is where it keeps the device API (torch.npu is its alias).
_TORCH_IMPORT = (
    "import torch, torch_npu; n = torch_npu.npu; print('torch', torch.__version__); "
    "print('torch_npu', torch_npu.__version__); print('npu_available', n.is_available()); "
    "print('device_count', n.device_count() if hasattr(n, 'device_count') else 'unknown')"
)


def _python(python: str, code: str) -> dict[str, object]:
    """Probe fields running `code` with the training interpreter.

    A plain path runs as argv. `~user/...` and globs (`~ascend/venvs/ascend-*/bin/python`: the venv
    the provisioning made when its stack id is unknown here) are expanded by the node's shell, and
    must name exactly one interpreter: two venvs would make the verdict depend on which came first.
    preflight.training_env admits only shell-inert characters in such a path.
    """
    if not (python.startswith("~") or any(c in python for c in "*?[")):
        return {"argv": (python, "-c", code)}
    return {
        "shell": (
            f"set -- {python}; "
            '[ $# -eq 1 ] || { echo "ascend-check: $# interpreters match: $*" >&2; exit 2; }; '
            '[ -x "$1" ] || { echo "ascend-check: no interpreter $1 (set --python or python_env_path)" >&2; '
            "exit 127; }; "
            f'exec "$1" -c {shlex.quote(code)}'
        )
    }


def catalog(profile: HardwareProfile) -> dict[str, Probe]:
    """All probes, with commands resolved for `profile`."""
    root = profile.ascend_root.rstrip("/")
    q = shlex.quote
    libs = " ".join(q(lib) for lib in profile.required_libs)
    probes = [
        # --- NPU
        Probe(
            "npu-smi-info", argv=("npu-smi", "info"), description="main table: health, temp, HBM, processes"
        ),
        Probe("npu-smi-l", argv=("npu-smi", "info", "-l"), description="NPU ids and chips per NPU"),
        Probe(
            "npu-smi-health",
            argv=("npu-smi", "info", "-t", "health", "-i", "{1}", "-c", "{2}"),
            foreach="npu-chip",
            needs=("npu-smi-l",),
            description="health status and error codes per chip",
        ),
        Probe("dev-davinci", shell="ls -1 /dev", description="device nodes (/dev/davinciN)"),
        Probe("lspci", argv=("lspci", "-D", "-nn"), description="PCI functions"),
        # --- PCIe: link attributes of every Huawei function (NPUs and their HiSilicon root ports) in
        # `grep -H` form, and each function's upstream port from the /sys/devices hierarchy.
        Probe(
            "sysfs-pci-link",
            shell=(
                "set --; "
                + _HUAWEI_FUNCTIONS
                + "for a in class device current_link_speed current_link_width max_link_speed max_link_width "
                "aer_dev_correctable aer_dev_nonfatal aer_dev_fatal; do "
                '[ -r "$d/$a" ] && set -- "$@" "$d/$a"; done; done; '
                '[ $# -eq 0 ] || grep -H . "$@"; exit 0'
            ),
            description="PCIe link speed/width and AER counters of Huawei functions (sysfs)",
        ),
        Probe(
            "pci-topology",
            # `cd -P` resolves the /sys/bus link into /sys/devices; its parent is the upstream port.
            shell=(_HUAWEI_FUNCTIONS + 'cd -P "$d" && p=${PWD%/*} && echo "${d##*/} ${p##*/}"; done; exit 0'),
            description="upstream port of each Huawei PCI function",
        ),
        Probe(
            "lspci-vvv",
            argv=("lspci", "-D", "-vvv", "-d", "19e5:"),
            description="PCIe capabilities (fallback)",
        ),
        Probe(
            "dmesg", shell="dmesg 2>/dev/null || journalctl -k -q --no-pager", description="kernel log (AER)"
        ),
        # --- HCCL device NICs
        Probe("hccn-link", argv=("hccn_tool", "-i", "{1}", "-link", "-g"), foreach="davinci"),
        Probe("hccn-net-health", argv=("hccn_tool", "-i", "{1}", "-net_health", "-g"), foreach="davinci"),
        Probe("hccn-ip", argv=("hccn_tool", "-i", "{1}", "-ip", "-g"), foreach="davinci"),
        Probe("hccn-tls", argv=("hccn_tool", "-i", "{1}", "-tls", "-g"), foreach="davinci"),
        Probe("hccn-conf", argv=("cat", "/etc/hccn.conf")),
        Probe(
            "hccn-ping",
            shell=(
                'g=$(sed -n "s/^gateway_$1=//p" /etc/hccn.conf); '
                '[ -n "$g" ] || { echo "no gateway_$1 in /etc/hccn.conf" >&2; exit 2; }; '
                'hccn_tool -i "$1" -ping -g address "$g"'
            ),
            foreach="davinci",
            timeout_s=20,
            description="ping each device's gateway from the device NIC (full tier)",
        ),
        # --- OS
        Probe("thp-enabled", argv=("cat", "/sys/kernel/mm/transparent_hugepage/enabled")),
        Probe("thp-defrag", argv=("cat", "/sys/kernel/mm/transparent_hugepage/defrag")),
        Probe(
            "sysctl",
            # As `sysctl NAME` prints; a key the kernel lacks is left out. `cat`, not `read`: dash reads
            # a byte at a time, and integer /proc/sys files answer a read at an offset with EOF.
            shell=(
                "for k in kernel.numa_balancing vm.max_map_count net.ipv4.ip_local_reserved_ports; do "
                "f=/proc/sys; r=$k; "
                "while :; do f=$f/${r%%.*}; case $r in *.*) r=${r#*.} ;; *) break ;; esac; done; "
                'v=$(cat "$f" 2>/dev/null) && echo "$k = $v"; done'
            ),
        ),
        Probe(
            "user-limits",
            shell=(
                'echo "user $(id -un)"; echo "nofile $(ulimit -H -n) $(ulimit -S -n)"; '
                'echo "memlock $(ulimit -H -l) $(ulimit -S -l)"'
            ),
            as_user=True,
            background=True,
            description="the training user's limits in a login shell",
        ),
        Probe(
            "accounts",
            shell=(
                f"getent passwd {q(profile.driver_user)} {q(profile.training_user)}; "
                f"getent group {q(profile.driver_user)}; exit 0"
            ),
        ),
        Probe("glibc", shell="getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version | head -n 1"),
        Probe(
            "kernel-headers",
            shell=(
                'r=$(uname -r); echo "kernel $r"; '
                "for d in /lib/modules/$r/build /usr/src/kernels/$r /usr/src/linux-headers-$r; "
                'do [ -e "$d/Makefile" ] && echo "headers $d"; done; exit 0'
            ),
        ),
        Probe("disk-free", argv=("df", "-Pk", profile.checkpoint_dir)),
        Probe("shm", argv=("df", "-Pk", "/dev/shm")),
        # The first tool that answers wins; timedatectl fails without systemd (containers).
        Probe(
            "clock",
            shell=(
                "timedatectl show -p NTPSynchronized 2>/dev/null && exit 0; "
                "timedatectl status 2>/dev/null && exit 0; "
                "command -v chronyc >/dev/null 2>&1 && { chronyc tracking; exit $?; }; "
                "command -v ntpstat >/dev/null 2>&1 && { ntpstat; exit $?; }; "
                "echo 'no time sync tool answered (timedatectl, chronyc, ntpstat)'"
            ),
        ),
        # --- versions
        Probe("driver-version", argv=("cat", f"{root}/driver/version.info")),
        Probe("firmware-version", argv=("cat", f"{root}/firmware/version.info")),
        Probe(
            "toolkit-version",
            shell=(
                f"for f in {q(root)}/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info "
                f"{q(root)}/cann/*-linux/ascend_toolkit_install.info; do "
                '[ -f "$f" ] && { echo "$f" >&2; exec cat "$f"; }; done; '
                "echo 'no ascend_toolkit_install.info' >&2; exit 1"
            ),
        ),
        Probe(
            "cann-components",
            shell=(
                # ops (8.5+) / kernels (earlier) leave an install.info beside the toolkit's;
                # nnal leaves one per version.
                f"for f in {q(root)}/ascend-toolkit/latest/*-linux/ascend_kernels_install.info "
                f"{q(root)}/ascend-toolkit/latest/*-linux/ascend_ops_install.info "
                f"{q(root)}/cann/*-linux/ascend_ops_install.info "
                f"{q(root)}/cann/*-linux/ascend_kernels_install.info "
                f"{q(root)}/nnal/atb/*/ascend_nnal_install.info {q(root)}/nnal/atb/latest/version.info; do "
                '[ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 0'
            ),
        ),
        Probe(
            "set-env",
            shell=(
                f"for f in {q(root)}/ascend-toolkit/set_env.sh {q(root)}/cann/set_env.sh "
                f'{q(root)}/nnal/atb/set_env.sh; do [ -f "$f" ] && echo "$f"; done; exit 0'
            ),
        ),
        Probe(
            "user-libs",
            shell=(
                'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; '
                f"for l in {libs}; do f=-; for d in $(echo \"$LD_LIBRARY_PATH\" | tr : ' '); "
                'do [ -e "$d/$l" ] && { f=$d/$l; break; }; done; echo "lib $l $f"; done'
            ),
            as_user=True,
            background=True,
            description="libraries the training user's login environment finds",
        ),
        Probe(
            "python-packages",
            **_python(profile.python, _PY_PACKAGES),
            as_user=True,
            background=True,
            description="the training Python's version and installed distributions with wheel tags",
        ),
        Probe(
            "torch-import",
            **_python(profile.python, _TORCH_IMPORT),
            as_user=True,
            background=True,
            timeout_s=120,
            description="import torch_npu in the training env (full tier)",
        ),
    ]
    return {p.id: p for p in probes}


def plan(profile: HardwareProfile, probe_ids: set[str]) -> list[Probe]:
    """The probes `probe_ids` name plus the ones they need, in catalogue order."""
    table = catalog(profile)
    unknown = probe_ids - set(table)
    if unknown:
        raise KeyError(f"unknown probe(s): {', '.join(sorted(unknown))}")
    wanted = set(probe_ids)
    for pid in probe_ids:
        wanted.update(table[pid].needs)
    return [p for pid, p in table.items() if pid in wanted]
