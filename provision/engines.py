"""The launcher's gate on the RL engines of the matrix (verl, vllm-ascend, MindSpeed-RL): a fleet whose
stack no row of the engine accepts, or whose nodes run other engine releases than the row pins, is refused.

The rows are the matrix file's `engines:` (matrix.EngineRow); which rows accept a stack is resolver.py's.
"""

from __future__ import annotations

import importlib.metadata as md
import re
from dataclasses import dataclass

from packaging.requirements import Requirement

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import Matrix, load_matrix
from ascend_ready.provision.resolver import engine_pins, engine_rows_for, resolve
from ascend_ready.provision.versions import same_version

ENGINES = ("verl", "vllm-ascend", "mindspeed-rl")


def check_engine_fleet(engine: str, fingerprints: dict[str, dict[str, str | None]],
                       matrix: Matrix | None = None) -> dict[str, list[str]]:
    """Refuse a fleet that `engine` does not support: node -> {cann, torch, torch_npu} as read on it.

    Returns node -> the engine rows it satisfies; raises MatrixError naming every node that is off (or
    that lacks a version) and the stack `ascend-matrix resolve --engine` recommends instead.
    """
    m = matrix or load_matrix()
    if not [e for e in m.engines if e.engine == engine]:
        raise MatrixError(f"engine: no rows for engine {engine!r}",
                          hint=f"engines in the matrix: {', '.join(sorted({e.engine for e in m.engines}))}")
    ok: dict[str, list[str]] = {}
    bad: list[str] = []
    for node, fp in sorted(fingerprints.items()):
        missing = [k for k in ("cann", "torch", "torch_npu") if not fp.get(k)]
        if missing:
            bad.append(f"{node}: {', '.join(missing)} not read")
            continue
        rows = engine_rows_for(m, engine, fp["cann"], fp["torch"], fp["torch_npu"])
        if rows:
            ok[node] = [r.id for r in rows]
        else:
            bad.append(f"{node}: CANN {fp['cann']}, torch {fp['torch']}, torch_npu {fp['torch_npu']}")
    if bad:
        try:
            want = resolve(m, engine=engine)
            hint = (f"{engine} supports e.g. CANN {want.cann} / torch {want.torch} / "
                    f"torch_npu {want.torch_npu} "
                    f"(`ascend-matrix resolve --engine {engine}`)")
        except MatrixError:
            hint = f"see the {engine} rows in `ascend-matrix show --format json`"
        raise MatrixError(f"{engine} does not support these nodes: " + "; ".join(bad), hint=hint)
    return ok


def _same_release(have: str, want: str) -> bool:
    """Two Python package versions (0.11.0rc1, 0.12.1+npu) as the matrix compares them."""
    def norm(v: str) -> str:
        return re.sub(r"(\d)(rc|a|b|post|dev)", r"\1.\2", v.strip().lower())
    try:
        return same_version(norm(have), norm(want))
    except ValueError:
        return norm(have) == norm(want)


def check_engine_versions(engine: str, rows: dict[str, list[str]], installed: dict[str, dict[str,
                                                                                             str | None]],
                          matrix: Matrix | None = None, skip: tuple[str, ...] = ()) -> None:
    """Refuse nodes whose installed engine packages differ from what their engine rows pin (verl's own
    release, vllm-ascend, megatron-core, ...), naming node, package, the version found and the pinned one.

    `rows`: node -> the row ids check_engine_fleet returned for it; `installed`: node -> distribution name ->
    version as read with the node's interpreter (None: not installed). All nodes must also agree with each
    other, which the pins imply. `skip`: packages this job does not load (megatron-core under fsdp)."""
    m = matrix or load_matrix()
    by_id = {r.id: r for r in m.engines}
    bad: list[str] = []
    pinned: dict[str, str] = {}
    for node in sorted(rows):
        pins: dict[str, str] = {}
        for row_id in rows[node]:
            pins.update(engine_pins(by_id[row_id]))
        pinned.update(pins)
        found = installed.get(node, {})
        for package, want in pins.items():
            if package in skip:
                continue
            have = found.get(package)
            if have is None:
                bad.append(f"{node}: {package} not installed (pinned {want})")
            elif not _same_release(have, want):
                bad.append(f"{node}: {package} {have}, not {want}")
    if bad:
        line = " ".join(f"{k}=={v}" for k, v in pinned.items())
        raise MatrixError(f"{engine}: nodes run other releases than the matrix pins: " + "; ".join(bad),
                          hint=f"install the pinned set on each node named ({line}; `ascend-matrix resolve "
                               f"--engine {engine}` prints it)")


# ----------------------------------------------------------------- the controller's own verl environment

#: verl's requirements the controller's venv may differ from (its [train]/[verl] extras; verl itself is
#: installed with --no-deps there), each with why that is safe on the controller. The controller only
#: composes verl's Hydra config and runs its validate_config (training/verl_overrides.py): verl's trainer
#: runs on the nodes, whose pinned set (the row's companions) check_engine_versions compares before Ray
#: starts. tests/provision/test_engine_controller.py reads verl's installed metadata against this table and
#: checks, in a fresh interpreter, that the config path imports none of the packages marked "not imported".
CONTROLLER_ONLY = {
    "transformers": "imported on the controller only by verl's HFModelConfig (AutoConfig and the tokenizer "
                    "of the critic's stand-in config.json, in validate_config); the controller's is the "
                    "[train] extra's, which the trl engine trains with, and the nodes train verl with the "
                    "row's",
    "megatron-core": "not imported on the controller (verl's config classes and validate_config import no "
                     "megatron module); the nodes run the row's release, compared before Ray starts",
    "megatron-bridge": "not imported on the controller (only verl's Megatron LoRA path on the nodes)",
    "transferqueue": "not imported on the controller (verl's trainer's data plane, on the nodes)",
    "torchdata": "not imported on the controller (verl's dataloader, on the nodes)",
    "wandb": "not imported on the controller (verl's tracking, on the nodes, where a run logs to it)",
    "pybind11": "not imported on the controller (a build dependency of verl's kernels, on the nodes)",
    "pylatexenc": "not imported on the controller (verl's math reward, on the nodes)",
}
#: what verl's extras require that the Ascend stack runs (its vllm/fsdp/cpu extras pin the CUDA set, which
#: the row replaces with vLLM-Ascend's): the default trainer's data plane and the Megatron engine
VERL_EXTRA_PACKAGES = ("transferqueue", "megatron-bridge", "megatron-core")


@dataclass(frozen=True)
class ControllerPin:
    """One of verl's requirements as this controller's venv meets it."""

    package: str
    installed: str | None
    required: str  # verl's specifier, "" where it pins none
    pinned: str | None  # the matrix row's pin for the nodes
    ok: bool  # installed and within verl's specifier
    reason: str = ""  # CONTROLLER_ONLY's, where not ok

    @property
    def differs(self) -> bool:
        """Another release than the nodes run (the row's pin)."""
        return bool(self.pinned and self.installed and not _same_release(self.installed, self.pinned))

    @property
    def note(self) -> bool:
        return not self.ok or self.differs

    def describe(self, engine: str = "verl") -> str:
        have = self.installed or "not installed"
        want = f"{engine} requires {self.package}{self.required or ' (any version)'}"
        nodes = f"; the nodes run {self.pinned}" if self.pinned else ""
        return f"controller: {self.package} {have}: {want}{nodes}: safe here: {self.reason}"


def controller_pins(engine: str = "verl", installed: dict[str, str | None] | None = None,
                    matrix: Matrix | None = None) -> list[ControllerPin]:
    """verl's own requirements (its installed metadata: the base ones and VERL_EXTRA_PACKAGES') as this
    controller has them, next to the matrix row's pin for the nodes. MatrixError naming package, version
    and requirement for one outside verl's range that CONTROLLER_ONLY does not explain; PackageNotFoundError
    where verl is not installed here."""
    dist = md.distribution(engine)
    m = matrix or load_matrix()
    rows = [r for r in m.engines if r.engine == engine and r.version == dist.version]
    pins = engine_pins(rows[0]) if rows else {}
    out: dict[str, ControllerPin] = {}
    for line in dist.requires or []:
        req = Requirement(line)
        name = req.name.lower()
        if req.marker is not None and name not in VERL_EXTRA_PACKAGES:
            continue  # an extra's pin: the CUDA set, or a package the Ascend stack does not install
        if name in out and (out[name].required or not req.specifier):
            continue  # read already, with its range
        have = installed.get(name) if installed is not None else installed_version(name)
        ok = have is not None and (not req.specifier or req.specifier.contains(have, prereleases=True))
        pin = pins.get(name)
        # within verl's range and the nodes' release: nothing to say; else why it is safe here
        same = ok and (pin is None or _same_release(have, pin))
        out[name] = ControllerPin(name, have, str(req.specifier), pin, ok,
                                  "" if same else CONTROLLER_ONLY.get(name, ""))
    unexplained = [p for p in out.values() if not p.ok and not p.reason]
    unexplained += [p for p in out.values() if p.ok and p.differs and not p.reason]
    if unexplained:
        raise MatrixError(
            f"this controller's venv does not meet {engine} {dist.version}'s own requirements: "
            + "; ".join(f"{p.package} {p.installed or 'not installed'}, {engine} requires "
                        f"{p.package}{p.required or ' (any version)'}"
                        + (f", the nodes run {p.pinned}" if p.pinned else "") for p in unexplained),
            hint="install the [verl] extra's versions (scripts/install-venv.sh), or say in "
                 "provision/engines.py CONTROLLER_ONLY why the difference is safe on the controller")
    return sorted(out.values(), key=lambda p: p.package)


def installed_version(name: str) -> str | None:
    """Distribution `name`'s version in this interpreter, None when it is not installed."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def controller_note(engine: str = "verl") -> str:
    """The launch log's line on this controller against verl's own requirements (controller_pins: raises
    for a difference nobody explained); what differs, each with the nodes' release where the row pins one."""
    try:
        pins = controller_pins(engine)
    except md.PackageNotFoundError:
        return f"controller: {engine} is not installed here"
    differ = [f"{p.package} {p.installed or 'not installed'}"
              + (f" (nodes: {p.pinned})" if p.pinned else "") for p in pins if p.note]
    if not differ:
        return f"controller: every requirement of {engine} met here as its metadata asks"
    return (f"controller: differs from {engine}'s own requirements, safe here as only its config is composed "
            f"and validated on the controller (provision/engines.py CONTROLLER_ONLY says why for each): "
            + ", ".join(differ))
