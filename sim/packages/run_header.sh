#!/bin/sh
# This script was generated using Makeself 2.4.5 (stand-in written by the ascend-ready simulator)
# Self-extracting stub of a fake Ascend installer package. POSIX sh only (dash, busybox ash): no bash,
# no python. Messages and exit codes follow Huawei's makeself-header.sh (see builder.py for sources).
label="@LABEL@"
entry="@ENTRY@"
SHA="@SHA@"
totalsize=@SIZE@
skip=@SKIP@

quiet=n
check=n
noexec=n
extract=""
for arg in "$@"; do
    case "$arg" in
        -q | --quiet) quiet=y ;;
        --check) check=y ;;
        --noexec) noexec=y ;;
        --extract=*) extract="${arg#--extract=}" ;;
        --info)
            echo "Identification: $label"
            echo "Target directory: ."
            exit 0
            ;;
    esac
done

payload_offset() {
    head -n "$skip" "$1" | wc -c | tr -d " "
}

MS_Check() {
    [ "$quiet" = n ] && printf "%s" "Verifying archive integrity..."
    offset=$(payload_offset "$1")
    fsize=$(wc -c < "$1" | tr -d " ")
    if [ "$totalsize" -ne "$((fsize - offset))" ]; then
        echo " Unexpected archive size." >&2
        exit 2
    fi
    shasum=$(tail -c +"$((offset + 1))" "$1" | sha256sum | cut -b-64)
    if [ "$shasum" != "$SHA" ]; then
        echo "Error in SHA256 checksums: $shasum is different from $SHA" >&2
        exit 2
    fi
    [ "$quiet" = n ] && echo "  100%   SHA256 checksums are OK. All good."
    return 0
}

MS_Check "$0"

if [ -n "$extract" ]; then
    tmpdir="$extract"
    mkdir -p "$tmpdir" || { echo "Cannot create target directory $tmpdir" >&2; exit 1; }
else
    tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/selfgz.XXXXXX") || { echo "Cannot create target directory" >&2; exit 1; }
fi
[ "$quiet" = n ] && printf "%s" "Uncompressing $label"
offset=$(payload_offset "$0")
if ! tail -c +"$((offset + 1))" "$0" | gzip -dc | (cd "$tmpdir" && tar -xf -); then
    echo >&2
    echo "Unable to decompress $0" >&2
    [ -z "$extract" ] && rm -rf "$tmpdir"
    exit 1
fi
[ "$quiet" = n ] && echo "  100%  "
if [ "$noexec" = y ] || [ -n "$extract" ]; then
    exit 0
fi

cd "$tmpdir" || exit 1
sh "./$entry" "$@"
res=$?
cd / && rm -rf "$tmpdir"
exit $res
