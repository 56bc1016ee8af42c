"""Builds the simulator's package directory: fake Ascend `.run` installers, stand-in wheels, SHA256SUMS.

Installer behaviour is modelled on public sources (cited where used):
- flow, messages, /etc/ascend_install.info keys and exit codes of the driver installer:
  github.com/verylucky01/driver @ e29d066, scripts/package/driver/common/scripts/install.sh and
  run_driver_install.sh (Huawei's open-sourced driver package scripts); its newer custom/driver/common/
  scripts/install.sh adds Driver_Install_Status=complete as the last step and check_tools.conf;
- integrity check messages: Huawei's makeself-header.sh (mindspore-ai/mindspore,
  .../custom_compiler/cmake/util/makeself/makeself-header.sh): "Error in SHA256 checksums: ... is
  different from ...", " Unexpected archive size.", exit 2;
- console transcripts of driver/firmware/toolkit runs (e.g. "Uncompressing ASCEND DRIVER RUN PACKAGE",
  "The firmware of [8] chips are successfully upgraded."): public install write-ups of Atlas 800 A2
  servers, 2023-2025; firmware rc 2 accepted by Ascend/ascend-deployer playbooks/install/task_firmware.yml;
- npu-smi at /usr/local/sbin/npu-smi, hccn_tool at <path>/driver/tools/hccn_tool linked from
  /usr/bin/hccn_tool: verylucky01/driver host_servers_setup.sh and custom_op_config_recover.sh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ascend_ready.errors import ConfigError
from ascend_ready.provision.matrix import load_matrix
from ascend_ready.sim.packages import versionfiles as vf
from ascend_ready.sim.packages import wheels
from ascend_ready.sim.packages.runpkg import Payload, make_run, template

ARCHES = ("aarch64", "x86_64")
DEFAULT_PYTHONS = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11")
NODE_BIN = Path(__file__).resolve().parent.parent / "node" / "bin"
WHEELHOUSE = "wheelhouse"
_MANYLINUX = {"manylinux2014": "2.17", "manylinux2010": "2.12", "manylinux1": "2.5"}
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")


@dataclass(frozen=True)
class Stack:
    """One row of the compatibility matrix, as far as packages go."""

    driver: str
    firmware: str
    cann: str
    torch: str
    torch_npu: str
    #: node Pythons ("3.9") to build wheels for
    pythons: tuple[str, ...] = DEFAULT_PYTHONS
    #: glibc floor of the torch/torch_npu wheels ("2.17" = manylinux2014, "2.28" = manylinux_2_28)
    glibc: str = "2.17"
    #: driver versions (or prefixes: "25.5" matches 25.5.1) this CANN accepts; default: the stack's driver
    compatible_drivers: tuple[str, ...] = ()
    nnal: str = ""
    extra: Mapping[str, object] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Stack:
        """Accept a matrix row. Other keys are kept in `extra` so a whole row can be passed as is."""
        missing = [k for k in ("driver", "firmware", "cann", "torch", "torch_npu") if not d.get(k)]
        if missing:
            raise ConfigError(f"stack {dict(d)!r} lacks {', '.join(missing)}",
                              hint="a stack needs driver, firmware, cann, torch and torch_npu versions")
        pythons = d.get("python", d.get("pythons", DEFAULT_PYTHONS))
        if isinstance(pythons, str):
            pythons = [pythons]
        glibc = str(d.get("glibc", ""))
        manylinux = str(d.get("manylinux", ""))
        if manylinux:
            m = re.fullmatch(r"manylinux_(\d+)_(\d+)", manylinux)
            floor = f"{m.group(1)}.{m.group(2)}" if m else _MANYLINUX.get(manylinux)
            if floor is None:
                raise ConfigError(f"unknown manylinux tag {manylinux!r}",
                                  hint="use manylinux2014 or manylinux_2_NN")
            if glibc and glibc != floor:
                raise ConfigError(f"manylinux {manylinux!r} and glibc {glibc!r} disagree")
            glibc = floor
        compat = d.get("compatible_drivers") or (d["driver"],)
        known = {"driver", "firmware", "cann", "torch", "torch_npu", "python", "pythons", "glibc",
                 "manylinux", "compatible_drivers", "nnal"}
        stack = cls(driver=str(d["driver"]), firmware=str(d["firmware"]), cann=str(d["cann"]),
                    torch=str(d["torch"]), torch_npu=str(d["torch_npu"]),
                    pythons=tuple(str(p) for p in pythons), glibc=glibc or "2.17",
                    compatible_drivers=tuple(str(c) for c in compat), nnal=str(d.get("nnal") or d["cann"]),
                    extra={k: v for k, v in d.items() if k not in known})
        for name in ("driver", "firmware", "cann", "torch", "torch_npu", "nnal"):
            if not _VERSION.fullmatch(getattr(stack, name)):
                raise ConfigError(f"{name} version {getattr(stack, name)!r} is not a version string")
        return stack


def package_names(stack: Stack, arch: str, product: str) -> dict[str, str]:
    """Real file names of the stack's installers, keyed driver/firmware/toolkit/kernels|ops/nnal.

    The names come from provision/matrix.yml's product and layout templates, so the packages are named
    as `ascend_ready.provision.matrix.resolve(...).packages` expects them. A CANN the matrix does not
    record gets the layout of its generation (kernels became `ops` in 8.5, release note 850/releasenote_0001).
    """
    from ascend_ready.provision import matrix as mx  # host side only: pydantic + yaml

    m = mx.load_matrix()
    prod = m.product(product)
    if prod is None:
        raise ConfigError(f"unknown product {product!r}",
                          hint=f"products of provision/matrix.yml: {', '.join(p.id for p in m.products)}")
    release = m.cann_release(stack.cann)
    layout = m.layout(release.layout if release else ("cann-8.5" if vf.cann_at_least(stack.cann, 8, 5)
                                                       else "legacy"))
    # the HDK files spell the arch x86-64, the CANN files x86_64 (matrix.yml, products)
    fields = {"cann": stack.cann, "arch": arch, "hdk_arch": "x86-64" if arch == "x86_64" else arch,
              "driver": stack.driver, "firmware": stack.firmware, "nnal": stack.nnal}
    if layout.op_package == "ops":
        ops = prod.ops_file
    elif release is not None and release.kernels_noarch and prod.kernels_file_noarch:
        ops = prod.kernels_file_noarch
    else:
        ops = prod.kernels_file
    return {
        "driver": prod.driver_file.format(**fields),
        "firmware": prod.firmware_file.format(**fields),
        "toolkit": layout.toolkit_file.format(**fields),
        layout.op_package: ops.format(**fields),
        "nnal": layout.nnal_file.format(**fields),
    }


def _text(files: Mapping[str, str], executable: Iterable[str] = ()) -> Payload:
    exe = set(executable)
    return {path: (content.encode(), path in exe) for path, content in files.items()}


def _package_info(**values: str) -> str:
    return "".join(f"{k}='{v}'\n" for k, v in values.items())


def _help(name: str, flags: Iterable[str]) -> str:
    return f"Usage: ./{name} [options]\nOptions:\n" + "".join(f"  {f}\n" for f in flags)


def _node_tool(name: str) -> tuple[bytes, bool]:
    path = NODE_BIN / name
    if path.is_file():
        return path.read_bytes(), True
    # The hardware part had not written this tool when the packages were built.
    return (f"#!/bin/sh\necho '{name}: not available: the ascend-ready simulator built this driver package "
            f"without sim/node/bin/{name}' >&2\nexit 127\n").encode(), True


def missing_node_tools() -> list[str]:
    """Node tools the driver package would embed as error-printing placeholders."""
    return [t for t in ("npu-smi", "hccn_tool") if not (NODE_BIN / t).is_file()]


def driver_run(stack: Stack, arch: str, product: str) -> bytes:
    name = package_names(stack, arch, product)["driver"]
    files = _text({
        "run_common.sh": template("run_common.sh"),
        "run_driver.sh": template("run_driver.sh"),
        "package.info": _package_info(PKG_KIND="driver", PKG_NAME=name, PKG_VERSION=stack.driver,
                                      PKG_ARCH=arch, PKG_PRODUCT=product),
        "help.info": _help(name, ("--full", "--run", "--devel", "--docker", "--upgrade", "--uninstall",
                                  "--quiet", "--check", "--nox11", "--install-for-all",
                                  "--install-username=<user>", "--install-usergroup=<group>",
                                  "--install-path=<path>")),
        "version.info": vf.driver_version_info(stack.driver, stack.firmware),
        # Stub libraries: enough for LD_LIBRARY_PATH checks to find them.
        "files/driver/lib64/common/libc_sec.so": "ascend-ready simulator stub\n",
        "files/driver/lib64/driver/libascend_hal.so": "ascend-ready simulator stub\n",
        "files/driver/tools/upgrade-tool": ("#!/bin/sh\necho 'upgrade-tool: not modelled by the ascend-ready "
                                            "simulator' >&2\nexit 1\n"),
    }, executable=("files/driver/tools/upgrade-tool",))
    files["tools/npu-smi"] = _node_tool("npu-smi")
    # The MindCluster ToolBox's ascend-dmi, where the toolbox installs it (under the install path, with its
    # set_env.sh putting it on PATH): a real node gets it from Ascend-mindx-toolbox_*.run, the simulator's
    # driver package carries it so a provisioned node has it.
    files["files/toolbox/latest/Ascend-DMI/bin/ascend-dmi"] = _node_tool("ascend-dmi")
    files["files/toolbox/set_env.sh"] = (
        b'export PATH="/usr/local/Ascend/toolbox/latest/Ascend-DMI/bin:$PATH"\n', False)
    files["files/driver/tools/hccn_tool"] = _node_tool("hccn_tool")
    return make_run("ASCEND DRIVER RUN PACKAGE", "run_driver.sh", files)


def toolbox_name(version: str, arch: str) -> str:
    """As Huawei publishes it: Ascend-mindx-toolbox_<version>_linux-<arch>.run (arch x86_64, aarch64)."""
    return f"Ascend-mindx-toolbox_{version}_linux-{arch}.run"


def toolbox_run(version: str, arch: str) -> bytes:
    """The MindCluster ToolBox installer: the simulator's ascend-dmi under <release>/Ascend-DMI/bin."""
    name = toolbox_name(version, arch)
    files = _text({
        "run_common.sh": template("run_common.sh"),
        "run_toolbox.sh": template("run_toolbox.sh"),
        "package.info": _package_info(PKG_KIND="toolbox", PKG_NAME=name, PKG_VERSION=version, PKG_ARCH=arch,
                                      PKG_PRODUCT="all"),
        "help.info": _help(name, ("--check", "--install", "--uninstall", "--quiet", "--nox11", "--help")),
    })
    files["files/Ascend-DMI/bin/ascend-dmi"] = _node_tool("ascend-dmi")
    return make_run("ASCEND MINDX TOOLBOX RUN PACKAGE", "run_toolbox.sh", files)


def firmware_run(stack: Stack, arch: str, product: str) -> bytes:
    name = package_names(stack, arch, product)["firmware"]
    files = _text({
        "run_common.sh": template("run_common.sh"),
        "run_firmware.sh": template("run_firmware.sh"),
        "package.info": _package_info(PKG_KIND="firmware", PKG_NAME=name, PKG_VERSION=stack.firmware,
                                      PKG_ARCH=arch, PKG_PRODUCT=product),
        "help.info": _help(name, ("--full", "--upgrade", "--uninstall", "--quiet", "--check", "--nox11")),
        "version.info": vf.firmware_version_info(stack.firmware, stack.driver),
        f"files/firmware/device/ascend_{product}_device.hpm": "ascend-ready simulator stub image\n",
    })
    return make_run(f"ASCEND-HDK-{product.upper()}-NPU FIRMWARE RUN PACKAGE", "run_firmware.sh", files)


def _cann_payload(kind: str, file_name: str, info: Mapping[str, str], files: Mapping[str, str],
                  last: Mapping[str, str]) -> bytes:
    payload = {
        "run_common.sh": template("run_common.sh"),
        "run_cann.sh": template("run_cann.sh"),
        "package.info": _package_info(PKG_KIND=kind, PKG_FILE=file_name.removesuffix(".run"), **info),
        "help.info": _help(file_name, ("--install", "--upgrade", "--uninstall", "--quiet", "--check",
                                       "--nox11", "--install-for-all", "--install-path=<path>",
                                       "--install-username=<user>", "--install-usergroup=<group>")),
    }
    payload.update({f"files/{p}": c for p, c in files.items()})
    payload.update({f"last/{p}": c for p, c in last.items()})
    return make_run("ASCEND_RUN_PACKAGE", "run_cann.sh", _text(payload))


def cann_runs(stack: Stack, arch: str, product: str, compatible_drivers: Iterable[str]) -> dict[str, bytes]:
    """toolkit, kernels (< 8.5) or ops (>= 8.5) and nnal installers of the stack's CANN."""
    names = package_names(stack, arch, product)
    v = stack.cann
    new_layout = vf.cann_at_least(v, 8, 5)
    # <= 8.3: ascend-toolkit/<ver> + latest link; 8.5: cann-<ver> + `cann` entry point (release note 850).
    tree = f"cann-{v}" if new_layout else f"ascend-toolkit/{v}"
    home = "@ASCEND_ROOT@/cann" if new_layout else "@ASCEND_ROOT@/ascend-toolkit/latest"
    stub = "ascend-ready simulator stub\n"
    toolkit_files = {
        f"{tree}/lib64/libhccl.so": stub,
        f"{tree}/lib64/libascendcl.so": stub,
        f"{tree}/python/site-packages/README": stub,
    }
    env_script = f"{tree}/set_env.sh" if new_layout else "ascend-toolkit/set_env.sh"
    toolkit_files[env_script] = vf.toolkit_set_env(home, arch)
    shared = []
    if new_layout:
        toolkit_files["ascend-toolkit/set_env.sh"] = vf.compat_set_env("@ASCEND_ROOT@/cann/set_env.sh")
        shared.append("ascend-toolkit/set_env.sh")
    else:
        shared.append(env_script)
    info_path = f"{tree}/{arch}-linux/ascend_toolkit_install.info"
    common = {"PKG_VERSION": v, "PKG_ARCH": arch, "PKG_PRODUCT": product,
              "DRIVER_COMPAT": " ".join(compatible_drivers),
              "NO_DOWNGRADE": "y" if new_layout else "n", "REQUIRES": "", "REQUIRES_NAME": "",
              "LINK_NAME": "", "LINK_TARGET": "", "SHARED": "", "ENV_SCRIPT": ""}
    runs = {names["toolkit"]: _cann_payload(
        "toolkit", names["toolkit"],
        {**common, "MODULE": "Toolkit", "PKG_LOG": "toolkit", "PKG_NAME": "Ascend-cann-toolkit",
         "PKG_SUBDIR": tree, "OWNED": tree, "MARKER": info_path, "SHARED": " ".join(shared),
         "LINK_NAME": "cann" if new_layout else "ascend-toolkit/latest",
         "LINK_TARGET": f"cann-{v}" if new_layout else v,
         "ENV_SCRIPT": "cann/set_env.sh" if new_layout else env_script},
        toolkit_files,
        {info_path: vf.toolkit_install_info(v, arch, f"@ASCEND_ROOT@/{tree}/{arch}-linux")})}

    kind = "ops" if "ops" in names else "kernels"
    pkg_name = names[kind].split(f"_{v}_", 1)[0]  # Ascend-cann-910b-ops, Atlas-A3-cann-kernels, ...
    kernel_dir = f"{tree}/opp/built-in/op_impl/ai_core/tbe/kernel/ascend{product}"
    marker = f"{tree}/{arch}-linux/ascend_{kind}_install.info"
    runs[names[kind]] = _cann_payload(
        kind, names[kind],
        {**common, "MODULE": kind.capitalize(), "PKG_LOG": kind, "PKG_NAME": pkg_name,
         "PKG_SUBDIR": kernel_dir,
         "OWNED": f"{kernel_dir} {marker}", "MARKER": marker, "REQUIRES": tree,
         "REQUIRES_NAME": "Ascend-cann-toolkit"},
        {f"{kernel_dir}/README": stub},
        {marker: vf.package_install_info(pkg_name, v, arch, f"@ASCEND_ROOT@/{tree}")})

    atb = f"nnal/atb/{stack.nnal}"
    nnal_files = {f"{atb}/atb/cxx_abi_{abi}/lib/libatb.so": stub for abi in (0, 1)}
    nnal_files["nnal/atb/set_env.sh"] = vf.nnal_set_env(stack.nnal)
    runs[names["nnal"]] = _cann_payload(
        "nnal", names["nnal"],
        {**common, "PKG_VERSION": stack.nnal, "MODULE": "NNAL", "PKG_LOG": "nnal",
         "PKG_NAME": "Ascend-cann-nnal",
         "PKG_SUBDIR": atb, "OWNED": atb, "MARKER": f"{atb}/ascend_nnal_install.info",
         "SHARED": "nnal/atb/set_env.sh"},
        nnal_files,
        {f"{atb}/ascend_nnal_install.info": vf.package_install_info("Ascend-cann-nnal", stack.nnal, arch,
                                                                    f"@ASCEND_ROOT@/{atb}")})
    return runs


def build_wheels(dest: Path, stacks: Iterable[Stack], arch: str) -> list[Path]:
    """torch and torch_npu stand-ins for every stack and node Python, into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    for stack in stacks:
        for python in stack.pythons:
            for name, version, files in (
                    ("torch", stack.torch, wheels.torch_files(stack.torch)),
                    ("torch_npu", stack.torch_npu, wheels.torch_npu_files(stack.torch_npu))):
                path = wheels.build_wheel(dest, name, version, python, stack.glibc, arch, files,
                                          summary=f"ascend-ready simulator stand-in for {name}")
                built[path.name] = path
    return sorted(built.values())


def build_package_dir(dest: Path, stacks: list[Mapping[str, object] | Stack], arch: str = "aarch64",
                      products: Iterable[str] = ("910b",)) -> Path:
    """Write every installer and wheel the stacks need into `dest`, plus SHA256SUMS and packages.json.

    Two stacks sharing a CANN version share its packages; their accepted driver lists are merged.
    """
    if arch not in ARCHES:
        raise ConfigError(f"unknown architecture {arch!r}", hint=f"use one of {', '.join(ARCHES)}")
    parsed = [s if isinstance(s, Stack) else Stack.from_dict(s) for s in stacks]
    if not parsed:
        raise ConfigError("no stack given",
                          hint="pass at least one stack (driver, firmware, cann, torch, torch_npu)")
    products = tuple(products)
    dest.mkdir(parents=True, exist_ok=True)
    compat: dict[str, list[str]] = {}
    for stack in parsed:
        compat.setdefault(stack.cann, [])
        compat[stack.cann] += [c for c in stack.compatible_drivers if c not in compat[stack.cann]]
    runs: dict[str, bytes] = {}
    index = []
    for stack in parsed:
        for product in products:
            runs[package_names(stack, arch, product)["driver"]] = driver_run(stack, arch, product)
            runs[package_names(stack, arch, product)["firmware"]] = firmware_run(stack, arch, product)
            runs.update(cann_runs(stack, arch, product, compat[stack.cann]))
        index.append({"driver": stack.driver, "firmware": stack.firmware, "cann": stack.cann,
                      "torch": stack.torch, "torch_npu": stack.torch_npu, "glibc": stack.glibc,
                      "packages": {p: package_names(stack, arch, p) for p in products}})
    box = load_matrix().toolbox  # the release the matrix offers (the toolbox role installs it)
    if box is not None:
        runs[toolbox_name(box.version, arch)] = toolbox_run(box.version, arch)
    for name, data in runs.items():
        path = dest / name
        path.write_bytes(data)
        path.chmod(0o755)
    wheel_paths = build_wheels(dest / WHEELHOUSE, parsed, arch)
    for entry, stack in zip(index, parsed, strict=True):
        prefixes = (f"torch-{stack.torch}-", f"torch_npu-{stack.torch_npu}-")
        entry["wheels"] = sorted(f"{WHEELHOUSE}/{p.name}" for p in wheel_paths if p.name.startswith(prefixes))
    (dest / "packages.json").write_text(json.dumps({"arch": arch, "stacks": index}, indent=2) + "\n")
    # the manifest exactly as `ascend-matrix manifest` writes it for a real package directory
    from ascend_ready.provision.packages import write_manifest  # host side only: pydantic + yaml

    write_manifest(dest)
    return dest
