"""The fake .run installers, run with dash into a scratch root: layouts, version files, refusals, rc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest
from sim_support import wait_for

from .conftest import DRIVER_24, DRIVER_25, FIRMWARE_73, FIRMWARE_78


def keys(text: str) -> list[str]:
    return [line.split("=", 1)[0] for line in text.splitlines()]


def install_driver_and_firmware(node, driver=DRIVER_24, firmware=FIRMWARE_73):
    assert node.run(driver, "--full", "--install-for-all", "--quiet").returncode == 0
    fw = node.run(firmware, "--full", "--quiet")
    assert fw.returncode == 0, fw.stdout


def test_pre85_stack_installs_with_real_layout_and_version_files(node, sample):
    drv = node.run(DRIVER_24, "--full", "--install-for-all")
    assert drv.returncode == 0, drv.stdout + drv.stderr
    lines = drv.stdout.splitlines()
    assert lines[0] == "Verifying archive integrity...  100%   SHA256 checksums are OK. All good."
    assert lines[1] == "Uncompressing ASCEND DRIVER RUN PACKAGE  100%  "
    assert lines[-2].endswith(
        "[INFO]Driver package installed successfully! The new version takes effect immediately. ")
    assert node.read("/usr/local/Ascend/driver/version.info") == (
        "Version=24.1.rc2\nascendhal_version=7.35.19\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\n"
        "prof_version=2.0\ndvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C16SPC002B220\n"
        "compatible_version=[V100R001C29],[V100R001C30],[V100R001C13],[V100R001C15]\n"
        "compatible_version_fw=[7.0.0,7.3.99]\npackage_version=24.1.rc2\n")
    assert keys(node.read("/usr/local/Ascend/driver/version.info")) == keys(
        sample("driver-version.info_23.0.7_mindcluster-faultdiag.txt"))
    assert node.path("/usr/local/sbin/npu-smi").stat().st_mode & 0o111
    # --install-for-all: others get the group's bits
    assert node.path("/usr/local/Ascend/driver/lib64/common/libc_sec.so").stat().st_mode & 0o777 == 0o644
    assert node.read("/var/log/ascend_seclog/operation.log").startswith("Install SUGGESTION root ")
    assert node.read("/var/log/ascend_seclog/operation.log").endswith(
        " 127.0.0.1 Ascend-hdk-910b-npu-driver_24.1.rc2_linux-x86-64.run success install_type=full; "
        "cmdlist=--full --install-for-all.\n")
    assert os.readlink(node.path("/usr/bin/hccn_tool")) == "/usr/local/Ascend/driver/tools/hccn_tool"
    assert node.gen() == 1

    fw = node.run(FIRMWARE_73, "--full")
    assert fw.returncode == 0, fw.stdout
    assert "[INFO]The firmware of [8] chips are successfully upgraded." in fw.stdout
    assert ("[INFO]Firmware package installed successfully! Reboot now or after driver installation for the "
            "installation/upgrade to take effect.") in fw.stdout
    assert node.read("/usr/local/Ascend/firmware/version.info") == (
        "Version=7.3.0.1.231\nfirmware_version=1.0\npackage_version=24.1.rc2\n"
        "compatible_version_drv=[24.1.0,24.1.0.],[24.1.rc2,24.1.rc2.]\n")
    assert keys(node.read("/usr/local/Ascend/firmware/version.info")) == keys(
        sample("firmware-version.info_7.1.0.11.220_mindcluster-faultdiag.txt"))
    assert node.read("/etc/ascend_install.info") == (
        "UserName=HwHiAiUser\nUserGroup=HwHiAiUser\nDriver_Install_Type=full\n"
        "Driver_Install_Path_Param=/usr/local/Ascend\nDriver_Install_For_All=yes\nDriver_Install_Mode=normal\n"
        "Driver_Install_Status=complete\nFirmware_Install_Type=full\nFirmware_Install_Path_Param=/usr/local/Ascend\n")
    assert node.gen() == 2

    tk = node.run("Ascend-cann-toolkit_8.0.0_linux-x86_64.run", "--install", "--install-for-all")
    assert tk.returncode == 0, tk.stdout
    assert "[INFO] Check version matched! driver version 24.1.rc2 satisfies [24.1]" in tk.stdout
    assert "[INFO] Ascend-cann-toolkit install success" in tk.stdout
    assert "Driver:   Installed in /usr/local/Ascend/driver." in tk.stdout
    info = "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info"
    assert os.readlink(node.path("/usr/local/Ascend/ascend-toolkit/latest")) == "8.0.0"
    assert node.read(info) == (
        sample("ascend_toolkit_install.info_8.0.0_vllm-ascend-362.txt").replace("aarch64", "x86_64"))
    set_env = node.read("/usr/local/Ascend/ascend-toolkit/set_env.sh")
    assert "export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest\n" in set_env
    assert "/usr/local/Ascend/driver/lib64/common:/usr/local/Ascend/driver/lib64/driver" in set_env
    assert "export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}\n" in set_env

    kernels = node.run("Ascend-cann-kernels-910b_8.0.0_linux-x86_64.run", "--install", "--quiet")
    assert kernels.returncode == 0, kernels.stdout
    assert "[INFO] Ascend-cann-kernels-910b install success" in kernels.stdout
    kernel_dir = "/usr/local/Ascend/ascend-toolkit/8.0.0/opp/built-in/op_impl/ai_core/tbe/kernel/ascend910b"
    assert node.path(kernel_dir).is_dir()

    nnal = "Ascend-cann-nnal_8.0.0_linux-x86_64.run"
    refused = node.run(nnal, "--install", "--quiet")
    assert refused.returncode == 1
    assert "please source the set_env.sh of the CANN toolkit first" in refused.stdout
    set_env = '. "$ASCEND_SIM_FSROOT/usr/local/Ascend/ascend-toolkit/set_env.sh"'
    sourced = subprocess.run(["sh", "-c", f"{set_env} && sh {node.pkgdir / nnal} --install --quiet"],
                             capture_output=True, text=True, env=node.env, check=False)
    assert sourced.returncode == 0, sourced.stdout
    assert node.path("/usr/local/Ascend/nnal/atb/8.0.0/atb/cxx_abi_1/lib/libatb.so").is_file()
    assert ("export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/8.0.0/atb/cxx_abi_${cxx_abi}"
            in node.read("/usr/local/Ascend/nnal/atb/set_env.sh"))
    log = node.read("/var/log/ascend_seclog/ascend_install.log")
    assert "[Driver]" in log and "[Firmware]" in log
    assert "[Toolkit]" in node.read("/var/log/ascend_seclog/ascend_toolkit_install.log")


def test_cann85_installs_to_versioned_dir_with_cann_entry_point(node, sample):
    install_driver_and_firmware(node, DRIVER_25, FIRMWARE_78)
    tk = node.run("Ascend-cann-toolkit_8.5.0_linux-x86_64.run", "--install", "--quiet")
    assert tk.returncode == 0, tk.stdout
    assert os.readlink(node.path("/usr/local/Ascend/cann")) == "cann-8.5.0"
    expected = sample("ascend_toolkit_install.info_8.5.0-newlayout_mindcluster-doc.txt")
    assert node.read("/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info") == (
        expected.replace("aarch64", "x86_64"))
    set_env = node.read("/usr/local/Ascend/cann/set_env.sh")
    assert "export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann\n" in set_env
    compat = node.read("/usr/local/Ascend/ascend-toolkit/set_env.sh")
    assert compat.endswith(". /usr/local/Ascend/cann/set_env.sh\n")
    assert not node.path("/usr/local/Ascend/ascend-toolkit/latest").exists()
    assert not (node.pkgdir / "Ascend-cann-kernels-910b_8.5.0_linux-x86_64.run").exists()
    ops = node.run("Ascend-cann-910b-ops_8.5.0_linux-x86_64.run", "--install", "--quiet")
    assert ops.returncode == 0, ops.stdout
    assert "[Ops]" in ops.stdout and "Ascend-cann-910b-ops install success" in ops.stdout
    assert "path=/usr/local/Ascend/cann-8.5.0\n" in node.read(
        "/usr/local/Ascend/cann-8.5.0/x86_64-linux/ascend_ops_install.info")


def test_cann85_upgrade_removes_ops_and_refuses_downgrade(node):
    install_driver_and_firmware(node, DRIVER_25, FIRMWARE_78)
    assert node.run("Ascend-cann-toolkit_8.5.0_linux-x86_64.run", "--install", "--quiet").returncode == 0
    assert node.run("Ascend-cann-910b-ops_8.5.0_linux-x86_64.run", "--install", "--quiet").returncode == 0
    up = node.run("Ascend-cann-toolkit_9.0.0_linux-x86_64.run", "--upgrade", "--quiet")
    assert up.returncode == 0, up.stdout
    assert "[INFO] Ascend-cann-toolkit upgrade success" in up.stdout
    assert os.readlink(node.path("/usr/local/Ascend/cann")) == "cann-9.0.0"
    assert not node.path("/usr/local/Ascend/cann-8.5.0").exists()
    assert not node.path("/usr/local/Ascend/cann-9.0.0/x86_64-linux/ascend_ops_install.info").exists()
    down = node.run("Ascend-cann-toolkit_8.5.0_linux-x86_64.run", "--upgrade", "--quiet")
    assert down.returncode == 1
    assert "Downgrade by --upgrade is not supported, please uninstall and then install." in down.stdout
    assert os.readlink(node.path("/usr/local/Ascend/cann")) == "cann-9.0.0"


def test_toolkit_driver_mismatch_warns_with_quiet_and_asks_without(node):
    install_driver_and_firmware(node)  # driver 24.1.rc2; CANN 8.5.0 wants 25.x
    toolkit = "Ascend-cann-toolkit_8.5.0_linux-x86_64.run"
    asked = node.run(toolkit, "--install")  # stdin at EOF: no answer
    assert asked.returncode == 1
    assert "do you want to continue?  [y/n]" in asked.stdout
    assert not node.path("/usr/local/Ascend/cann").exists()
    quiet = node.run(toolkit, "--install", "--quiet")
    assert quiet.returncode == 0, quiet.stdout
    assert ("[WARNING] Check version does not matched! driver version 24.1.rc2 does not satisfy "
            "[25.5 25.3 25.2 25.0]") in quiet.stdout
    assert node.path("/usr/local/Ascend/cann/x86_64-linux/ascend_toolkit_install.info").is_file()
    again = node.run(toolkit, "--install", "--quiet")
    assert again.returncode == 1
    assert "has been already installed" in again.stdout


def test_driver_upgrade_keeps_settings_and_bumps_generation(node):
    install_driver_and_firmware(node)
    up = node.run(DRIVER_25, "--upgrade", "--quiet")
    assert up.returncode == 0, up.stdout
    assert "[INFO]Driver package upgraded successfully! The new version takes effect immediately. " \
        in up.stdout
    assert node.read("/usr/local/Ascend/driver/version.info").startswith("Version=25.5.1\n")
    info = node.read("/etc/ascend_install.info")
    assert "Driver_Install_For_All=yes\n" in info and "Driver_Install_Type=full\n" in info
    assert node.gen() == 3
    user = ("--install-username=HwHiAiUser", "--install-usergroup=HwHiAiUser")
    flags = node.run(DRIVER_25, "--upgrade", *user)
    assert flags.returncode == 1
    assert ("[ERROR]ERR_NO:0x0004;ERR_DES:install-username and install-usergroup params need used with "
            "full/run/docker/devel.") in flags.stdout


def test_driver_reinstall_asks_unless_quiet(node):
    assert node.run(DRIVER_24, "--full").returncode == 0
    # without --install-for-all other users may only run the tools
    assert node.path("/usr/local/Ascend/driver/lib64/common/libc_sec.so").stat().st_mode & 0o007 == 0
    assert node.path("/usr/local/Ascend/driver/tools/hccn_tool").stat().st_mode & 0o777 == 0o555
    declined = node.run(DRIVER_25, "--full", stdin="n\n")
    assert declined.returncode == 0
    assert ("[INFO]Driver package has been installed on the path /usr/local/Ascend, the version is 24.1.rc2, "
            "and the version of this package is 25.5.1,do you want to continue?  [y/n] ") in declined.stdout
    assert "[INFO]Stop installation!" in declined.stdout
    assert node.read("/usr/local/Ascend/driver/version.info").startswith("Version=24.1.rc2\n")
    accepted = node.run(DRIVER_25, "--full", stdin="maybe\ny\n")
    assert accepted.returncode == 0, accepted.stdout
    assert "[ERROR]ERR_NO:0x0002;ERR_DES:input error, please input again!" in accepted.stdout
    assert node.read("/usr/local/Ascend/driver/version.info").startswith("Version=25.5.1\n")
    quiet = node.run(DRIVER_24, "--full", "--quiet")
    assert quiet.returncode == 0 and "do you want to continue" not in quiet.stdout


def test_driver_gives_the_device_nodes_to_its_run_user(node):
    """As the real host_sys_init.sh (changeDavinciModeOnce): user:group from ascend_install.info, 660; 666
    with --install-for-all; back to root when the driver is uninstalled (the simulator keeps the nodes)."""
    names = ["davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc"]
    for name in names:
        path = node.path(f"/dev/{name}")
        path.unlink()
        os.mknod(path, 0o600 | 0o020000, os.makedev(236, 0))

    def modes() -> set[tuple[int, int, int]]:
        return {(st.st_uid, st.st_gid, st.st_mode & 0o777)
                for st in (node.path(f"/dev/{n}").stat() for n in names)}

    assert node.run(DRIVER_24, "--full", "--quiet").returncode == 0
    assert modes() == {(1000, 1000, 0o660)}
    assert node.run(DRIVER_24, "--uninstall").returncode == 0
    assert modes() == {(0, 0, 0o660)}
    assert node.run(DRIVER_24, "--full", "--install-for-all", "--quiet").returncode == 0
    assert modes() == {(1000, 1000, 0o666)}
    assert node.path("/dev/davinci2").stat().st_mode & 0o777 == 0o644  # not a device node: left alone


def test_driver_refuses_missing_user_root_user_and_missing_tools(node):
    node.path("/etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    missing = node.run(DRIVER_24, "--full", "--quiet")
    assert missing.returncode == 1
    assert "[ERROR]ERR_NO:0x0091;ERR_DES:HwHiAiUser not exists! Please add HwHiAiUser" in missing.stdout
    assert not node.path("/etc/ascend_install.info").exists()
    as_root = node.run(DRIVER_24, "--full", "--install-username=root", "--install-usergroup=root")
    assert as_root.returncode == 1
    assert "[ERROR]ERR_NO:0x0091;ERR_DES:username not permission for root" in as_root.stdout
    ok_root = node.run(DRIVER_24, "--full", "--install-username=root", "--install-usergroup=root",
                       "--install-for-all")
    assert ok_root.returncode == 0, ok_root.stdout
    assert "UserName=root\nUserGroup=root\n" in node.read("/etc/ascend_install.info")
    no_tools = node.run(DRIVER_24, "--full", "--quiet", PATH="/usr/bin:/bin")
    assert no_tools.returncode == 1
    assert "[ERROR]The list of missing tools: lspci,ifconfig," in no_tools.stdout


def test_firmware_needs_driver_and_exits_2_when_a_new_image_needs_a_reboot(node):
    no_driver = node.run(FIRMWARE_73, "--full")
    assert no_driver.returncode == 1
    assert "please install the driver package first" in no_driver.stdout
    install_driver_and_firmware(node)
    same = node.run(FIRMWARE_73, "--full", "--quiet")
    assert same.returncode == 0
    upgrade = node.run(FIRMWARE_78, "--upgrade", "--quiet")
    assert upgrade.returncode == 2, upgrade.stdout
    assert "Firmware package installed successfully!" in upgrade.stdout
    assert node.read("/usr/local/Ascend/firmware/version.info").startswith("Version=7.8.0.2.212\n")


def test_driver_hot_reset_failure_exits_2(node):
    res = node.run(DRIVER_24, "--full", "--quiet", ASCEND_SIM_HOTRESET="fail")
    assert res.returncode == 2
    assert ("[INFO]Driver package installed successfully! Reboot needed for installation/upgrade to take "
            "effect! ") in res.stdout


def test_corrupt_or_truncated_package_is_detected(node, tmp_path):
    good = node.run(DRIVER_24, "--check")
    assert good.returncode == 0
    assert good.stdout.splitlines()[0] == (
        "Verifying archive integrity...  100%   SHA256 checksums are OK. All good.")
    assert not node.path("/etc/ascend_install.info").exists()
    data = (node.pkgdir / DRIVER_24).read_bytes()
    corrupt = tmp_path / DRIVER_24
    corrupt.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    node.pkgdir = tmp_path
    check = node.run(DRIVER_24, "--check")
    assert check.returncode == 2
    assert check.stderr.startswith("Error in SHA256 checksums: ")
    assert " is different from " in check.stderr
    install = node.run(DRIVER_24, "--full", "--quiet")
    assert install.returncode == 2
    assert not node.path("/etc/ascend_install.info").exists()
    corrupt.write_bytes(data[:-500])
    truncated = node.run(DRIVER_24, "--full")
    assert truncated.returncode == 2
    assert truncated.stderr == " Unexpected archive size.\n"


def test_killed_driver_install_is_completed_by_the_next_run(node):
    # Each step pauses 3 s: after "30%" come three more pauses before version.info, time enough to kill
    # it there even on a loaded machine. The log line is waited for (bounded), not slept on.
    proc = subprocess.Popen(["sh", str(node.pkgdir / DRIVER_24), "--full", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**node.env, "ASCEND_SIM_INSTALL_DELAY": "3"})
    log = node.path("/var/log/ascend_seclog/ascend_install.log")
    try:
        wait_for(lambda: log.exists() and "upgradePercentage:30%" in log.read_text(), 60,
                 "the installer's 30% line in ascend_install.log")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert "Driver_Install_Path_Param=/usr/local/Ascend\n" in node.read("/etc/ascend_install.info")
    assert node.path("/usr/local/Ascend/driver/tools/hccn_tool").exists()
    assert not node.path("/usr/local/Ascend/driver/version.info").exists()
    assert "Driver_Install_Status" not in node.read("/etc/ascend_install.info")
    rerun = node.run(DRIVER_24, "--full")  # no --quiet: a partial install must not prompt
    assert rerun.returncode == 0, rerun.stdout
    assert "[INFO]base version was destroyed or not exist." in rerun.stdout
    assert node.read("/usr/local/Ascend/driver/version.info").startswith("Version=24.1.rc2\n")
    assert node.read("/etc/ascend_install.info").count("Driver_Install_Status=complete\n") == 1


def test_uninstall_removes_driver_tools_and_toolkit(node):
    install_driver_and_firmware(node)
    assert node.run("Ascend-cann-toolkit_8.0.0_linux-x86_64.run", "--install", "--quiet").returncode == 0
    tk = node.run("Ascend-cann-toolkit_8.0.0_linux-x86_64.run", "--uninstall")
    assert tk.returncode == 0 and "[INFO] Ascend-cann-toolkit uninstall success" in tk.stdout
    assert not node.path("/usr/local/Ascend/ascend-toolkit/8.0.0").exists()
    assert not node.path("/usr/local/Ascend/ascend-toolkit/latest").is_symlink()
    assert not node.path("/usr/local/Ascend/ascend-toolkit/set_env.sh").exists()
    before = node.gen()
    script = node.path("/usr/local/Ascend/driver/script/uninstall.sh")
    drv = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=node.env, check=False)
    assert drv.returncode == 0, drv.stdout + drv.stderr
    assert "[INFO]Driver package uninstalled successfully! Uninstallation takes effect immediately. " \
        in drv.stdout
    assert not node.path("/usr/local/Ascend/driver").exists()
    assert not node.path("/usr/local/sbin/npu-smi").exists()
    assert not node.path("/usr/bin/hccn_tool").is_symlink()
    assert "Driver_" not in node.read("/etc/ascend_install.info")
    assert node.gen() == before + 1
    again = node.run(DRIVER_24, "--uninstall")
    assert again.returncode == 1
    assert "[ERROR]ERR_NO:0x0080;ERR_DES:Driver package is not installed on this device, uninstall failed" \
        in again.stdout


def test_bad_flags_are_rejected_with_the_vendor_message(node):
    res = node.run(DRIVER_24, "--fulll")
    assert res.returncode == 1
    assert ("[ERROR]ERR_NO:0x0004;ERR_DES: Unrecognized parameters: --fulll. Try './xxx.run --help' for more "
            "information.") in res.stdout
    none = node.run(DRIVER_24, "--quiet")
    assert none.returncode == 1
    assert "[ERROR]ERR_NO:0x0004;ERR_DES:param need used with full/run/docker/upgrade/devel." in none.stdout


@pytest.mark.skipif(shutil.which("busybox") is None, reason="busybox is not installed")
def test_installers_run_under_busybox_ash_and_applets(node, tmp_path):
    bb = tmp_path / "busybox"
    bb.mkdir()
    applets = subprocess.run(["busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        (bb / applet).symlink_to(shutil.which("busybox"))
    fakebin = node.env["PATH"].split(":")[0]
    node.env["PATH"] = f"{bb}:{fakebin}"  # sh, sed, tar, sha256sum... all busybox
    for package, flags in ((DRIVER_25, ("--full", "--install-for-all")), (FIRMWARE_78, ("--full",)),
                           ("Ascend-cann-toolkit_8.5.0_linux-x86_64.run", ("--install", "--quiet")),
                           ("Ascend-cann-910b-ops_8.5.0_linux-x86_64.run", ("--install", "--quiet"))):
        res = node.run(package, *flags)
        assert res.returncode == 0, f"{package}: {res.stdout}{res.stderr}"
    assert node.read("/usr/local/Ascend/driver/version.info").startswith("Version=25.5.1\n")
    assert node.read("/usr/local/Ascend/firmware/version.info").startswith("Version=7.8.0.2.212\n")
    assert os.readlink(node.path("/usr/local/Ascend/cann")) == "cann-8.5.0"
    assert node.path("/usr/local/Ascend/driver/lib64/common/libc_sec.so").stat().st_mode & 0o777 == 0o644
    assert node.gen() == 2


def test_an_upgrade_sets_the_modes_from_its_own_flags_and_chmod_o_g_repairs_it(node):
    """Issue 25: the real upgrade takes its modes from the flags it is given (CANN's opp_upgrade.sh: 750/640
    without is_for_all, 755/644 with it), not from the install it replaces: an --upgrade without
    --install-for-all leaves the new tree closed to other users; the cann role passes the flag on upgrade
    and repairs a tree an earlier upgrade left closed with the same `chmod -R -c o=g` it runs."""
    install_driver_and_firmware(node, DRIVER_25, FIRMWARE_78)
    tk = node.run("Ascend-cann-toolkit_8.5.0_linux-x86_64.run", "--install", "--install-for-all", "--quiet")
    assert tk.returncode == 0, tk.stdout
    set_env = "/usr/local/Ascend/cann/set_env.sh"
    assert node.path(set_env).stat().st_mode & 0o777 == 0o644
    up = node.run("Ascend-cann-toolkit_9.0.0_linux-x86_64.run", "--upgrade", "--quiet")
    assert up.returncode == 0, up.stdout
    assert node.path(set_env).stat().st_mode & 0o777 == 0o640
    assert node.path("/usr/local/Ascend/cann-9.0.0").stat().st_mode & 0o777 == 0o750
    # the role's repair (roles/cann/tasks/main.yml), on the trees it names (_cann_shared_trees)
    trees = [str(node.path("/usr/local/Ascend/cann")) + "/"] * 2  # home and set_env.sh's dir: the entry point
    fixed = subprocess.run(["chmod", "-R", "-c", "o=g", *trees], capture_output=True, text=True)
    assert fixed.returncode == 0 and fixed.stdout  # it says what it changed: the task reports a change
    assert node.path(set_env).stat().st_mode & 0o777 == 0o644
    assert node.path("/usr/local/Ascend/cann-9.0.0").stat().st_mode & 0o777 == 0o755
    again = subprocess.run(["chmod", "-R", "-c", "o=g", *trees], capture_output=True, text=True)
    assert again.stdout == ""  # a second run changes nothing
    # an upgrade given --install-for-all (what the role passes now) keeps the tree open
    up = node.run("Ascend-cann-toolkit_9.0.0_linux-x86_64.run", "--upgrade", "--install-for-all", "--quiet")
    assert up.returncode == 0, up.stdout
    assert node.path(set_env).stat().st_mode & 0o777 == 0o644


TOOLBOX = "Ascend-mindx-toolbox_7.3.0_linux-x86_64.run"


def test_the_toolbox_installs_ascend_dmi_under_its_release_with_latest_and_set_env(node):
    """The MindCluster ToolBox (matrix `toolbox:`): `--install --quiet` as the toolbox role runs it; the
    release under toolbox/<ver>, `latest` pointing at it, set_env.sh putting ascend-dmi on PATH; the same
    release again replaces it; an unknown flag and a run with neither mode are refused."""
    assert node.run(TOOLBOX, "--check").returncode == 0
    res = node.run(TOOLBOX, "--install", "--quiet")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[INFO] Ascend-mindx-toolbox_7.3.0 install success" in res.stdout
    dmi = node.path("/usr/local/Ascend/toolbox/7.3.0/Ascend-DMI/bin/ascend-dmi")
    assert dmi.is_file() and dmi.stat().st_mode & 0o111
    assert os.readlink(node.path("/usr/local/Ascend/toolbox/latest")) == "7.3.0"
    assert node.read("/usr/local/Ascend/toolbox/set_env.sh") == (
        'export PATH="/usr/local/Ascend/toolbox/latest/Ascend-DMI/bin:$PATH"\n')
    info = node.read("/usr/local/Ascend/toolbox/7.3.0/ascend_tool_box_install.info")
    assert keys(info) == ["version", "arch", "os", "path", "build", "a500", "a200", "a200isoc"]
    assert "path=/usr/local/Ascend/toolbox/7.3.0\n" in info
    assert "build=Ascend-mindx-toolbox_7.3.0-x86_64\n" in info
    assert node.run(TOOLBOX, "--install", "--quiet").returncode == 0 and dmi.is_file()
    bad = node.run(TOOLBOX, "--install", "--full")
    assert bad.returncode == 1 and "Unrecognized parameters: --full" in bad.stdout
    assert node.run(TOOLBOX, "--quiet").returncode == 1
    gone = node.run(TOOLBOX, "--uninstall", "--quiet")
    assert gone.returncode == 0 and not dmi.exists()
    assert not node.path("/usr/local/Ascend/toolbox/latest").exists()
