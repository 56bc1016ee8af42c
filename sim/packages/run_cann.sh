# Fake CANN installer (toolkit, kernels before 8.5, ops from 8.5, nnal), POSIX sh.
# package.info says which: PKG_KIND, PKG_SUBDIR (the tree it owns under the install path), LINK_NAME/
# LINK_TARGET (ascend-toolkit/latest or the 8.5 `cann` entry point), MARKER (its install-info file),
# REQUIRES (a tree that must exist first), DRIVER_COMPAT (driver versions this CANN supports).
DATE_FMT="%Y%m%d-%H:%M:%S"
. ./run_common.sh
LOGFILE="/var/log/ascend_seclog/ascend_${PKG_LOG}_install.log"

action=""
check=n
quiet=n
install_for_all=n
input_path=""
for arg in "$@"; do
    case "$arg" in
        --install | --full | --devel) action=install ;;
        --upgrade) action=upgrade ;;
        --uninstall) action=uninstall ;;
        --check) check=y ;;
        -q | --quiet) quiet=y ;;
        --nox11 | --pylocal) ;;
        --install-for-all) install_for_all=y ;;
        --install-path=*) input_path="${arg#*=}" ;;
        --install-username=*) username="${arg#*=}" ;;
        --install-usergroup=*) usergroup="${arg#*=}" ;;
        --help | -h) cat ./help.info; exit 0 ;;
        *)
            open_log
            say "[ERROR] Unsupported parameters: $arg"
            exit 1
            ;;
    esac
done

open_log
say "[INFO] LogFile:$LOGFILE"
require_root
if [ -n "${username:-}" ] && ! user_exists "$username"; then
    say "[ERROR] The user ($username) does not exist."
    exit 1
fi
if [ -n "${usergroup:-}" ] && ! group_exists "$usergroup"; then
    say "[ERROR] The group ($usergroup) does not exist."
    exit 1
fi

INSTALL_PATH="${input_path:-/usr/local/Ascend}"
DRIVER_ROOT=$(info_get Driver_Install_Path_Param)
[ -n "$DRIVER_ROOT" ] || DRIVER_ROOT=/usr/local/Ascend

lower() {
    echo "$1" | tr 'A-Z' 'a-z'
}

# version_lt A B: numeric fields compared left to right (8.5.0 < 8.5.2 < 9.0.0).
version_lt() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, /[^0-9]+/); m = split(b, y, /[^0-9]+/)
        for (i = 1; i <= (n > m ? n : m); i++) {
            if (x[i] + 0 < y[i] + 0) exit 0
            if (x[i] + 0 > y[i] + 0) exit 1
        }
        exit 1
    }'
}

# The toolkit reads /etc/ascend_install.info for the driver path and compares the installed driver
# with the versions this CANN supports (wording from hicann ver_check.sh). With --quiet a mismatch is
# only a WARNING and the install goes on.
check_driver() {
    drv_path=$(info_get Driver_Install_Path_Param)
    if [ -z "$drv_path" ]; then
        say "[WARNING] Cannot find the install path of driver."
        return 0
    fi
    drv_version=$(version_of "$drv_path/driver/version.info" Version)
    if [ "$drv_version" = none ]; then
        say "[WARNING] file $drv_path/driver/version.info not exists!"
        return 0
    fi
    for want in $DRIVER_COMPAT; do
        case "$(lower "$drv_version")" in
            "$(lower "$want")" | "$(lower "$want")".*)
                say "[INFO] Check version matched! driver version $drv_version satisfies [$DRIVER_COMPAT]"
                return 0
                ;;
        esac
    done
    say "[WARNING] Check version does not matched! driver version $drv_version does not satisfy [$DRIVER_COMPAT]"
    if [ "$quiet" = y ] || [ "$check" = y ]; then
        return 0
    fi
    ask_continue "[WARNING] The driver version is not compatible with this package, do you want to continue?  [y/n] "
    [ $? -eq 0 ] || exit 1
}

if [ "$check" = y ]; then
    [ "$PKG_KIND" = toolkit ] && check_driver
    say "[INFO] $PKG_NAME check success"
    exit 0
fi
if [ -z "$action" ]; then
    say "[ERROR] Please input one of the parameters: --install, --upgrade, --uninstall."
    exit 1
fi

installed() {
    [ -f "$ROOT$INSTALL_PATH/$MARKER" ]
}

remove_owned() {
    for _p in $OWNED; do
        rm -rf "$ROOT${INSTALL_PATH:?}/${_p:?}"
    done
    if [ -n "$LINK_NAME" ] && [ -L "$ROOT$INSTALL_PATH/$LINK_NAME" ] && [ ! -e "$ROOT$INSTALL_PATH/$LINK_NAME" ]; then
        rm -f "$ROOT$INSTALL_PATH/$LINK_NAME"
    fi
    for _p in $SHARED; do
        # A shared file (set_env.sh) goes with the last tree that used it.
        [ -n "$LINK_NAME" ] && [ -e "$ROOT$INSTALL_PATH/$LINK_NAME" ] && continue
        rm -f "$ROOT$INSTALL_PATH/$_p"
    done
}

say "[INFO] $action start"
if [ "$action" = uninstall ]; then
    if ! installed; then
        say "[ERROR] $PKG_FILE is not installed in $INSTALL_PATH, uninstall failed."
        exit 1
    fi
    remove_owned
    say "[INFO] $PKG_NAME uninstall success"
    exit 0
fi

say "[INFO] The installation path is $INSTALL_PATH."
if [ -n "$REQUIRES" ] && [ ! -d "$ROOT$INSTALL_PATH/$REQUIRES" ]; then
    say "[ERROR] $REQUIRES_NAME is not installed in $INSTALL_PATH/$REQUIRES, please install it first."
    exit 1
fi
if [ "$PKG_KIND" = nnal ] && { [ -z "${ASCEND_HOME_PATH:-}" ] || [ ! -d "$ROOT$ASCEND_HOME_PATH" ]; }; then
    # Wording modelled: the vendor guide requires sourcing the toolkit's set_env.sh before nnal.
    say "[ERROR] Environment variable ASCEND_HOME_PATH is not set or invalid, please source the set_env.sh of the CANN toolkit first."
    exit 1
fi
[ "$PKG_KIND" = toolkit ] && check_driver

if [ "$action" = install ] && installed; then
    say "[ERROR] $PKG_FILE has been already installed in $INSTALL_PATH/$PKG_SUBDIR, please uninstall it first or use --upgrade."
    exit 1
fi
if [ "$action" = upgrade ]; then
    if [ -n "$LINK_NAME" ] && [ -e "$ROOT$INSTALL_PATH/$LINK_NAME" ]; then
        old_dir="$INSTALL_PATH/$(dirname "$LINK_NAME")/$(readlink "$ROOT$INSTALL_PATH/$LINK_NAME")"
        old_version=$(version_of "$old_dir/$PKG_ARCH-linux/ascend_toolkit_install.info" version)
        if [ "$NO_DOWNGRADE" = y ] && [ "$old_version" != none ] && version_lt "$PKG_VERSION" "$old_version"; then
            say "[ERROR] The installed version $old_version is newer than $PKG_VERSION. Downgrade by --upgrade is not supported, please uninstall and then install."
            exit 1
        fi
        # The old tree goes, with the kernels/ops installed into it.
        rm -rf "$ROOT${old_dir:?}"
    elif [ -z "$LINK_NAME" ]; then
        remove_owned
    else
        say "[ERROR] $PKG_NAME is not installed in $INSTALL_PATH, upgrade failed. Please use --install."
        exit 1
    fi
fi

pause
copy_tree "$PAYLOAD/files" "$ROOT$INSTALL_PATH" || exit 1
if [ -n "$LINK_NAME" ]; then
    ln -sfn "$LINK_TARGET" "$ROOT$INSTALL_PATH/$LINK_NAME"
fi
pause
copy_tree "$PAYLOAD/last" "$ROOT$INSTALL_PATH" || exit 1
for _p in $OWNED $SHARED; do
    [ -e "$ROOT$INSTALL_PATH/$_p" ] && set_others_access "$ROOT$INSTALL_PATH/$_p"
done
say "[INFO] $PKG_NAME $action success"

if [ "$PKG_KIND" = toolkit ]; then
    if [ "$(version_of "$DRIVER_ROOT/driver/version.info" Version)" = none ]; then
        driver_line="Driver:   Not installed."
    else
        driver_line="Driver:   Installed in $DRIVER_ROOT/driver."
    fi
    env_file="$INSTALL_PATH/$ENV_SCRIPT"
    cat <<EOF


===========
= Summary =
===========

$driver_line
Toolkit:  ${PKG_FILE} $action success, installed in $INSTALL_PATH.

Please make sure that the environment variables have been configured.
-  To take effect for all users, you can add "source $env_file" to /etc/profile.
-  To take effect for current user, you can exec command below: source $env_file or add "source $env_file" to ~/.bashrc.
EOF
fi
exit 0
