"""The compatibility matrix (provision/matrix.yml): pydantic models that load and validate it.

The resolver that turns a few pins into a full install stack (and picks engine rows) is resolver.py, the
judge of an installed set judge.py, the launcher's engine gate engines.py; each imports this module.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ascend_ready.errors import MatrixError
from ascend_ready.provision.versions import (
    base_version,
    parse_clause,
    python_minor,
    same_version,
    version_has_prefix,
    version_key,
)

MATRIX_PATH = Path(__file__).with_name("matrix.yml")
ARCHES = ("aarch64", "x86_64")
#: the project's main target (Atlas 800T A2 on Kunpeng); used when a request names no product/arch
DEFAULT_PRODUCT = "910b"
DEFAULT_ARCH = "aarch64"
#: NNAL's Python libraries load only on these (instg_0045), so they win when nothing else decides
NNAL_PYTHONS = ("3.11", "3.10")
MANYLINUX_GLIBC = {"manylinux2014": "2.17", "manylinux_2_28": "2.28"}
#: python-build-standalone's `install_only` archive (docs/running.rst: the gnu builds need glibc 2.17);
#: it unpacks to a top-level python/ directory
PYTHON_BUILD_FILE = "cpython-{version}+{build}-{arch}-unknown-linux-gnu-install_only.tar.gz"
#: where python_env unpacks it on a node (one directory per CPython version)
PYTHON_BUILD_DIR = "/opt/ascend-ready/python-{version}"
PYTHON_BUILD_PAGE = ("GitHub: astral-sh/python-build-standalone > Releases > {build} > "
                     "cpython-{version}+{build}-{arch}-unknown-linux-gnu-install_only.tar.gz")

def _checked_version(text: str) -> str:
    version_key(text)
    return text


def _checked_python(text: str) -> str:
    if python_minor(text) != text:
        raise ValueError(f"bad Python version {text!r}: write MAJOR.MINOR such as 3.10")
    return text


Version = Annotated[str, AfterValidator(_checked_version)]
PythonVersion = Annotated[str, AfterValidator(_checked_python)]
Glibc = Annotated[str, Field(pattern=r"^2\.\d+$")]
Arch = Literal["aarch64", "x86_64"]

# ---------------------------------------------------------------------------------------------------
# Models of the file


class MatrixModel(BaseModel):
    """Base of the matrix's models and of what resolving and judging return: strict and immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class OsEntry(MatrixModel):
    """An operating system a node may run."""

    id: str = Field(description="short id used everywhere else, e.g. centos7.6, ubuntu22.04")
    name: str
    family: Literal["RedHat", "Kylin", "openEuler", "Debian"]
    glibc: Glibc = Field(description="glibc of the release; wheels with a higher manylinux floor fail")
    python3: PythonVersion = Field(description="the distribution's own python3")
    arch: list[Arch]
    source: str


class Product(MatrixModel):
    """An NPU product line and its package-name templates."""

    id: str
    name: str
    chips: list[str] = Field(description="chip names npu-smi prints for this product")
    driver_file: str
    firmware_file: str
    kernels_file: str = Field(description="CANN < 8.5 operator package")
    kernels_file_noarch: str | None = Field(None, description="arch-independent kernels file (CANN 7.0.x)")
    ops_file: str = Field(description="CANN >= 8.5 operator package")
    source: str


class HdkPackage(MatrixModel):
    driver: Version
    firmware: Version


class HdkRelease(MatrixModel):
    """One Ascend HDK bundle: the driver and firmware each product gets from it."""

    id: Version
    products: dict[str, HdkPackage]
    source: str
    note: str | None = None


class Layout(MatrixModel):
    """Where a CANN generation installs and how its packages are split."""

    id: str
    install_root: str
    home: str
    set_env: str
    version_file: str
    toolkit_file: str
    nnal_file: str
    op_package: Literal["kernels", "ops"]
    nnae: bool = Field(description="whether the nnae package exists for this generation")
    source: str


class CannHdk(MatrixModel):
    recommended: dict[str, Version] = Field(description="product id -> hdk id")
    compatible: list[Version] = Field(description="driver version prefixes the release notes accept")


class CannRelease(MatrixModel):
    version: Version
    layout: str
    os: list[str] = Field(description="OS ids the CANN install guide lists")
    kernels_noarch: bool = False
    nnal: Version | None
    python: list[PythonVersion] | None = Field(None, description="CANN's own Python range, where stated")
    hdk: CannHdk
    sources: list[str]


class StackRow(MatrixModel):
    """One torch_npu release of the COMPATIBILITY table."""

    id: str
    cann: Version
    torch: Version
    torch_npu: Version
    branch: str
    python: list[PythonVersion]
    manylinux: Literal["manylinux2014", "manylinux_2_28"]
    recommended: bool = False
    python_source: str | None = None

    @property
    def glibc(self) -> str:
        return MANYLINUX_GLIBC[self.manylinux]


class EngineRow(MatrixModel):
    """One RL engine release (verl, vllm-ascend, MindSpeed-RL) and the torch / torch_npu / CANN / Python
    it states it runs on. Each range is a list of `OP VERSION` clauses (==, >=, <=, >, <) that must all
    hold; `companions` names companion packages, and a `vllm-ascend` there must be a vllm-ascend row."""

    id: str = Field(description="<engine>-<version>, e.g. verl-2025.12")
    engine: Literal["verl", "vllm-ascend", "mindspeed-rl"]
    version: str = Field(description="the engine release, or the dated docs revision that pins the stack")
    cann: list[str] = Field(description="CANN clauses, e.g. ['>=8.3.RC1']")
    torch: list[str]
    torch_npu: list[str]
    python: list[PythonVersion]
    hdk: list[str] = Field(default_factory=list, description="driver clauses, where the source states them")
    companions: dict[str, str] = Field(default_factory=dict,
                                       description="companion packages and their pinned versions")
    source: str


class PythonBuild(MatrixModel):
    """A relocatable CPython (python-build-standalone `install_only`, glibc 2.17) that python_env unpacks
    on a node whose own python3 the stack's wheels do not support (CentOS 7.6's 3.6, Kylin V10's 3.7)."""

    python: PythonVersion = Field(description="MAJOR.MINOR it provides")
    version: Version = Field(description="the CPython release, e.g. 3.11.14")
    build: str = Field(pattern=r"^\d{8}$", description="python-build-standalone's release tag, e.g. 20251031")
    source: str


class Toolbox(MatrixModel):
    """The MindCluster ToolBox (ascend-dmi and friends): one release for every stack, installed only where
    the inventory asks for it (toolbox_install); its file is Ascend-mindx-toolbox_<ver>_linux-<arch>.run."""

    version: Version = Field(description="the MindCluster (MindX) release, e.g. 7.3.0")
    source: str

    def file(self, arch: str) -> str:
        return f"Ascend-mindx-toolbox_{self.version}_linux-{arch}.run"


class Matrix(MatrixModel):
    """The whole file. Cross-references are checked by `check_matrix` after parsing."""

    schema_version: Literal[1]
    sources: dict[str, str]
    os: list[OsEntry]
    products: list[Product]
    hdk: list[HdkRelease]
    layouts: list[Layout]
    cann: list[CannRelease]
    stacks: list[StackRow]
    engines: list[EngineRow] = Field(default_factory=list,
                                     description="RL engines and the stacks they state they support")
    python_builds: list[PythonBuild] = Field(
        default_factory=list, description="standalone CPython builds for OSes whose python3 is too old")
    toolbox: Toolbox | None = Field(None,
                                    description="the MindCluster ToolBox release the provisioning offers")

    # Lookups. Version ids compare through version_key, so 8.2.rc1 finds 8.2.RC1.
    def os_entry(self, os_id: str) -> OsEntry | None:
        return next((o for o in self.os if o.id == os_id.lower()), None)

    def product(self, product_id: str) -> Product | None:
        return next((p for p in self.products if p.id == product_id.lower()), None)

    def hdk_release(self, hdk_id: str) -> HdkRelease | None:
        return next((h for h in self.hdk if same_version(h.id, hdk_id)), None)

    def layout(self, layout_id: str) -> Layout:
        return next(lay for lay in self.layouts if lay.id == layout_id)

    def cann_release(self, version: str) -> CannRelease | None:
        return next((c for c in self.cann if same_version(c.version, version)), None)

    def stacks_for(self, cann: str) -> list[StackRow]:
        return [s for s in self.stacks if same_version(s.cann, cann)]


# ---------------------------------------------------------------------------------------------------
# Loading


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader (libyaml's parser where PyYAML has it) that refuses a repeated mapping key (PyYAML
    silently keeps the last one)."""


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise MatrixError(f"line {key_node.start_mark.line + 1}: duplicate key {key!r}",
                              hint="each key may appear once per mapping; remove or merge the repeat")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _row_label(data: Any, loc: tuple[Any, ...]) -> str:
    """`stacks[3] (cann-8.0.0-torch-2.1.0).torch_npu` for a pydantic error location."""
    if len(loc) >= 2 and isinstance(loc[1], int):
        row = data.get(loc[0], [None])[loc[1]] if isinstance(data, dict) else None
        name = row.get("id", row.get("version")) if isinstance(row, dict) else None
        head = f"{loc[0]}[{loc[1]}]" + (f" ({name})" if name else "")
        return ".".join([head, *(str(p) for p in loc[2:])])
    return ".".join(str(p) for p in loc) or "<top>"


def parse_matrix(text: str, *, origin: str = "<matrix>") -> Matrix:
    """Validate matrix YAML text; raises MatrixError naming the row and field that is wrong."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise MatrixError(f"{origin}: not valid YAML: {exc}", hint="fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise MatrixError(f"{origin}: expected a mapping at the top", hint="see provision/matrix.yml")
    try:
        matrix = Matrix.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required key is missing"
            lines.append(f"{_row_label(data, tuple(err['loc']))}: {msg}")
        raise MatrixError(f"{origin}: " + "; ".join(lines),
                          hint="fix the named row and field (`ascend-matrix schema` shows every allowed key)"
                          ) from None
    check_matrix(matrix, origin=origin)
    return matrix


def _fail(origin: str, where: str, msg: str, hint: str) -> MatrixError:
    return MatrixError(f"{origin}: {where}: {msg}", hint=hint)


def _check_unique(origin: str, section: str, keys: list[str]) -> None:
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        norm = key.lower()
        if norm in seen:
            raise _fail(origin, f"{section}[{i}] ({key})", f"duplicate of {section}[{seen[norm]}]",
                        "each entry may appear once; delete or merge the repeat")
        seen[norm] = i


def check_matrix(m: Matrix, *, origin: str = "<matrix>") -> None:
    """Cross-row rules pydantic cannot see: unique ids, references, torch/torch_npu pairing, floors."""
    _check_unique(origin, "os", [o.id for o in m.os])
    _check_unique(origin, "products", [p.id for p in m.products])
    _check_unique(origin, "hdk", [h.id.lower() for h in m.hdk])
    _check_unique(origin, "layouts", [lay.id for lay in m.layouts])
    _check_unique(origin, "cann", [c.version.lower() for c in m.cann])
    _check_unique(origin, "stacks", [s.id for s in m.stacks])
    _check_unique(origin, "stacks", [f"{s.cann.lower()}/torch_npu {s.torch_npu}" for s in m.stacks])

    def need_source(where: str, sid: str | None) -> None:
        if sid is not None and sid not in m.sources:
            raise _fail(origin, where, f"unknown source {sid!r}", "add it under `sources:` or fix the id")

    product_ids = {p.id for p in m.products}
    for i, o in enumerate(m.os):
        need_source(f"os[{i}] ({o.id}).source", o.source)
    for i, p in enumerate(m.products):
        need_source(f"products[{i}] ({p.id}).source", p.source)
    for i, lay in enumerate(m.layouts):
        need_source(f"layouts[{i}] ({lay.id}).source", lay.source)
    for i, h in enumerate(m.hdk):
        need_source(f"hdk[{i}] ({h.id}).source", h.source)
        for pid in h.products:
            if pid not in product_ids:
                raise _fail(origin, f"hdk[{i}] ({h.id}).products", f"unknown product {pid!r}",
                            f"known products: {', '.join(sorted(product_ids))}")
    layout_ids = {lay.id for lay in m.layouts}
    for i, c in enumerate(m.cann):
        where = f"cann[{i}] ({c.version})"
        for sid in c.sources:
            need_source(f"{where}.sources", sid)
        if c.layout not in layout_ids:
            raise _fail(origin, f"{where}.layout", f"unknown layout {c.layout!r}",
                        f"known layouts: {', '.join(sorted(layout_ids))}")
        for os_id in c.os:
            if m.os_entry(os_id) is None:
                raise _fail(origin, f"{where}.os", f"unknown OS {os_id!r}",
                            f"add it under `os:` or use one of: {', '.join(o.id for o in m.os)}")
        for pid, hdk_id in c.hdk.recommended.items():
            hdk = m.hdk_release(hdk_id)
            if pid not in product_ids:
                raise _fail(origin, f"{where}.hdk.recommended", f"unknown product {pid!r}",
                            f"known products: {', '.join(sorted(product_ids))}")
            if hdk is None:
                raise _fail(origin, f"{where}.hdk.recommended.{pid}", f"unknown HDK {hdk_id!r}",
                            "add the bundle under `hdk:` or name an existing id")
            if pid not in hdk.products:
                raise _fail(origin, f"{where}.hdk.recommended.{pid}", f"HDK {hdk_id} has no {pid} packages",
                            f"add {pid} to hdk {hdk_id} or recommend another bundle")
            if not any(version_has_prefix(hdk.products[pid].driver, p) for p in c.hdk.compatible):
                raise _fail(origin, f"{where}.hdk.recommended.{pid}",
                            f"driver {hdk.products[pid].driver} is outside hdk.compatible {c.hdk.compatible}",
                            "a recommended bundle must also be a compatible one")
    for i, s in enumerate(m.stacks):
        where = f"stacks[{i}] ({s.id})"
        if m.cann_release(s.cann) is None:
            raise _fail(origin, f"{where}.cann", f"unknown CANN {s.cann!r}", "add it under `cann:` first")
        if base_version(s.torch_npu) != base_version(s.torch):
            raise _fail(origin, f"{where}.torch_npu",
                        f"torch_npu {s.torch_npu} is built for torch {base_version(s.torch_npu)}, "
                        f"not torch {s.torch}", "torch_npu's leading version must equal torch's")
        want_id = f"cann-{s.cann}-torch-{s.torch}"
        if s.id != want_id:
            raise _fail(origin, f"{where}.id", f"expected {want_id!r}", "ids are cann-<CANN>-torch-<torch>")
        # PyTorch wheels are manylinux_2_28 from 2.6.0 on (pytorch#123649): no row may claim less.
        if version_key(s.torch) >= version_key("2.6.0") and s.manylinux != "manylinux_2_28":
            raise _fail(origin, f"{where}.manylinux",
                        f"torch {s.torch} wheels are manylinux_2_28 (glibc 2.28), not {s.manylinux}",
                        "set manylinux: manylinux_2_28")
        need_source(f"{where}.python_source", s.python_source)
    _check_unique(origin, "engines", [e.id for e in m.engines])
    for i, e in enumerate(m.engines):
        where = f"engines[{i}] ({e.id})"
        need_source(f"{where}.source", e.source)
        for name in ("cann", "torch", "torch_npu", "hdk"):
            for clause in getattr(e, name):
                try:
                    parse_clause(clause)
                except ValueError as exc:
                    raise _fail(origin, f"{where}.{name}", str(exc),
                                "write clauses like '>=8.3.RC1'") from None
        companion = e.companions.get("vllm-ascend")
        if companion and e.engine != "vllm-ascend" and not any(
                r.engine == "vllm-ascend" and r.version.lower() == companion.lower() for r in m.engines):
            raise _fail(origin, f"{where}.companions", f"no vllm-ascend row for version {companion}",
                        "add the vllm-ascend release it installs under `engines:`")
    _check_unique(origin, "python_builds", [b.python for b in m.python_builds])
    if m.toolbox is not None:
        need_source("toolbox.source", m.toolbox.source)
    for i, b in enumerate(m.python_builds):
        need_source(f"python_builds[{i}] ({b.python}).source", b.source)
        if python_minor(b.version) != b.python:
            raise _fail(origin, f"python_builds[{i}] ({b.python}).version",
                        f"{b.version} is not Python {b.python}",
                        "the version must be a release of that MAJOR.MINOR")
    for c in m.cann:
        recommended = [s.id for s in m.stacks_for(c.version) if s.recommended]
        if len(recommended) > 1:
            raise _fail(origin, f"cann {c.version}", f"several recommended stacks: {', '.join(recommended)}",
                        "mark exactly one stack per CANN as recommended")


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> Matrix:
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError as exc:
        raise MatrixError(f"matrix file {path} is not text (byte {exc.start} is not UTF-8)",
                          hint="pass a YAML matrix file with --matrix (`ascend-matrix schema` describes it)",
                          ) from None
    except OSError as exc:
        raise MatrixError(f"cannot read matrix file {path}: {exc.strerror or exc}",
                          hint="pass a readable YAML file with --matrix") from None
    return parse_matrix(text, origin=path)


def load_matrix(path: str | Path | None = None) -> Matrix:
    """Load and validate the matrix file (default: the packaged provision/matrix.yml)."""
    p = Path(path) if path is not None else MATRIX_PATH
    try:
        stat = p.stat()
    except OSError as exc:
        raise MatrixError(f"cannot read matrix file {p}: {exc.strerror}",
                          hint="pass an existing file with --matrix") from None
    return _load_cached(str(p), stat.st_mtime_ns)


def matrix_json_schema() -> dict[str, Any]:
    schema = Matrix.model_json_schema()
    schema["$id"] = "https://ascend-ready/schema/matrix.schema.json"
    schema["title"] = "ascend-ready compatibility matrix"
    return schema


_DISTRO_PREFIX = {"centos": "centos", "ubuntu": "ubuntu", "openeuler": "openeuler", "debian": "debian",
                  "kylin linux advanced server": "kylin", "kylin": "kylin"}


def os_id_for(distribution: str, version: str, matrix: Matrix | None = None) -> str | None:
    """The matrix OS id for Ansible-style facts ('CentOS', '7.6.1810' -> centos7.6), or None if untracked.

    Tries the longest version first, so a point release maps to its minor (7.6.1810 -> 7.6). Kylin's
    facts carry no service pack ('V10'), so they map only if the matrix has a plain kylinv10 entry.
    """
    m = matrix or load_matrix()
    prefix = _DISTRO_PREFIX.get(distribution.strip().lower())
    if prefix is None:
        return None
    parts = version.strip().lower().split(".")
    for n in range(len(parts), 0, -1):
        entry = m.os_entry(prefix + ".".join(parts[:n]))
        if entry is not None:
            return entry.id
    return None
