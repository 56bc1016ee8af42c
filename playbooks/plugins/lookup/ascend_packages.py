"""Lookup `ascend_packages`: check the package source holds every file a node needs, intact.

A directory source is verified here on the controller (sha256 against its SHA256SUMS, digests cached by
path, size and mtime so re-runs do not re-read gigabytes); an HTTP mirror's files are verified on the
node by get_url's checksum. Either way a missing or corrupt file fails the host before any change, and
one run names every file that is missing, unlisted or corrupt (with the sha256 the manifest expects).
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
      - File names, or C(wheel:REQUIREMENT) (C(wheel:torch==2.5.1), C(wheel:numpy>=1.19.2,<2.0)) for the
        wheels that satisfy it and fit I(python) and I(arch).
    required: false
  stack:
    description:
      - A resolved stack (the ascend_stack lookup's result) whose files are checked as well - its installers
        and wheel requirements, as C(ascend-matrix packages) lists them (ascend_ready.provision.packages).
    type: dict
  requirements:
    description: CANN's Python dependencies to check with I(stack) (default - the list of the CANN guide).
    type: list
    elements: str
  wheels:
    description: With I(stack), check its wheels too (false - the wheels come from an index).
    type: bool
    default: true
  training:
    description: >-
      With I(stack) and I(wheels), check the wheels of ascend-ready of the controller's version and of
      what the training job imports (false - python_env installs no training environment).
    type: bool
    default: true
  python_build:
    description: >-
      With I(stack), check the standalone CPython archive it names too (false - the node's interpreter
      is given).
    type: bool
    default: true
  toolbox:
    description: >-
      With I(stack), check the MindCluster ToolBox installer of its arch too (the toolbox role installs
      it where toolbox_install is true; false - not wanted).
    type: bool
    default: false
  problems:
    description:
      - "C(raise) fails with one error naming every problem; C(return) returns
        C({files: {name: sha256}, problems: [message, ...]}) so a task can assert on it."
    type: str
    default: raise
    choices: [raise, return]
  source:
    description: A directory on the controller, or an http(s) URL of a mirror.
    type: str
    required: true
  manifest: {description: Manifest file name in the source., type: str, default: SHA256SUMS}
  python: {description: "CPython MAJOR.MINOR the wheels must fit (for wheel: terms).", type: str}
  arch: {description: "aarch64 or x86_64 (for wheel: terms).", type: str}
  glibc:
    description: "The node's glibc; a manylinux wheel needing a newer one does not fit (empty - any)."
    type: str
  fitting_wheels:
    description:
      - Add every wheel of the manifest's wheelhouse/ that fits I(python), I(arch) and I(glibc) (pip,
        installing offline from what is staged, needs what torch and CANN's dependencies require too); of a
        project a C(wheel:NAME==VERSION) term pins, only that version.
    type: bool
    default: false
  cache:
    description: Digest cache file (directory sources).
    type: str
    default: "~/.cache/ascend-ready/sha256.json"
"""

RETURN = r"""
_raw:
  description: "{file name: sha256}, or with problems=return {files: {file name: sha256}, problems: [str]}"
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


def _fits(version: str, wanted) -> bool:
    """`version` satisfies `wanted`: None (any), a version string (==, local label ignored as PEP 440
    does: 2.5.1 matches 2.5.1+cpu) or a packaging SpecifierSet."""
    if wanted is None:
        return True
    if isinstance(wanted, str):
        return version == wanted or version.split("+", 1)[0] == wanted
    from packaging.version import InvalidVersion

    try:
        return wanted.contains(version, prereleases=True)
    except InvalidVersion:
        return False


def _packages():
    try:
        from ascend_ready.provision import packages
    except ImportError as exc:
        raise AnsibleLookupError(f"ascend_packages needs the ascend_ready package in the controller's Python "
                                 f"({exc}); run ansible-playbook from its environment") from None
    return packages


def wheel_files(names, project: str, version, python: str | None, arch: str,
                glibc: str | None = None) -> list[str]:
    """Wheel files among `names` of `project` whose version fits `version` (see _fits) that install on
    CPython `python` (any if None) on `arch` with `glibc` (ascend_ready.provision.packages.wheel_fits:
    the tags pip accepts; pure-Python py3-none-any wheels fit every Python and arch)."""
    dist = project.replace("-", "_").replace(".", "_").lower()
    fits = _packages().wheel_fits
    out = []
    for name in names:
        base = name.rsplit("/", 1)[-1]
        parts = base[:-4].split("-") if base.endswith(".whl") else []
        if len(parts) < 5 or parts[0].lower().replace(".", "_") != dist or not _fits(parts[1], version):
            continue
        if fits(name, python, arch, glibc):
            out.append(name)
    return sorted(out)


def _requirement(text: str):
    """(project, version wanted) of a `wheel:` term: NAME, NAME==VERSION or a PEP 508 requirement."""
    if not any(c in text for c in "<>!~;[ ") and text.count("==") <= 1:
        project, _, version = text.partition("==")
        return project.strip(), version.strip() or None
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise AnsibleLookupError(f"wheel:{text}: not a requirement ({exc})") from None
    return req.name, req.specifier or None


def _expand(names, sums: dict[str, str], where: str, python: str | None, arch: str | None,
            problems: list[str], glibc: str | None = None, fitting_wheels: bool = False) -> list[str]:
    """Plain names stay; `wheel:REQUIREMENT` becomes the fitting wheel files of the manifest (a
    requirement no wheel satisfies is added to `problems`)."""
    out = []
    for name in names:
        if not name.startswith("wheel:"):
            out.append(name)
            continue
        text = name[len("wheel:"):]
        project, version = _requirement(text)
        if not project or not arch:
            raise AnsibleLookupError(f"{name}: write wheel:NAME[==VERSION] and give arch=")
        found = wheel_files(sums, project, version, python, arch, glibc)
        if not found:
            which = text if not isinstance(version, str | None) else f"{project} {version or ''}"
            py = f"CPython {python}" if python else "any Python"
            problems.append(f"no {which.strip()} wheel for {py} on {arch} in {where}; add it to wheelhouse/ "
                            f"(`ascend-matrix packages` prints the pip download command) and to the manifest")
        out.extend(found)
    if fitting_wheels:
        if not arch:
            raise AnsibleLookupError("fitting_wheels needs arch=")
        pins = dict(_requirement(n[len("wheel:"):]) for n in names if n.startswith("wheel:") and "==" in n)
        out.extend(_packages().node_wheels(sums, python, arch, glibc,
                                           {k: v for k, v in pins.items() if isinstance(v, str)}))
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


def stack_terms(stack: dict, requirements: list[str] | None = None, wheels: bool = True,
                python_build: bool = True, training: bool = True, toolbox: bool = False) -> list[str]:
    """The files of a resolved stack, as ascend-matrix packages lists them (one list for both)."""
    terms = _packages().required_files(stack, cann=requirements, python_build=python_build,
                                       training=training, toolbox=toolbox)
    return terms if wheels else [t for t in terms if not t.startswith("wheel:")]


def check(names, source: str, manifest_name: str = "SHA256SUMS",
          cache_file: str = "~/.cache/ascend-ready/sha256.json", python: str | None = None,
          arch: str | None = None, glibc: str | None = None,
          fitting_wheels: bool = False) -> tuple[dict[str, str], list[str]]:
    """({name: sha256} of the files that are fine, [every problem]) for `names` in `source`.

    A problem names the file and what to do: not in the manifest, missing (with the sha256 expected),
    corrupt (sha256 found and expected), or no wheel satisfies a `wheel:` requirement. Only an unreadable
    source or manifest raises, since nothing can be judged then.
    """
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
            raise AnsibleLookupError(f"cannot read the package manifest {where}: {exc.strerror}; write it "
                                     f"with `ascend-matrix manifest {source}`") from None
    sums = parse_manifest(text, where)
    problems: list[str] = []
    names = list(dict.fromkeys(_expand(names, sums, where, python, arch, problems, glibc, fitting_wheels)))
    cache = None if remote else _DigestCache(cache_file)
    out = {}
    try:
        for name in names:
            if name not in sums:
                problems.append(f"package {name} is not listed in {where}; add it to the source and its "
                                f"manifest (`ascend-matrix manifest DIR`)")
                continue
            if cache is not None:
                path = os.path.join(source, name)
                if not os.path.isfile(path):
                    problems.append(f"package {name} is missing from {source} ({manifest_name} expects "
                                    f"sha256 {sums[name]}); download it again")
                    continue
                got = cache.digest(path)
                if got != sums[name]:
                    problems.append(f"package {name} is corrupt: sha256 {got}, but {manifest_name} says "
                                    f"{sums[name]}; download it again")
                    continue
            out[name] = sums[name]
    finally:
        if cache is not None:
            cache.save()
    return out, problems


def verify(names, source: str, manifest_name: str = "SHA256SUMS",
           cache_file: str = "~/.cache/ascend-ready/sha256.json", python: str | None = None,
           arch: str | None = None) -> dict[str, str]:
    """{name: sha256} for every name; one AnsibleLookupError naming every missing or corrupt file."""
    out, problems = check(names, source, manifest_name, cache_file, python, arch)
    if problems:
        raise AnsibleLookupError(problem_message(problems, source))
    return out


def problem_message(problems: list[str], source: str) -> str:
    if len(problems) == 1:
        return problems[0]
    lines = "\n".join(f"- {p}" for p in problems)
    return f"{len(problems)} problems with the package source {source}:\n{lines}"


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        names = []
        for term in terms:
            names.extend(term if isinstance(term, list) else [term])
        names = [str(n) for n in names]
        if self.get_option("stack"):
            names += stack_terms(self.get_option("stack"), self.get_option("requirements"),
                                 self.get_option("wheels"), self.get_option("python_build"),
                                 self.get_option("training"), self.get_option("toolbox"))
        source = str(self.get_option("source"))
        files, problems = check(names, source, self.get_option("manifest"), self.get_option("cache"),
                                self.get_option("python"), self.get_option("arch"),
                                self.get_option("glibc") or None, self.get_option("fitting_wheels"))
        if self.get_option("problems") == "return":
            return [{"files": files, "problems": problems}]
        if problems:
            raise AnsibleLookupError(problem_message(problems, source))
        return [files]
