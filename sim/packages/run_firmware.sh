# Fake NPU firmware installer (Ascend-hdk-<product>-npu-firmware_<ver>.run), POSIX sh.
# Needs an installed driver (its upgrade tools flash the chips), reuses the driver's run user, and exits
# 2 when it replaced a different firmware version: the new image runs only after a reboot. Ascend's own
# deployer accepts rc 0 and 2 from firmware runs (ascend-deployer playbooks/install/task_firmware.yml).
MODULE=Firmware
DATE_FMT="%Y-%m-%d %H:%M:%S"
LOGFILE="/var/log/ascend_seclog/ascend_install.log"
. ./run_common.sh
CMDLINE="$*"

modes=0
full=n
upgrade=n
uninstall=n
check=n
quiet=n
for arg in "$@"; do
    case "$arg" in
        --full) full=y; modes=$((modes + 1)) ;;
        --upgrade) upgrade=y; modes=$((modes + 1)) ;;
        --uninstall) uninstall=y ;;
        --check) check=y ;;
        -q | --quiet) quiet=y ;;
        --nox11) ;;
        --help | -h) cat ./help.info; exit 0 ;;
        *) open_log; unknown_param "$arg" ;;
    esac
done

begin_install
[ "$check" = y ] && end_log 0

if [ "$uninstall" = y ] && [ "$modes" -gt 0 ]; then
    say "[ERROR]ERR_NO:0x0004;ERR_DES:version/uninstall/check can't use with other parameters."
    end_log 1
fi
if [ "$uninstall" = n ] && [ "$modes" -ne 1 ]; then
    say "[ERROR]ERR_NO:0x0004;ERR_DES:param need used with full/upgrade."
    end_log 1
fi

fw_path=$(info_get Firmware_Install_Path_Param)
if [ "$uninstall" = y ]; then
    if [ -z "$fw_path" ]; then
        say "[ERROR]ERR_NO:0x0080;ERR_DES:Firmware package is not installed on this device, uninstall failed"
        end_log 1
    fi
    rm -rf "$ROOT$fw_path/firmware"
    info_del Firmware_Install_Type
    info_del Firmware_Install_Path_Param
    bump_gen
    op_log Uninstall success
    say "[INFO]Firmware package uninstalled successfully! Reboot needed for uninstallation to take effect!"
    end_log 0
fi

say "[WARNING]Do not power off or restart the system during the installation/upgrade"
driver_path=$(info_get Driver_Install_Path_Param)
if [ -z "$driver_path" ] || [ "$(version_of "$driver_path/driver/version.info" Version)" = none ]; then
    # Wording modelled: the public corpora show no capture of this refusal.
    say "[ERROR]The driver package is not installed, please install the driver package first."
    end_log 1
fi
chips=$(ls -d "$ROOT"/dev/davinci[0-9]* 2>/dev/null | wc -l | tr -d " ")
if [ "$chips" -eq 0 ]; then
    say "[ERROR]No NPU chip is found, the firmware cannot be upgraded."
    end_log 1
fi

INSTALL_PATH="${fw_path:-$driver_path}"
DRIVER_ROOT="$driver_path"
old_version=$(version_of "$INSTALL_PATH/firmware/version.info" Version)
say "[INFO]upgradePercentage: 0%"
pause
rm -rf "$ROOT$INSTALL_PATH/firmware"
copy_tree "$PAYLOAD/files" "$ROOT$INSTALL_PATH" || end_log 1
mkdir -p "$ROOT$INSTALL_PATH/firmware/script"
cp ./run_common.sh ./run_firmware.sh ./package.info ./help.info "$ROOT$INSTALL_PATH/firmware/script/"
printf '#!/bin/sh\n# Uninstalls the firmware (like the real firmware/script/uninstall.sh).\ncd "$(dirname "$0")" && exec sh ./run_firmware.sh --uninstall "$@"\n' \
    > "$ROOT$INSTALL_PATH/firmware/script/uninstall.sh"
chmod 755 "$ROOT$INSTALL_PATH/firmware/script/uninstall.sh"
say "[INFO]upgradePercentage: 90%"
pause
cp ./version.info "$ROOT$INSTALL_PATH/firmware/version.info" && chmod 444 "$ROOT$INSTALL_PATH/firmware/version.info"
info_set Firmware_Install_Type full
info_set Firmware_Install_Path_Param "$INSTALL_PATH"
say "[INFO]upgradePercentage: 100%"
say "[INFO]The firmware of [$chips] chips are successfully upgraded."
bump_gen
if [ "$upgrade" = y ]; then op_log Upgrade success; else install_type=full; op_log Install success; fi
say "[INFO]Firmware package installed successfully! Reboot now or after driver installation for the installation/upgrade to take effect."
if [ "$old_version" != none ] && [ "$old_version" != "$PKG_VERSION" ]; then
    end_log 2
fi
end_log 0
