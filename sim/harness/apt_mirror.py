"""A local apt mirror for simulated Ubuntu-profile nodes, which cannot reach any distribution mirror:
the os_prereqs packages with their dependencies (resolved against the node base's installed set),
downloaded once from Debian on the controller, plus stand-ins for the kernels' headers.

A node reports the kernel of the OS it plays (3.10.0-957.el7 on CentOS 7.6, sim/osident.py), and Debian ships
no `linux-headers-<kernel>` for those, nor for the VM kernel the simulator runs on; so one package per
kernel is built here: an empty headers tree and the /lib/modules/<kernel>/build link, labelled as a
stand-in. Everything else is the real Debian bookworm package.

Usage: python -m ascend_ready.sim.harness.apt_mirror OUT_DIR [--serve HOST:PORT]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("ASCEND_READY_APT_CACHE", "/var/cache/ascend-ready-sim/apt"))
#: roles/os_prereqs/vars/Debian.yml without the kernel headers (built below)
PACKAGES = ("make", "dkms", "gcc", "g++", "pciutils", "net-tools", "python3-venv")


def _base_status() -> str:
    from ascend_ready.sim import base

    image = base.current()
    if not image.ready:
        raise SystemExit("no simulator base image: run `ascend-sim base build` first")
    return str(image.rootfs / "var/lib/dpkg/status")


def download(packages=PACKAGES) -> list[Path]:
    """The .deb files a bare node needs for `packages`: apt resolves against the base's dpkg status."""
    (CACHE / "partial").mkdir(parents=True, exist_ok=True)
    # --reinstall: the requested packages themselves are fetched even where the base already has them.
    subprocess.run(["apt-get", "install", "-q", "-y", "--download-only", "--reinstall",
                    "--no-install-recommends",
                    "-o", f"Dir::State::status={_base_status()}", "-o", f"Dir::Cache::archives={CACHE}",
                    *packages], check=True, capture_output=True,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return sorted(CACHE.glob("*.deb"))


def headers_package(kernel: str) -> str:
    """The stand-in's Debian package name: linux-headers-<kernel>, with `_` (x86_64 in an RPM kernel's
    release) as `-`, since a Debian package name has none."""
    return f"linux-headers-{kernel.lower().replace('_', '-')}"


def kernel_headers_standin(kernel: str, out: Path) -> Path:
    """linux-headers-<kernel>: a stand-in that makes the DKMS prerequisite resolvable, nothing more."""
    name = headers_package(kernel)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "DEBIAN").mkdir()
        src = root / "usr/src" / name
        src.mkdir(parents=True)
        (src / "README.ascend-ready").write_text(
            f"Stand-in for the headers of kernel {kernel}, built by ascend-ready's simulator: "
            "the simulated nodes report this kernel but run the VM's. It holds no headers.\n")
        # A headers tree is recognised by its top Makefile (DKMS and ascend-check look for it).
        (src / "Makefile").write_text(f"# stand-in kbuild Makefile of {kernel} (ascend-ready simulator)\n")
        (root / "lib/modules" / kernel).mkdir(parents=True)
        os.symlink(f"/usr/src/{name}", root / "lib/modules" / kernel / "build")
        (root / "DEBIAN/control").write_text(
            f"Package: {name}\nVersion: 0.0-ascend-ready-sim\nArchitecture: all\nSection: kernel\n"
            "Priority: optional\nMaintainer: ascend-ready simulator <root@localhost>\n"
            f"Description: stand-in headers for kernel {kernel} (ascend-ready simulator)\n")
        deb = out / f"{name}_0.0-ascend-ready-sim_all.deb"
        subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True,
                       capture_output=True)
    return deb


def _stanza(deb: Path, rel: str) -> str:
    control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
    data = deb.read_bytes()
    return (control.rstrip("\n") + f"\nFilename: {rel}\nSize: {len(data)}\n"
            f"MD5sum: {hashlib.md5(data).hexdigest()}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")


def node_kernels() -> list[str]:
    """The kernel release every simulated OS reports (sim/profiles.yaml), and this machine's."""
    from ascend_ready.sim import profiles

    found = [s.kernel_release() for s in profiles.os_specs() if s.kernel]
    return list(dict.fromkeys([*found, os.uname().release]))


def build(out: Path, kernel: str | None = None, packages=PACKAGES) -> Path:
    """A flat repository (`deb [trusted=yes] URL ./`) in out: the .deb files, Packages(.gz), Release; headers
    stand-ins for `kernel`, or for every kernel a simulated OS reports (node_kernels)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for deb in download(packages):
        if deb.stat().st_dev == out.stat().st_dev:
            os.link(deb, out / deb.name)  # the cache and the repo share a file system: no copy
        else:
            shutil.copy(deb, out)
    for release in [kernel] if kernel else node_kernels():
        kernel_headers_standin(release, out)
    packages = "\n".join(_stanza(d, f"./{d.name}") for d in sorted(out.glob("*.deb")))
    (out / "Packages").write_text(packages)
    (out / "Packages.gz").write_bytes(gzip.compress(packages.encode(), mtime=0))
    lines = [f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime())}", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (out / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (out / "Release").write_text("\n".join(lines) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kernel",
                        help="kernel release of the nodes (default: every simulated OS's and this machine's)")
    args = parser.parse_args()
    print(build(args.out, args.kernel))


if __name__ == "__main__":
    main()
