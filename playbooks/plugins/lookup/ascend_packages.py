"""Lookup `ascend_packages`: check the package source holds every file a node needs, intact.

A directory source is verified here on the controller (sha256 against its SHA256SUMS, digests cached by
path, size and mtime so re-runs do not re-read gigabytes); an HTTP mirror's files are verified on the
node by get_url's checksum. Either way a missing or corrupt file fails the host before any change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

DOCUMENTATION = r"""
name: ascend_packages
short_description: sha256 of each named file of an Ascend package source, verified against its manifest
description:
  - Terms are file names relative to the source (wheels as wheelhouse/NAME.whl).
  - Returns one dict mapping each name to its sha256 from the manifest.
options:
  _terms:
    description:
      - File names, or C(wheel:NAME==VERSION) for the wheel of that release that fits I(python) and I(arch).
    required: true
  source:
    description: A directory on the controller, or an http(s) URL of a mirror.
    type: str
    required: true
  manifest: {description: Manifest file name in the source., type: str, default: SHA256SUMS}
  python: {description: "CPython MAJOR.MINOR the wheels must fit (for wheel: terms).", type: str}
  arch: {description: "aarch64 or x86_64 (for wheel: terms).", type: str}
  cache:
    description: Digest cache file (directory sources).
    type: str
    default: "~/.cache/ascend-ready/sha256.json"
"""

RETURN = r"""
_raw:
  description: "{file name: sha256}"
  type: list
  elements: dict
"""


_LINE = re.compile(r"^([0-9a-f]{64})\s+\*?(\S.*)$")


def parse_manifest(text: str, origin: str) -> dict[str, str]:
    out = {}
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line.strip())
        if m is None:
            raise AnsibleLookupError(f"{origin} line {no} is not '<sha256>  <file>': {line!r}")
        out[m.group(2)] = m.group(1)
    return out


def wheel_files(names, project: str, version: str | None, python: str | None, arch: str) -> list[str]:
    """Wheel files among `names` of `project` (any version if None) that install on CPython `python`
    (any if None) on `arch`; pure-Python (py3-none-any) wheels fit every Python and arch."""
    dist = project.replace("-", "_").lower()
    out = []
    for name in names:
        base = name.rsplit("/", 1)[-1]
        parts = base[:-4].split("-") if base.endswith(".whl") else []
        if len(parts) < 5 or parts[0].lower() != dist or (version and parts[1] != version):
            continue
        pys, plats = parts[-3].split("."), parts[-1].split(".")
        py_ok = python is None or "cp" + str(python).replace(".", "") in pys or "py3" in pys
        if py_ok and any(p.endswith(arch) or p == "any" for p in plats):
            out.append(name)
    return sorted(out)


def _expand(names, sums: dict[str, str], where: str, python: str | None, arch: str | None) -> list[str]:
    """Plain names stay; `wheel:NAME[==VERSION]` becomes the fitting wheel files of the manifest."""
    out = []
    for name in names:
        if not name.startswith("wheel:"):
            out.append(name)
            continue
        project, _, version = name[len("wheel:"):].partition("==")
        if not project or not arch:
            raise AnsibleLookupError(f"{name}: write wheel:NAME[==VERSION] and give arch=")
        found = wheel_files(sums, project, version or None, python, arch)
        if not found:
            which, py = f"{project} {version}".strip(), f"CPython {python}" if python else "any Python"
            raise AnsibleLookupError(f"no {which} wheel for {py} on {arch} in {where}")
        out.extend(found)
    return out


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _DigestCache:
    """sha256 per (real path, size, mtime_ns), kept in a JSON file; a changed file is hashed again."""

    def __init__(self, path: str):
        self.path = os.path.expanduser(path)
        try:
            with open(self.path) as fh:
                self.data = json.load(fh)
        except (OSError, ValueError):
            self.data = {}
        self.dirty = False

    def digest(self, path: str) -> str:
        st = os.stat(path)
        key = f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"
        if key not in self.data:
            self.data[key] = _sha256(path)
            self.dirty = True
        return self.data[key]

    def save(self) -> None:
        if not self.dirty:
            return
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}"
            with open(tmp, "w") as fh:
                json.dump(self.data, fh)
            os.replace(tmp, self.path)  # forks racing: the last complete file wins, never a torn one


def verify(names, source: str, manifest_name: str = "SHA256SUMS",
           cache_file: str = "~/.cache/ascend-ready/sha256.json", python: str | None = None,
           arch: str | None = None) -> dict[str, str]:
    """{name: sha256} for every name; AnsibleLookupError naming the first missing or corrupt file."""
    remote = source.startswith(("http://", "https://"))
    where = f"{source.rstrip('/')}/{manifest_name}"
    if remote:
        from ansible.module_utils.urls import open_url

        try:
            text = open_url(where, timeout=30).read().decode()
        except Exception as exc:  # any transport error means the same to the user
            raise AnsibleLookupError(f"cannot read the package manifest {where}: {exc}") from None
    else:
        if not os.path.isdir(source):
            raise AnsibleLookupError(f"package source {source} is not a directory on the controller")
        try:
            with open(where) as fh:
                text = fh.read()
        except OSError as exc:
            raise AnsibleLookupError(f"cannot read the package manifest {where}: {exc.strerror}") from None
    sums = parse_manifest(text, where)
    names = _expand(names, sums, where, python, arch)
    cache = None if remote else _DigestCache(cache_file)
    out = {}
    try:
        for name in names:
            if name not in sums:
                raise AnsibleLookupError(f"package {name} is not listed in {where}; add it to the source "
                                         f"and its manifest")
            if cache is not None:
                path = os.path.join(source, name)
                if not os.path.isfile(path):
                    raise AnsibleLookupError(f"package {name} is missing from {source}")
                got = cache.digest(path)
                if got != sums[name]:
                    raise AnsibleLookupError(f"package {name} is corrupt: sha256 {got}, but {manifest_name} "
                                             f"says {sums[name]}; download it again")
            out[name] = sums[name]
    finally:
        if cache is not None:
            cache.save()
    return out


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        names = []
        for term in terms:
            names.extend(term if isinstance(term, list) else [term])
        return [verify([str(n) for n in names], str(self.get_option("source")), self.get_option("manifest"),
                       self.get_option("cache"), self.get_option("python"), self.get_option("arch"))]
