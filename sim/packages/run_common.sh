# Helpers shared by the fake Ascend installers (sourced; POSIX sh for dash and busybox ash).
# Every absolute path goes through $ROOT (env ASCEND_SIM_FSROOT, "" inside a node), so tests can install
# into a scratch directory. File CONTENTS always carry the node-side paths, never the $ROOT prefix.

ROOT="${ASCEND_SIM_FSROOT:-}"
INSTALL_INFO="/etc/ascend_install.info"
SECLOG="/var/log/ascend_seclog"
DELAY="${ASCEND_SIM_INSTALL_DELAY:-0}"
PAYLOAD="$(pwd)"
START_TIME=$(date +"%Y-%m-%d %H:%M:%S")
. ./package.info

now() {
    date +"$DATE_FMT"
}

# say LINE: print one log-formatted line and append it to the package's log file, like drvEcho + log.
say() {
    _line="[$MODULE] [$(now)] $1"
    echo "$_line"
    echo "$_line" >> "$ROOT$LOGFILE" 2>/dev/null
    return 0
}

open_log() {
    mkdir -p "$ROOT$SECLOG" && chmod 750 "$ROOT$SECLOG"
    [ -f "$ROOT$LOGFILE" ] || : > "$ROOT$LOGFILE"
    chmod 640 "$ROOT$LOGFILE"
}

# The install steps sleep here so a test can kill an installer halfway (ASCEND_SIM_INSTALL_DELAY).
pause() {
    [ "$DELAY" = 0 ] || sleep "$DELAY"
}

# Root is only demanded when installing into the real "/" (a relocated $ROOT needs no privilege).
require_root() {
    if [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
        say "[ERROR]ERR_NO:0x0093;ERR_DES:do not have root permission, operation failed, please use root permission!"
        exit 1
    fi
}

# /etc/ascend_install.info: KEY=value lines; an update deletes the key and appends it (real updateInstallParam).
info_get() {
    [ -f "$ROOT$INSTALL_INFO" ] || return 0
    sed -n "s/^$1=//p" "$ROOT$INSTALL_INFO" | tail -n 1
}

info_set() {
    mkdir -p "$ROOT/etc"
    [ -f "$ROOT$INSTALL_INFO" ] || : > "$ROOT$INSTALL_INFO"
    sed -i "/^$1=/d" "$ROOT$INSTALL_INFO"
    echo "$1=$2" >> "$ROOT$INSTALL_INFO"
    chmod 644 "$ROOT$INSTALL_INFO"
}

info_del() {
    [ -f "$ROOT$INSTALL_INFO" ] && sed -i "/^$1=/d" "$ROOT$INSTALL_INFO"
    return 0
}

# version_of FILE KEY: the value of KEY= in a version file, "none" when absent.
version_of() {
    _v=""
    [ -f "$ROOT$1" ] && _v=$(sed -n "s/^$2=//p" "$ROOT$1" | head -n 1)
    [ -n "$_v" ] && echo "$_v" || echo "none"
}

user_exists() {
    grep -q "^$1:" "$ROOT/etc/passwd" 2>/dev/null
}

group_exists() {
    grep -q "^$1:" "$ROOT/etc/group" 2>/dev/null
}

# user_in_group USER GROUP: primary group or listed member.
user_in_group() {
    _gid=$(grep "^$2:" "$ROOT/etc/group" | head -n 1 | cut -d: -f3)
    _pgid=$(grep "^$1:" "$ROOT/etc/passwd" | head -n 1 | cut -d: -f4)
    [ -n "$_gid" ] && [ "$_gid" = "$_pgid" ] && return 0
    grep "^$2:" "$ROOT/etc/group" | head -n 1 | cut -d: -f4 | tr ',' '\n' | grep -qx "$1"
}

# copy_tree SRC DEST: copy a payload tree, filling the install-path placeholders of text files.
copy_tree() {
    [ -d "$1" ] || return 0
    (cd "$1" && find . -type d) | while IFS= read -r _d; do
        mkdir -p "$2/$_d" || return 1
    done
    (cd "$1" && find . -type f) | while IFS= read -r _f; do
        sed -e "s|@ASCEND_ROOT@|$INSTALL_PATH|g" -e "s|@DRIVER_ROOT@|$DRIVER_ROOT|g" "$1/$_f" > "$2/$_f" || return 1
        if [ -x "$1/$_f" ]; then chmod 755 "$2/$_f"; else chmod 644 "$2/$_f"; fi
    done
}

# set_others_access DIR: --install-for-all gives other users what the group has (the real installers
# copy the group digit into the others digit); otherwise others get nothing. On --upgrade too: the real
# upgrade takes the modes from its own flags, not from the install it replaces (CANN's opp_upgrade.sh,
# CANN Open Software: _BUILTIN_PERM=550 _CUSTOM_PERM=750 _ONLYREAD_PERM=440, and 555/755/444 only when
# is_for_all=y; its hccl/runtime upgrade scripts take in_install_for_all the same way).
set_others_access() {
    if [ "$install_for_all" = y ]; then chmod -R o=g "$1"; else chmod -R o-rwx "$1"; fi
}

# op_log OPERATION RESULT: one line of operation.log, in the real logOperation format.
op_log() {
    case "$1" in
        Install) _lvl=SUGGESTION ;;
        Upgrade) _lvl=MINOR ;;
        Uninstall) _lvl=MAJOR ;;
        *) _lvl=UNKNOWN ;;
    esac
    _type=""
    [ "$1" = Install ] && _type="install_type=${install_type:-full}; "
    echo "$1 $_lvl root $START_TIME 127.0.0.1 $PKG_NAME $2 ${_type}cmdlist=$CMDLINE." >> "$ROOT$SECLOG/operation.log"
    chmod 640 "$ROOT$SECLOG/operation.log"
}

# The node-side tools re-render when this integer changes (docs/design/simulator.md, "gen").
bump_gen() {
    _g="$ROOT/var/lib/ascend-sim/gen"
    mkdir -p "${_g%/*}"
    _n=$(cat "$_g" 2>/dev/null)
    case "$_n" in '' | *[!0-9]*) _n=0 ;; esac
    echo "$((_n + 1))" > "$_g.tmp.$$" && mv "$_g.tmp.$$" "$_g"
}

# ask_continue PROMPT: the real installers loop on `read` until y/n. At end of input they would spin
# forever; the simulator fails instead, so a playbook that forgets --quiet errors out rather than hangs.
ask_continue() {
    say "$1"
    while true; do
        if ! read -r _yn; then
            say "[ERROR]ERR_NO:0x0002;ERR_DES:input error, please input again!"
            return 1
        fi
        case "$_yn" in
            y) return 0 ;;
            n) return 2 ;;
            *) say "[ERROR]ERR_NO:0x0002;ERR_DES:input error, please input again!" ;;
        esac
    done
}

unknown_param() {
    say "[ERROR]ERR_NO:0x0004;ERR_DES: Unrecognized parameters: $1. Try './xxx.run --help' for more information."
    end_log 1
}

end_log() {
    say "[INFO]End time: $(date +"%Y-%m-%d %H:%M:%S")"
    exit "$1"
}

# begin_install: the log header both HDK installers print before anything else, then the root check.
begin_install() {
    open_log
    say "[INFO]Start time: $(now)"
    say "[INFO]LogFile: $LOGFILE"
    say "[INFO]OperationLogFile: $SECLOG/operation.log"
    require_root
}
