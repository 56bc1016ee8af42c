"""The C library's view of the OS a simulated node plays: glibc version, kernel release, the libc file.

Every node runs the Debian base's glibc 2.36 under this machine's kernel. What a real CentOS 7.6 or Kylin V10
node answers about itself comes from its glibc and its kernel, so it is given here at that level:

- `node/osident.c`, built once per cluster with the host's C compiler and listed in the node's
  /etc/ld.so.preload, answers uname(2)'s release and version, confstr(_CS_GNU_LIBC_VERSION) and
  gnu_get_libc_version() from /etc/ascend-sim/os-identity. So `uname -r`, `getconf GNU_LIBC_VERSION`,
  Python's platform.release() (Ansible's ansible_kernel), os.confstr and ctypes' gnu_get_libc_version (what
  pip's manylinux check reads: a CentOS 7.6 node's pip refuses a manylinux_2_28 wheel, as a real one does)
  all report the profile's values, through the real tools.
- /usr/bin/ldd is the base's script with the profile's `--version` banner.
- The libc file has the OS's name: /usr/lib64/libc-2.17.so with libc.so.6 pointing at it (RHEL family,
  glibc < 2.34, where the library was still named by version), /usr/lib64/libc.so.6 from 2.34 on; both
  are links to the base's libc (the loader never looks in /usr/lib64 on Debian).

Not faithful: statically linked programs and raw syscalls see the host kernel, so do /proc/version and
/proc/sys/kernel/osrelease; the C library's behaviour (and its symbol versions: a binary needing GLIBC_2.29
still runs) is 2.36's. Where no C compiler is found the node keeps the host's kernel release and glibc
for uname(2)/confstr, and `ascend-sim up` says so; only ldd and the libc file name then follow the profile.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from ascend_ready.sim import profiles

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parent / "node" / "osident.c"
IDENTITY = "/etc/ascend-sim/os-identity"
LIBRARY = "/usr/lib/ascend-sim/libosident.so"
#: the base's ldd script: its --version banner is replaced, the rest left as it is
_LDD_BANNER = re.compile(r"(--vers \| --versi \| --versio \| --version\)\n)\s+echo '[^'\n]*'\n"
                         r"(\s+printf \$\"Copyright \(C\) %s Free Software Foundation, Inc\.\n"
                         r"(?:.*\n){2}\" )\"\d+\"")


def build(run_dir: Path) -> Path | None:
    """The preload library for this cluster (compiled once per source version); None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = run_dir / "lib" / f"libosident-{digest}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    proc = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wall", "-o", str(tmp), str(SOURCE), "-ldl"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        log.warning("cannot build %s (%s): nodes keep the host's uname and glibc", SOURCE,
                    proc.stderr.strip())
        return None
    os.replace(tmp, out)
    return out


def identity_text(spec: profiles.OsSpec, arch: str | None = None) -> str:
    """/etc/ascend-sim/os-identity: "glibc 2.17", "release ...", "version ..." (only what the OS sets)."""
    lines = []
    if spec.glibc:
        lines.append(f"glibc {spec.glibc}")
    if spec.kernel:
        lines.append(f"release {spec.kernel_release(arch)}")
    if spec.kernel_version:
        lines.append(f"version {spec.kernel_version}")
    return "".join(f"{line}\n" for line in lines)


def ldd_script(base_ldd: str, spec: profiles.OsSpec) -> str:
    """The base's ldd with the OS's `--version` banner (its first line and copyright year)."""
    if not spec.ldd_line:
        return base_ldd
    year = spec.ldd_year or "2022"
    line = spec.ldd_line.replace("'", "")
    text, n = _LDD_BANNER.subn(lambda m: f"{m.group(1)}    echo '{line}'\n{m.group(2)}\"{year}\"", base_ldd)
    if n != 1:
        raise ValueError("the base's ldd has no --version banner of the expected shape")
    return text


def libc_links(spec: profiles.OsSpec) -> dict[str, str]:
    """The libc file name(s) of the OS, path -> link target: RHEL family in /usr/lib64 (what /lib64 points
    at), Debian family in the multiarch directory the base already has."""
    if not spec.glibc or spec.name.startswith("ubuntu"):
        return {}  # Ubuntu 22.04: /lib/x86_64-linux-gnu/libc.so.6 is the library itself, as on the base
    real = f"/lib/{os.uname().machine}-linux-gnu/libc.so.6"
    minor = int(spec.glibc.split(".")[1])
    if minor >= 34:  # glibc 2.34 stopped naming the library by version
        return {"/usr/lib64/libc.so.6": real}
    return {f"/usr/lib64/libc-{spec.glibc}.so": real, "/usr/lib64/libc.so.6": f"libc-{spec.glibc}.so"}


def install(upper: Path, lower: Path, spec: profiles.OsSpec, library: Path | None) -> None:
    """Write the OS's identity into a node's upper layer (before it boots)."""
    etc = upper / "etc"
    if spec.ldd_line:
        ldd = upper / "usr" / "bin" / "ldd"
        ldd.parent.mkdir(parents=True, exist_ok=True)
        ldd.write_text(ldd_script((lower / "usr" / "bin" / "ldd").read_text(), spec))
        os.chmod(ldd, 0o755)
    for path, target in libc_links(spec).items():
        link = upper / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        os.symlink(target, link)
    text = identity_text(spec)
    if not text or library is None:
        return
    (etc / "ascend-sim").mkdir(parents=True, exist_ok=True)
    (upper / IDENTITY.lstrip("/")).write_text(text)
    lib = upper / LIBRARY.lstrip("/")
    lib.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(library, lib)
    (etc / "ld.so.preload").write_text(LIBRARY + "\n")
