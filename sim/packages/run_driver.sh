# Fake NPU driver installer (Ascend-hdk-<product>-npu-driver_<ver>_linux-<arch>.run), POSIX sh.
# Models the flow of Huawei's driver install.sh: flags, user checks, overwrite/upgrade/uninstall,
# /etc/ascend_install.info written before the files, driver/version.info near the end and
# Driver_Install_Status=complete last, exit codes 0 (done), 1 (failed), 2 (installed but the hot reset
# failed: reboot needed). Of the tools the real one demands (check_tools.conf) only lspci and ifconfig
# are checked: the ones minimal OS images lack.
MODULE=Driver
DATE_FMT="%Y-%m-%d %H:%M:%S"
LOGFILE="/var/log/ascend_seclog/ascend_install.log"
. ./run_common.sh
CMDLINE="$*"

install_type=""
modes=0
upgrade=n
uninstall=n
check=n
quiet=n
install_for_all=n
username=""
usergroup=""
input_path=""
for arg in "$@"; do
    case "$arg" in
        --full) install_type=full; modes=$((modes + 1)) ;;
        --run) install_type=run; modes=$((modes + 1)) ;;
        --devel) install_type=devel; modes=$((modes + 1)) ;;
        --docker) install_type=docker; modes=$((modes + 1)) ;;
        --upgrade) upgrade=y; modes=$((modes + 1)) ;;
        --uninstall) uninstall=y ;;
        --check) check=y ;;
        -q | --quiet) quiet=y ;;
        --nox11) ;;
        --install-for-all) install_for_all=y ;;
        --install-username=*) username="${arg#*=}"; input_username=y ;;
        --install-usergroup=*) usergroup="${arg#*=}"; input_usergroup=y ;;
        --install-path=*) input_path="${arg#*=}" ;;
        --help | -h) cat ./help.info; exit 0 ;;
        *) open_log; unknown_param "$arg" ;;
    esac
done

begin_install

if [ "$check" = y ]; then
    # Real --check also runs ver_check.sh; with no firmware installed it only logs and returns 0.
    end_log 0
fi

if [ "$uninstall" = y ] && [ "$modes" -gt 0 ]; then
    say "[ERROR]ERR_NO:0x0004;ERR_DES:version/uninstall/check/boot-server can't use with other parameters."
    end_log 1
fi
if [ "$uninstall" = n ] && [ "$modes" -ne 1 ]; then
    if [ "$modes" -eq 0 ]; then
        say "[ERROR]ERR_NO:0x0004;ERR_DES:param need used with full/run/docker/upgrade/devel."
    else
        say "[ERROR]ERR_NO:0x0004;ERR_DES:only support one type: full/run/docker/devel/boot-server, operation failed!"
    fi
    end_log 1
fi
if [ "${input_username:-n}" = y ] || [ "${input_usergroup:-n}" = y ]; then
    if [ "${input_username:-n}" != y ] || [ "${input_usergroup:-n}" != y ]; then
        say "[ERROR]ERR_NO:0x0004;ERR_DES:Username and usergroup are not specified at the same time."
        say "[ERROR]Please input the right params and try again."
        end_log 1
    fi
    if [ "$upgrade" = y ]; then
        say "[ERROR]ERR_NO:0x0004;ERR_DES:install-username and install-usergroup params need used with full/run/docker/devel."
        end_log 1
    fi
    if [ "$username" = root ] && [ "$install_for_all" = n ]; then
        say "[ERROR]ERR_NO:0x0091;ERR_DES:username not permission for root"
        end_log 1
    fi
    if [ "$usergroup" = root ] && [ "$install_for_all" = n ]; then
        say "[ERROR]ERR_NO:0x0091;ERR_DES:usergroup not permission for root"
        end_log 1
    fi
fi
if [ "$upgrade" = y ] && [ -n "$input_path" ]; then
    say "[ERROR]ERR_NO:0x0004;ERR_DES:install-path param need used with full/run/docker/devel."
    end_log 1
fi

installed_path=$(info_get Driver_Install_Path_Param)
if [ "$uninstall" = y ]; then
    if [ -z "$installed_path" ]; then
        say "[ERROR]ERR_NO:0x0080;ERR_DES:Driver package is not installed on this device, uninstall failed"
        end_log 1
    fi
else
    say "[WARNING]Do not power off or restart the system during the installation/upgrade"
fi

# The run user: explicit flags, else the one recorded by an earlier install, else HwHiAiUser.
if [ -z "$username" ]; then
    username=$(info_get UserName)
    usergroup=$(info_get UserGroup)
    [ -n "$username" ] || username=HwHiAiUser
    [ -n "$usergroup" ] || usergroup=HwHiAiUser
fi
if [ "$upgrade" = y ] && [ "$install_for_all" = n ]; then
    [ "$(info_get Driver_Install_For_All)" = yes ] && install_for_all=y
fi

remove_driver_files() {
    _p="$ROOT$1"
    info_del Driver_Install_Status
    rm -rf "$_p/driver"
    rm -f "$ROOT/usr/local/sbin/npu-smi" "$ROOT/usr/bin/hccn_tool"
}

# set_device_modes OWNER GROUP MODE: the device nodes the driver serves, as its host_sys_init.sh
# (changeDavinciModeOnce) leaves them: the run user and group, 660 (666 --install-for-all). Without the
# driver the simulator keeps them root's (a real node has none then).
# The ids come from the node's own account files ($ROOT's, not the host's, under ASCEND_SIM_FSROOT).
set_device_modes() {
    _uid=$(sed -n "s/^$1:[^:]*:\([0-9]*\):.*/\1/p" "$ROOT/etc/passwd" | head -n 1)
    _gid=$(sed -n "s/^$2:[^:]*:\([0-9]*\):.*/\1/p" "$ROOT/etc/group" | head -n 1)
    [ -n "$_uid" ] && [ -n "$_gid" ] || return 1
    for _dev in "$ROOT"/dev/hisi_hdc "$ROOT"/dev/davinci_manager "$ROOT"/dev/devmm_svm "$ROOT"/dev/davinci[0-9]*; do
        [ -c "$_dev" ] || continue
        chmod "$3" "$_dev" && chown "$_uid:$_gid" "$_dev" || return 1
    done
}

if [ "$uninstall" = y ]; then
    remove_driver_files "$installed_path"
    set_device_modes root root 660
    for key in Driver_Install_Type Driver_Install_Path_Param Driver_Install_For_All Driver_Install_Mode \
        Driver_Install_Status; do
        info_del "$key"
    done
    bump_gen
    op_log Uninstall success
    say "[INFO]Driver package uninstalled successfully! Uninstallation takes effect immediately. "
    end_log 0
fi

if ! user_exists "$username"; then
    say "[ERROR]ERR_NO:0x0091;ERR_DES:$username not exists! Please add $username"
    end_log 1
fi
if ! group_exists "$usergroup"; then
    say "[ERROR]ERR_NO:0x0091;ERR_DES:$usergroup group not exists! Please add $usergroup group"
    end_log 1
fi
if ! user_in_group "$username" "$usergroup"; then
    say "[ERROR]ERR_NO:0x0096;ERR_DES:$usergroup not right! Please check the relatianship of $username and $usergroup"
    end_log 1
fi
say "[INFO]set username and usergroup, $username:$usergroup"

missing=""
for tool in lspci ifconfig; do
    command -v "$tool" > /dev/null 2>&1 || missing="$missing$tool,"
done
if [ -n "$missing" ]; then
    say "[ERROR]The list of missing tools: $missing"
    end_log 1
fi

operation=Install
if [ -n "$installed_path" ]; then
    installed_version=$(version_of "$installed_path/driver/version.info" Version)
    if [ "$installed_version" = none ]; then
        # An install killed before version.info was written: the next run overwrites it from scratch.
        say "[INFO]base version was destroyed or not exist."
    elif [ "$upgrade" = n ] && [ "$quiet" = n ]; then
        ask_continue "[INFO]Driver package has been installed on the path $installed_path, the version is $installed_version, and the version of this package is $PKG_VERSION,do you want to continue?  [y/n] "
        case $? in
            0) ;;
            2) say "[INFO]Stop installation!"; end_log 0 ;;
            *) end_log 1 ;;
        esac
    fi
    [ "$upgrade" = y ] && operation=Upgrade
    remove_driver_files "$installed_path"
fi
if [ "$upgrade" = y ]; then
    install_type=$(info_get Driver_Install_Type)
    [ -n "$install_type" ] || install_type=full
fi

INSTALL_PATH="${input_path:-${installed_path:-/usr/local/Ascend}}"
DRIVER_ROOT="$INSTALL_PATH"
if command -v dkms > /dev/null 2>&1; then
    say "[INFO]driver install type: DKMS"
else
    say "[INFO]driver install type: Direct"
fi

# Real order: /etc/ascend_install.info first, then files, version.info last.
[ -n "$(info_get UserName)" ] || info_set UserName "$username"
[ -n "$(info_get UserGroup)" ] || info_set UserGroup "$usergroup"
info_set Driver_Install_Type "$install_type"
info_set Driver_Install_Path_Param "$INSTALL_PATH"
if [ "$install_for_all" = y ]; then info_set Driver_Install_For_All yes; else info_set Driver_Install_For_All no; fi
[ "$upgrade" = y ] && [ -n "$(info_get Driver_Install_Mode)" ] || info_set Driver_Install_Mode normal

mkdir -p "$ROOT$INSTALL_PATH" || end_log 1
say "[INFO]upgradePercentage:10%"
pause
copy_tree "$PAYLOAD/files" "$ROOT$INSTALL_PATH" || end_log 1
mkdir -p "$ROOT$INSTALL_PATH/driver/script"
cp ./run_common.sh ./run_driver.sh ./package.info ./help.info "$ROOT$INSTALL_PATH/driver/script/"
printf '#!/bin/sh\n# Uninstalls the driver (like the real driver/script/uninstall.sh).\ncd "$(dirname "$0")" && exec sh ./run_driver.sh --uninstall "$@"\n' \
    > "$ROOT$INSTALL_PATH/driver/script/uninstall.sh"
chmod 755 "$ROOT$INSTALL_PATH/driver/script/uninstall.sh"
say "[INFO]upgradePercentage:30%"
pause
mkdir -p "$ROOT/usr/local/sbin" "$ROOT/usr/bin"
cp ./tools/npu-smi "$ROOT/usr/local/sbin/npu-smi" && chmod 755 "$ROOT/usr/local/sbin/npu-smi"
ln -sf "$INSTALL_PATH/driver/tools/hccn_tool" "$ROOT/usr/bin/hccn_tool"
say "[INFO]upgradePercentage:40%"
pause
set_others_access "$ROOT$INSTALL_PATH/driver"
# The tools stay usable by every user, like their real 555 mode.
chmod 755 "$ROOT$INSTALL_PATH/driver" "$ROOT$INSTALL_PATH/driver/tools"
chmod 555 "$ROOT$INSTALL_PATH"/driver/tools/*
say "[INFO]upgradePercentage:90%"
say "[INFO]Waiting for device startup..."
pause
dev_mode=660
[ "$install_for_all" = y ] && dev_mode=666
set_device_modes "$username" "$usergroup" "$dev_mode" || end_log 1
say "[INFO]Device startup success"
cp ./version.info "$ROOT$INSTALL_PATH/driver/version.info" && chmod 444 "$ROOT$INSTALL_PATH/driver/version.info"
say "[INFO]upgradePercentage:100%"
bump_gen
op_log "$operation" success
# The last step of a complete install (custom/driver/common/scripts/install.sh statusUpdate).
[ "$install_type" = docker ] || [ "$install_type" = devel ] || info_set Driver_Install_Status complete

done_word=installed
[ "$operation" = Upgrade ] && done_word=upgraded
if [ "${ASCEND_SIM_HOTRESET:-success}" = success ] || [ "$install_type" = docker ] || [ "$install_type" = devel ]; then
    say "[INFO]Driver package $done_word successfully! The new version takes effect immediately. "
    end_log 0
fi
say "[INFO]Driver package $done_word successfully! Reboot needed for installation/upgrade to take effect! "
end_log 2
