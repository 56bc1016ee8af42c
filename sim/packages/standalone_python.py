"""A stand-in for python-build-standalone's `install_only` archive, made from a CPython on this machine:
the same file name and python/ layout, relocatable, built once per source interpreter and cached.

python-build-standalone ships a shared build whose RUNPATH is `$ORIGIN/../lib`, so the tree runs from any
directory. A pyenv build (`--enable-shared`) carries its absolute prefix as RUNPATH instead: the copy's
ELF files get that string rewritten in place to the `$ORIGIN`-relative path (patchelf's job, done here
because the new path is never longer than the old). A non-shared build (Debian's) has none to rewrite.
The result is checked by running it from another directory before it is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ascend_ready.errors import SimError

RECIPE_VERSION = 1
#: left out of the stand-in: the host's own packages, and what no node needs (tests, GUIs)
_SKIP = {"site-packages", "test", "idlelib", "tkinter", "turtledemo"}
_ELF = b"\x7fELF"


def source_interpreter(python: str) -> Path | None:
    """A local CPython prefix of `python` (MAJOR.MINOR): this interpreter's own when it matches, else the
    newest pyenv version of it (ascend_ready.sim.profiles.PYENV_VERSIONS); None when there is none."""
    from ascend_ready.sim.profiles import PYENV_VERSIONS

    candidates = []
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == python:
        candidates.append(Path(sys.base_prefix))
    if PYENV_VERSIONS.is_dir():
        found = [p for p in PYENV_VERSIONS.iterdir() if p.name.startswith(f"{python}.")
                 and p.name[len(python) + 1:].isdigit()]
        candidates += sorted(found, key=lambda p: int(p.name.rsplit(".", 1)[1]), reverse=True)
    for prefix in candidates:
        stdlib = prefix / "lib" / f"python{python}"
        if (prefix / "bin" / f"python{python}").is_file() and (stdlib / "os.py").is_file():
            return prefix
    return None


def _patch_runpath(path: Path, old: str, new: str) -> None:
    """Rewrite the NUL-terminated string `old` (a RUNPATH in .dynstr) as `new`, padded with NULs."""
    data = path.read_bytes()
    if not data.startswith(_ELF):
        return
    needle = b"\0" + old.encode() + b"\0"
    if needle not in data:
        return
    if len(new) > len(old):
        raise SimError(f"{path}: RUNPATH {new!r} is longer than {old!r}",
                       hint="build the stand-in from another CPython")
    data = data.replace(needle, b"\0" + new.encode().ljust(len(old), b"\0") + b"\0")
    mode = path.stat().st_mode
    path.chmod(mode | 0o200)
    path.write_bytes(data)
    path.chmod(mode)


def _copy_tree(prefix: Path, python: str, dest: Path) -> None:
    """prefix's interpreter, libpython and standard library into dest (the archive's python/)."""
    (dest / "bin").mkdir(parents=True)
    shutil.copy2(prefix / "bin" / f"python{python}", dest / "bin" / f"python{python}")
    os.symlink(f"python{python}", dest / "bin" / "python3")
    (dest / "lib").mkdir()
    for lib in (prefix / "lib").glob("libpython3*.so*"):
        if lib.is_symlink():
            os.symlink(os.readlink(lib), dest / "lib" / lib.name)
        else:
            shutil.copy2(lib, dest / "lib" / lib.name)
    stdlib = prefix / "lib" / f"python{python}"
    shutil.copytree(stdlib, dest / "lib" / f"python{python}", symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in _SKIP and Path(d) == stdlib])
    (dest / "lib" / f"python{python}" / "site-packages").mkdir()
    old = str(prefix / "lib")
    for path, rel in ((dest / "bin" / f"python{python}", "$ORIGIN/../lib"),):
        _patch_runpath(path, old, rel)
    for lib in (dest / "lib").glob("libpython3*.so*"):
        if not lib.is_symlink():
            _patch_runpath(lib, old, "$ORIGIN")
    for ext in (dest / "lib" / f"python{python}" / "lib-dynload").glob("*.so"):
        _patch_runpath(ext, old, "$ORIGIN/../..")


def _check_relocated(root: Path, python: str) -> None:
    """The copy runs from where it is, on its own libpython and standard library."""
    exe = root / "bin" / f"python{python}"
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    probe = ("import sys, json, ssl, ctypes, venv; "
             "print(json.dumps([sys.prefix, '%d.%d' % sys.version_info[:2]]))")
    proc = subprocess.run([str(exe), "-I", "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SimError(f"the relocated CPython in {root} does not run: {proc.stderr.strip()[-400:]}",
                       hint="use a pyenv build of that Python (ASCEND_SIM_PYENV_VERSIONS)")
    prefix, version = json.loads(proc.stdout)
    if Path(prefix).resolve() != root.resolve() or version != python:
        raise SimError(f"the relocated CPython in {root} reports prefix {prefix}, Python {version}",
                       hint="its build does not find its standard library relative to itself")


def _cache_dir() -> Path:
    from ascend_ready.sim.base import cache_root

    return cache_root() / "python-standalone"


def build_archive(dest: Path, name: str, python: str, prefix: Path | None = None) -> Path:
    """dest/name: a python-build-standalone-shaped archive of Python `python` (MAJOR.MINOR), from the
    local CPython at `prefix` (default source_interpreter). Cached by source, its binary's mtime and this
    recipe; dest gets a copy (a test that corrupts it leaves the cache intact)."""
    prefix = prefix or source_interpreter(python)
    if prefix is None:
        raise SimError(f"no local CPython {python} to build {name} from",
                       hint=f"install one with pyenv (pyenv install {python}) or run from a {python} venv")
    exe = prefix / "bin" / f"python{python}"
    key = hashlib.sha256(json.dumps([RECIPE_VERSION, str(prefix.resolve()), exe.stat().st_mtime_ns, name])
                         .encode()).hexdigest()[:12]
    cached = _cache_dir() / key / name
    if not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
            root = Path(tmp) / "python"
            _copy_tree(prefix, python, root)
            _check_relocated(root, python)
            part = Path(tmp) / name
            with tarfile.open(part, "w:gz", compresslevel=1) as tar:
                tar.add(root, arcname="python", filter=_root_owned)
            os.replace(part, cached)  # racing builders: the last complete archive wins
    out = dest / name
    shutil.copy2(cached, out)
    return out


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if info.name.endswith((".opt-1.pyc", ".opt-2.pyc")):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def members(path: Path) -> list[str]:
    """The archive's member names (tests read its layout)."""
    with tarfile.open(path) as tar:
        return tar.getnames()


__all__ = ["build_archive", "members", "source_interpreter"]
