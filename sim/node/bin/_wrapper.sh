#!/bin/sh
# Fake Ascend vendor tool of the ascend-ready simulator; the tool is named by how it is called
# (npu-smi, hccn_tool, lspci, chronyc). Fast path: print the render cached for this exact argument vector when
# it belongs to the current state generation and installed driver/firmware (shell builtins + one cat);
# otherwise run the Python tool, which prints and refreshes the cache. Key format: node/tool.py cache_path.
S=${ASCEND_SIM_ROOT:-/var/lib/ascend-sim}
R=${ASCEND_SIM_FSROOT:-}
t=${0##*/}
k=$t
for a in "$@"; do
    case $a in ''|*/*|*'#'*) k=; break ;; esac
    k="$k#$a"
done
# chronyc's report changes only when chronyd polls (every 64 s since boot, render/chrony.py): one entry per poll.
if [ "$t" = chronyc ] && [ -n "$k" ]; then
    u=; { read -r u _ < /proc/uptime; } 2>/dev/null
    if [ -n "$u" ]; then k="$k#@$(( ${u%%.*} / 64 ))"; else k=; fi
fi
# The braces matter: a failed `< file` redirection reports before a trailing 2>/dev/null applies.
if [ -n "$k" ] && { read -r g < "$S/gen"; } 2>/dev/null; then
    d=; f=
    { read -r d < "$R/usr/local/Ascend/driver/version.info"; } 2>/dev/null
    { read -r f < "$R/usr/local/Ascend/firmware/version.info"; } 2>/dev/null
    c="$S/render/$g#$d#$f#$k"
    if [ -f "$c" ]; then
        case "$t $1 $2" in
            # A few short lines: printing them with builtins is cheaper than starting cat (the real tools
            # are quick native binaries; every simulated node shares the host's cores). Byte for byte,
            # including a last line without a newline.
            "hccn_tool "*|"chronyc "*|"npu-smi info -t")
                l=
                while IFS= read -r l; do printf '%s\n' "$l"; done < "$c"
                [ -z "$l" ] || printf '%s' "$l"
                exit 0 ;;
        esac
        exec cat -- "$c"
    fi
fi
PYTHONPATH=${ASCEND_SIM_LIB:-/opt/ascend-sim/lib}
export PYTHONPATH
exec "${ASCEND_SIM_PYTHON:-/opt/ascend-sim/bin/python3}" -S -m ascend_ready.sim.node.tool "$t" "$@"
