"""Software-stack resources: driver and firmware version files, the CANN toolkit and its components,
set_env.sh, and the training user's environment (Python packages, libraries, the torch_npu import),
each with the probe it runs. Toolkit layouts (ascend-toolkit/ <= 8.3, cann/ 8.5+) are handled here.
"""

from __future__ import annotations

import shlex
from functools import cached_property

from ascend_ready.checks.parsers import cann_python as parsed
from ascend_ready.checks.parsers.version_info import (
    CannPackageInfo,
    DriverVersionInfo,
    FirmwareVersionInfo,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_toolkit_install_info,
)
from ascend_ready.checks.profile import HardwareProfile
from ascend_ready.checks.resources.base import Resource, profile_probe

__all__ = [
    "CannComponents",
    "DriverVersion",
    "FirmwareVersion",
    "PythonPackages",
    "SetEnv",
    "Toolkit",
    "TorchImport",
    "TrainingEnv",
    "UserLibs",
]

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


#: What the training job imports (training/; ascend-ready's train extra, torch_npu on NPUs): found on the
#: interpreter's path without importing them (find_spec: milliseconds, where importing transformers takes
#: seconds), then ascend_ready itself, whose package is import-free, for its version. Python 3.6+ stdlib.
TRAINING_MODULES = ("ascend_ready", "torch", "torch_npu", "transformers", "trl", "accelerate", "peft",
                    "datasets", "tensorboard", "matplotlib")
#: The distributions whose versions versions.training_env judges against the training set of the torch
#: line (provision/training_sets.yml): torch, then the set's packages (importlib.metadata, Python 3.8+).
TRAINING_DISTS = ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "deepspeed")
_TRAINING_ENV = (
    "import sys\n"
    "from importlib.util import find_spec\n"
    "print('executable ' + sys.executable)\n"
    f"for name in {TRAINING_MODULES!r}:\n"
    "    try:\n"
    "        found = find_spec(name) is not None\n"
    "    except (ImportError, ValueError):\n"
    "        found = False\n"
    "    print('module %s %s' % (name, 'found' if found else 'missing'))\n"
    "try:\n"
    "    import ascend_ready\n"
    "    print('ascend_ready ' + ascend_ready.__version__)\n"
    "except Exception as exc:\n"
    "    print('ascend_ready - %s: %s' % (type(exc).__name__, ' '.join(str(exc).split())))\n"
    "try:\n"
    "    from importlib import metadata\n"
    "except ImportError:\n"
    "    metadata = None\n"
    f"for name in {TRAINING_DISTS!r}:\n"
    "    try:\n"
    "        print('dist %s %s' % (name, metadata.version(name)))\n"
    "    except Exception:\n"
    "        print('dist %s -' % name)\n"
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


def _root(profile: HardwareProfile) -> str:
    return shlex.quote(profile.ascend_root.rstrip("/"))


@profile_probe("driver-version")
def DRIVER_VERSION(profile: HardwareProfile) -> dict:
    return {"argv": ("cat", f"{profile.ascend_root.rstrip('/')}/driver/version.info")}


@profile_probe("firmware-version")
def FIRMWARE_VERSION(profile: HardwareProfile) -> dict:
    return {"argv": ("cat", f"{profile.ascend_root.rstrip('/')}/firmware/version.info")}


@profile_probe("toolkit-version")
def TOOLKIT_VERSION(profile: HardwareProfile) -> dict:
    root = _root(profile)
    return {
        "shell": (
            f"for f in {root}/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info "
            f"{root}/cann/*-linux/ascend_toolkit_install.info; do "
            '[ -f "$f" ] && { echo "$f" >&2; exec cat "$f"; }; done; '
            "echo 'no ascend_toolkit_install.info' >&2; exit 1"
        )
    }


@profile_probe("cann-components")
def CANN_COMPONENTS(profile: HardwareProfile) -> dict:
    root = _root(profile)
    return {
        "shell": (
            # ops (8.5+) / kernels (earlier) leave an install.info beside the toolkit's;
            # nnal leaves one per version.
            f"for f in {root}/ascend-toolkit/latest/*-linux/ascend_kernels_install.info "
            f"{root}/ascend-toolkit/latest/*-linux/ascend_ops_install.info "
            f"{root}/cann/*-linux/ascend_ops_install.info "
            f"{root}/cann/*-linux/ascend_kernels_install.info "
            f"{root}/nnal/atb/*/ascend_nnal_install.info {root}/nnal/atb/latest/version.info; do "
            '[ -f "$f" ] && { echo "== $f"; cat "$f"; }; done; exit 0'
        )
    }


@profile_probe("set-env")
def SET_ENV(profile: HardwareProfile) -> dict:
    root = _root(profile)
    return {
        "shell": (
            f"for f in {root}/ascend-toolkit/set_env.sh {root}/cann/set_env.sh "
            f'{root}/nnal/atb/set_env.sh; do [ -f "$f" ] && echo "$f"; done; exit 0'
        )
    }


@profile_probe("user-libs")
def USER_LIBS(profile: HardwareProfile) -> dict:
    libs = " ".join(shlex.quote(lib) for lib in profile.required_libs)
    return {
        "shell": (
            'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; '
            f"for l in {libs}; do f=-; for d in $(echo \"$LD_LIBRARY_PATH\" | tr : ' '); "
            'do [ -e "$d/$l" ] && { f=$d/$l; break; }; done; echo "lib $l $f"; done'
        ),
        "as_user": True,
        "background": True,
        "description": "libraries the training user's login environment finds",
    }


def _in_training_env(profile: HardwareProfile, code: str, description: str, **extra) -> dict:
    """A probe running `code` with the training interpreter, as the training user, in the background."""
    return {**_python(profile.python, code), "as_user": True, "background": True, "description": description,
            **extra}


@profile_probe("python-packages")
def PYTHON_PACKAGES(profile: HardwareProfile) -> dict:
    return _in_training_env(profile, _PY_PACKAGES,
                            "the training Python's version and installed distributions with wheel tags")


@profile_probe("torch-import")
def TORCH_IMPORT(profile: HardwareProfile) -> dict:
    return _in_training_env(profile, _TORCH_IMPORT, "import torch_npu in the training env (full tier)",
                            timeout_s=120)


@profile_probe("training-env")
def TRAINING_ENV(profile: HardwareProfile) -> dict:
    return _in_training_env(profile, _TRAINING_ENV,
                            "the training interpreter, the modules the job imports, ascend-ready's version")


class DriverVersion(Resource):
    """`<ascend_root>/driver/version.info`."""

    probes = (DRIVER_VERSION,)

    @cached_property
    def info(self) -> DriverVersionInfo | None:
        """None when the driver is not installed (no version file)."""
        text = self.host.file("driver-version")
        return None if text is None else parse_driver_version_info(text)


class FirmwareVersion(Resource):
    """`<ascend_root>/firmware/version.info`."""

    probes = (FIRMWARE_VERSION,)

    @cached_property
    def info(self) -> FirmwareVersionInfo | None:
        """None when the firmware is not installed (no version file)."""
        text = self.host.file("firmware-version")
        return None if text is None else parse_firmware_version_info(text)


class Toolkit(Resource):
    """The CANN toolkit's `ascend_toolkit_install.info`, in either layout."""

    probes = (TOOLKIT_VERSION,)

    @cached_property
    def installed(self) -> tuple[CannPackageInfo, str] | None:
        """(its install info, the file it came from), or None when no toolkit is installed."""
        res = self.host.result("toolkit-version")
        if res.rc == 1 and "no ascend_toolkit_install.info" in res.stderr:
            return None
        return parse_toolkit_install_info(self.host.stdout("toolkit-version")), res.stderr.strip()


class CannComponents(Resource):
    """ops/kernels and NNAL install files: component -> version and file."""

    probes = (CANN_COMPONENTS,)

    @cached_property
    def components(self) -> dict[str, parsed.CannComponent]:
        return parsed.parse_cann_components(self.host.stdout("cann-components")).components


class SetEnv(Resource):
    """The set_env.sh scripts of the toolkit and NNAL under the install root."""

    probes = (SET_ENV,)

    @cached_property
    def scripts(self) -> list[str]:
        return parsed.parse_set_env(self.host.stdout("set-env")).paths


class PythonPackages(Resource):
    """The training interpreter's version and installed distributions (with wheel tags)."""

    probes = (PYTHON_PACKAGES,)

    @cached_property
    def packages(self) -> parsed.PythonPackagesOutput:
        return parsed.parse_python_packages(self.host.stdout("python-packages"))


class UserLibs(Resource):
    """The training user's LD_LIBRARY_PATH and where it finds the required libraries."""

    probes = (USER_LIBS,)

    @cached_property
    def libs(self) -> parsed.UserLibsOutput:
        return parsed.parse_user_libs(self.host.stdout("user-libs"))


class TorchImport(Resource):
    """`import torch, torch_npu` in the training interpreter: versions, NPU availability, devices."""

    probes = (TORCH_IMPORT,)

    @cached_property
    def text(self) -> str:
        return self.host.stdout("torch-import")

    @cached_property
    def result(self) -> parsed.TorchImportOutput:
        return parsed.parse_torch_import(self.text)


class TrainingEnv(Resource):
    """The training interpreter as the job meets it: its path, which of the job's modules it finds, and
    the version of ascend-ready it imports."""

    probes = (TRAINING_ENV,)

    @cached_property
    def env(self) -> parsed.TrainingEnvOutput:
        return parsed.parse_training_env(self.host.stdout("training-env"))
