"""Shell shims that make a node report another glibc than the Debian base's (e.g. 2.17 on CentOS 7.6).

They sit in /usr/local/bin, ahead of the real tools on PATH, and hand every other use to the real tool.
"""

from __future__ import annotations

import os
from pathlib import Path

# Text of CentOS 7's `ldd --version` (glibc-common 2.17).
LDD = """#!/bin/sh
# ascend-sim: this node reports glibc {version}; everything but --version goes to the real ldd.
case "$1" in
  --version|-v|-V)
    printf '%s\\n' "ldd (GNU libc) {version}" \\
      "Copyright (C) 2012 Free Software Foundation, Inc." \\
      "This is free software; see the source for copying conditions.  There is NO" \\
      "warranty; not even for MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE." \\
      "Written by Roland McGrath and Ulrich Drepper."
    exit 0 ;;
esac
exec /usr/bin/ldd "$@"
"""

GETCONF = """#!/bin/sh
# ascend-sim: this node reports glibc {version}; other variables go to the real getconf.
if [ "$#" -eq 1 ] && [ "$1" = GNU_LIBC_VERSION ]; then
  echo "glibc {version}"
  exit 0
fi
exec /usr/bin/getconf "$@"
"""


def write_glibc_shims(bin_dir: Path, version: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("ldd", LDD), ("getconf", GETCONF)):
        path = bin_dir / name
        path.write_text(text.format(version=version))
        os.chmod(path, 0o755)
