#!/bin/sh
# Fake Ascend vendor tool of the ascend-ready simulator; the tool is named by how it is called
# (npu-smi, hccn_tool, lspci). Fast path: print the render cached for this exact argument vector when
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
# The braces matter: a failed `< file` redirection reports before a trailing 2>/dev/null applies.
if [ -n "$k" ] && { read -r g < "$S/gen"; } 2>/dev/null; then
    d=; f=
    { read -r d < "$R/usr/local/Ascend/driver/version.info"; } 2>/dev/null
    { read -r f < "$R/usr/local/Ascend/firmware/version.info"; } 2>/dev/null
    c="$S/render/$g#$d#$f#$k"
    if [ -f "$c" ]; then
        exec cat -- "$c"
    fi
fi
PYTHONPATH=${ASCEND_SIM_LIB:-/opt/ascend-sim/lib}
export PYTHONPATH
exec "${ASCEND_SIM_PYTHON:-/opt/ascend-sim/bin/python3}" -S -m ascend_ready.sim.node.tool "$t" "$@"
