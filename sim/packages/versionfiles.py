"""Contents of the version and environment files the fake installers write.

Formats are copied from real files (shared/ascend-samples: driver-version.info, firmware-version.info,
ascend_toolkit_install.info x3). `@ASCEND_ROOT@`/`@DRIVER_ROOT@` are filled in by the installer.
"""

from __future__ import annotations

import re

# innerversion/compatible_version pairs seen in real ascend_toolkit_install.info files (samples above).
_KNOWN_TOOLKIT = {
    "8.0.0": ("V100R001C20SPC001B251",
              "[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19],[V100R001C20]"),
    "8.2.RC1": ("V100R001C22SPC001B231",
                "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]"),
    "8.5.0": ("V100R001C25SPC001B212",
              "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]"),
}
# Driver Innerversion seen in real driver/version.info files (sample; REFERENCE.md §3.3).
_KNOWN_DRIVER_INNER = {"23.0.7": "V100R001C15SPC012B220", "24.1.rc1": "V100R001C15SPC006B220"}
_DRIVER_COMPAT_LIST = "[V100R001C29],[V100R001C30],[V100R001C13],[V100R001C15]"


def _numbers(version: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", version)]


def cann_at_least(version: str, major: int, minor: int) -> bool:
    """True when a CANN version string (8.0.RC3, 8.5.0, 9.0.0-beta.1) is >= major.minor."""
    nums = _numbers(version)
    return ([*nums, 0, 0])[:2] >= [major, minor]


def driver_version_info(driver: str, firmware: str) -> str:
    """driver/version.info. Innerversion is synthetic (V100R001C<major-code>...) for unseen versions."""
    inner = _KNOWN_DRIVER_INNER.get(driver)
    if inner is None:
        nums = [*_numbers(driver), 0, 0, 0]
        inner = f"V100R001C{nums[0] - 8:02d}SPC{nums[2]:03d}B220"
    fw = ([*_numbers(firmware), 0, 0])[:2]
    return (
        f"Version={driver}\n"
        "ascendhal_version=7.35.19\n"
        "aicpu_version=1.0\n"
        "tdt_version=1.0\n"
        "log_version=1.0\n"
        "prof_version=2.0\n"
        "dvppkernels_version=1.1\n"
        "tsfw_version=1.0\n"
        f"Innerversion={inner}\n"
        f"compatible_version={_DRIVER_COMPAT_LIST}\n"
        f"compatible_version_fw=[7.0.0,{fw[0]}.{fw[1]}.99]\n"
        f"package_version={driver}\n"
    )


def firmware_version_info(firmware: str, driver: str) -> str:
    """firmware/version.info; package_version is the HDK (driver) release the firmware ships in."""
    nums = [*_numbers(driver), 0, 0]
    series = f"{nums[0]}.{nums[1]}"
    ranges = [f"[{series}.0,{series}.0.]"]
    if driver != f"{series}.0":
        ranges.append(f"[{driver},{driver}.]")
    return (
        f"Version={firmware}\n"
        "firmware_version=1.0\n"
        f"package_version={driver}\n"
        f"compatible_version_drv={','.join(ranges)}\n"
    )


def toolkit_install_info(cann: str, arch: str, path: str) -> str:
    """<toolkit>/<arch>-linux/ascend_toolkit_install.info; `path` is the <arch>-linux directory."""
    known = _KNOWN_TOOLKIT.get(cann)
    if known is None:
        nums = [*_numbers(cann), 0, 0]
        code = 20 + nums[1] if nums[0] == 8 else 20 + 10 * (nums[0] - 8) + nums[1]
        compat = ",".join(f"[V100R001C{c}]" for c in (15, 18, 19, 20, 21, 23) if c <= code)
        known = (f"V100R001C{code}SPC001B200", compat)
    inner, compat = known
    return (
        "package_name=Ascend-cann-toolkit\n"
        f"version={cann}\n"
        f"innerversion={inner}\n"
        f"compatible_version={compat}\n"
        f"arch={arch}\n"
        "os=linux\n"
        f"path={path}\n"
    )


def package_install_info(package_name: str, version: str, arch: str, path: str) -> str:
    """Install-info of kernels/ops/nnal, shaped like the toolkit's (their real format is unseen)."""
    return (
        f"package_name={package_name}\n"
        f"version={version}\n"
        f"arch={arch}\n"
        "os=linux\n"
        f"path={path}\n"
    )


def toolkit_set_env(home: str, arch: str) -> str:
    """set_env.sh of the toolkit; `home` is ascend-toolkit/latest (<= 8.3) or the 8.5 `cann` entry point."""
    return (
        "# Environment of the CANN toolkit (written by the ascend-ready simulator's fake installer).\n"
        "export LD_LIBRARY_PATH=@DRIVER_ROOT@/driver/lib64:@DRIVER_ROOT@/driver/lib64/common:"
        "@DRIVER_ROOT@/driver/lib64/driver:$LD_LIBRARY_PATH\n"
        f"export ASCEND_TOOLKIT_HOME={home}\n"
        "export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:"
        "${ASCEND_TOOLKIT_HOME}/lib64/plugin/nnengine:"
        f"${{ASCEND_TOOLKIT_HOME}}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/{arch}:$LD_LIBRARY_PATH\n"
        "export PYTHONPATH=${ASCEND_TOOLKIT_HOME}/python/site-packages:"
        "${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe:$PYTHONPATH\n"
        "export PATH=${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/compiler/ccec_compiler/bin:"
        "${ASCEND_TOOLKIT_HOME}/tools/ccec_compiler/bin:$PATH\n"
        "export ASCEND_AICPU_PATH=${ASCEND_TOOLKIT_HOME}\n"
        "export ASCEND_OPP_PATH=${ASCEND_TOOLKIT_HOME}/opp\n"
        "export TOOLCHAIN_HOME=${ASCEND_TOOLKIT_HOME}/toolkit\n"
        "export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}\n"
    )


def compat_set_env(target: str) -> str:
    """ascend-toolkit/set_env.sh kept by CANN 8.5 for old scripts: it sources the new entry point."""
    return (
        "# Kept for scripts written for CANN <= 8.3; CANN 8.5 lives under the `cann` entry point.\n"
        f". {target}\n"
    )


def nnal_set_env(version: str) -> str:
    """nnal/atb/set_env.sh; like the real one it takes --cxx_abi=0|1 (default 1)."""
    return (
        "# Environment of NNAL/ATB (written by the ascend-ready simulator's fake installer).\n"
        "cxx_abi=1\n"
        'case "${1:-}" in --cxx_abi=0) cxx_abi=0 ;; --cxx_abi=1) cxx_abi=1 ;; esac\n'
        f"export ATB_HOME_PATH=@ASCEND_ROOT@/nnal/atb/{version}/atb/cxx_abi_${{cxx_abi}}\n"
        "export LD_LIBRARY_PATH=${ATB_HOME_PATH}/lib:${ATB_HOME_PATH}/examples:$LD_LIBRARY_PATH\n"
        "export PATH=${ATB_HOME_PATH}/bin:$PATH\n"
    )
