# Fake MindCluster ToolBox installer (Ascend-mindx-toolbox_<ver>_linux-<arch>.run), POSIX sh.
# What the public install notes show of the real one: `--check` (integrity), `--install` (as root),
# `--quiet` (no Y/N prompt), "[INFO] ... install success"; the release under
# /usr/local/Ascend/toolbox/<ver> with a `latest` link, ascend-dmi in latest/Ascend-DMI/bin, and
# /usr/local/Ascend/toolbox/set_env.sh putting it on PATH (matrix source mindx-toolbox-730);
# ascend_tool_box_install.info's keys as vllm-project/vllm-ascend#451 prints them (its directory there is
# not shown: here it sits in the release's). Installing a release that is there replaces it.
MODULE=ToolBox
DATE_FMT="%Y-%m-%d %H:%M:%S"
LOGFILE="/var/log/mindx-dl/toolbox/install.log"
. ./run_common.sh
CMDLINE="$*"

install=n
uninstall=n
check=n
for arg in "$@"; do
    case "$arg" in
        --install) install=y ;;
        --uninstall) uninstall=y ;;
        --check) check=y ;;
        -q | --quiet) ;;
        --nox11) ;;
        --help | -h) cat ./help.info; exit 0 ;;
        *) mkdir -p "$ROOT${LOGFILE%/*}"; unknown_param "$arg" ;;
    esac
done
mkdir -p "$ROOT${LOGFILE%/*}"
[ "$check" = y ] && [ "$install" = n ] && [ "$uninstall" = n ] && exit 0
if [ "$install" = "$uninstall" ]; then
    say "[ERROR] use exactly one of --install and --uninstall"
    end_log 1
fi
require_root

BOX="/usr/local/Ascend/toolbox"
REL="$BOX/$PKG_VERSION"
if [ "$uninstall" = y ]; then
    rm -rf "$ROOT$REL"
    [ -L "$ROOT$BOX/latest" ] && [ "$(readlink "$ROOT$BOX/latest")" = "$PKG_VERSION" ] && rm -f "$ROOT$BOX/latest"
    say "[INFO] Ascend-mindx-toolbox uninstall success"
    end_log 0
fi
pause
rm -rf "$ROOT$REL"
INSTALL_PATH="$REL"
copy_tree "$PAYLOAD/files" "$ROOT$REL" || end_log 1
cat > "$ROOT$REL/ascend_tool_box_install.info" <<INFO
version=$PKG_VERSION
arch=$PKG_ARCH
os=linux
path=$REL
build=Ascend-mindx-toolbox_$PKG_VERSION-$PKG_ARCH
a500=n
a200=n
a200isoc=n
INFO
# The simulated driver package still carries a stand-in ascend-dmi in a real latest/ directory (nodes
# provisioned without this role keep their full tier): that one is left as it is.
[ -d "$ROOT$BOX/latest" ] && [ ! -L "$ROOT$BOX/latest" ] || ln -sfn "$PKG_VERSION" "$ROOT$BOX/latest"
printf 'export PATH="%s/latest/Ascend-DMI/bin:$PATH"\n' "$BOX" > "$ROOT$BOX/set_env.sh"
chmod 644 "$ROOT$BOX/set_env.sh"
say "[INFO] Ascend-mindx-toolbox_${PKG_VERSION} install success"
end_log 0
