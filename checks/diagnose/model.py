"""The diagnosis knowledge base (signatures.yml, codes.yml; validated here) and the report `diagnose` prints.

All are pydantic models with extra="forbid": a typo in the YAML fails loading with `field: message`,
and the report's JSON Schema is published as checks/schemas/diagnose.schema.json.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ascend_ready.errors import ConfigError

__all__ = [
    "DIAGNOSE_SCHEMA_VERSION",
    "LAYER_ORDER",
    "CodeBook",
    "CodeFamily",
    "DiagnoseReport",
    "Entry",
    "Evidence",
    "Finding",
    "KnowledgeBase",
    "json_schema",
    "load_code_book",
    "load_knowledge_base",
]

DIAGNOSE_SCHEMA_VERSION = 1
KB_FILE = Path(__file__).with_name("signatures.yml")
CODES_FILE = Path(__file__).with_name("codes.yml")

#: A source is a web address, or a GitHub `owner/repo#N` (issue or PR) or `owner/repo:path`.
_SOURCE_RE = re.compile(r"^(?:https://\S+|[\w.-]+/[\w.-]+#\d+|[\w.-]+/[\w.-]+:\S+)$")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_MACRO_RE = re.compile(r"\{([A-Z_]+)\}")

#: fault: this actor's own failure. remote: usually the echo of a failure elsewhere (timeouts waiting on
#: a peer rank); reported as a consequence when a fault came first. wrapper: a generic envelope (a
#: Python exception, a torch_npu call with its code); dropped when a specific entry matched the same actor.
Kind = Literal["fault", "remote", "wrapper"]
Family = Literal[
    "hccl", "runtime", "driver", "operator", "torch_npu", "loader", "env", "dcmi", "kernel", "python",
    "device", "launcher", "distributed", "code",
]
#: Where in the stack a failure shows, lowest first: when two findings cannot be ordered by their
#: timestamps (none, or the same block of one process's output), the lower layer came first - a kernel
#: that faulted on the device comes before the runtime call that reports it, which comes before the
#: collective that times out waiting for it, which comes before the Python exception that ends the job.
#: `host` is the machine itself (the kernel's OOM killer, a signal that killed the process).
Layer = Literal["host", "device", "driver", "runtime", "hccl", "framework"]
LAYER_ORDER: dict[str, int] = {name: i for i, name in enumerate(Layer.__args__)}
_FAMILY_LAYER: dict[str, str] = {
    "hccl": "hccl", "runtime": "runtime", "driver": "driver", "operator": "runtime", "torch_npu": "framework",
    "loader": "framework", "env": "framework", "dcmi": "driver", "kernel": "host", "python": "framework",
    "device": "device", "launcher": "host", "distributed": "framework", "code": "runtime",
}


def _check_sources(v: list[str]) -> list[str]:
    bad = [s for s in v if not _SOURCE_RE.match(s)]
    if bad:
        raise ValueError(f"not a URL or owner/repo#N: {bad}")
    return v


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Entry(_Model):
    """One known failure: how its log lines look, what it means and what to do."""

    id: str = Field(description="stable slug, unique in the knowledge base (e.g. hccl-ei0006)")
    code: str = Field(
        description="the code as the log prints it (EI0006, 507033, -8020, libhccl.so); "
        "{name} is filled from a named group of the matching pattern"
    )
    family: Family
    kind: Kind = "fault"
    title: str = Field(description="one line; {name} placeholders like `code`")
    patterns: list[str] = Field(
        min_length=1,
        description="Python regexes searched in each log line; {MACRO} expands a top-level macro",
    )
    causes: list[str] = Field(min_length=1, description="likely causes, most likely first")
    fix: str
    check_ids: list[str] = Field(
        description="ascend-check checks that would have caught it before the run (may be empty)"
    )
    sources: list[str] = Field(min_length=1, description="where this was learnt: URL or owner/repo#N")
    examples: list[str] = Field(
        min_length=1, description="lines quoted from the sources; every one must match a pattern"
    )
    layer: Layer | None = Field(None, description="where the failure shows (default: from the family)")
    general: bool = Field(
        False,
        description="a rule by structure (an errno and the path it names, a module name): not reported on a "
        "line a specific entry also named, so the specific cause stands alone",
    )
    explained_by: list[str] = Field(
        default_factory=list,
        description="entry ids of more specific failures this one reports again (a generic task timeout "
        "after an HCCL notify wait, a runtime exception code after the device's own exception record): when "
        "one of them is found, this finding is its consequence",
    )

    @property
    def effective_layer(self) -> str:
        return self.layer or _FAMILY_LAYER[self.family]

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("use lowercase letters, digits and '-'")
        return v

    @field_validator("sources")
    @classmethod
    def _cited(cls, v: list[str]) -> list[str]:
        return _check_sources(v)


class KnowledgeBase(_Model):
    """signatures.yml: the prefilter every signature line passes, shared regex macros, the entries."""

    schema_version: Literal[1]
    prefilter: list[str] = Field(
        min_length=1,
        description="regexes with a literal start; a line none of them finds is never matched further",
    )
    macros: dict[str, str] = Field(default_factory=dict)
    entries: list[Entry] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> KnowledgeBase:
        seen: set[str] = set()
        for entry in self.entries:
            if entry.id in seen:
                raise ValueError(f"entry {entry.id}: id used twice")
            seen.add(entry.id)
        for entry in self.entries:
            unknown = [i for i in entry.explained_by if i not in seen or i == entry.id]
            if unknown:
                raise ValueError(f"entry {entry.id}: explained_by names no other entry: {unknown}")
        prefilter = [_compile(p, f"prefilter {p!r}") for p in self.prefilter]
        for entry in self.entries:
            compiled = self.compiled(entry)
            for example in entry.examples:
                if not any(rx.search(example) for rx in compiled):
                    raise ValueError(f"entry {entry.id}: no pattern matches its example {example!r}")
                if not any(rx.search(example) for rx in prefilter):
                    raise ValueError(f"entry {entry.id}: the prefilter would skip its example {example!r}")
        return self

    def expand(self, pattern: str) -> str:
        def sub(m: re.Match) -> str:
            if m[1] not in self.macros:
                raise ValueError(f"unknown macro {{{m[1]}}} in {pattern!r}")
            return self.macros[m[1]]

        return _MACRO_RE.sub(sub, pattern)

    def compiled(self, entry: Entry) -> list[re.Pattern[str]]:
        return [_compile(self.expand(p), f"entry {entry.id} pattern {p!r}") for p in entry.patterns]


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{what}: {exc}") from None


@lru_cache(maxsize=4)
def load_knowledge_base(path: Path = KB_FILE) -> KnowledgeBase:
    """The bundled knowledge base (or another file of the same shape), validated."""
    return _load(path, KnowledgeBase, "knowledge base")


# ---------------------------------------------------------------- the vendor's code lists (codes.yml)

_CANN_CODE_RE = re.compile(r"^E[0-9A-Z]\d{4}$")
_ACL_CODE_RE = re.compile(r"^[1-5]\d{5}$")


class CodeFamily(_Model):
    """A family of documented codes (a CANN module's E?xxxx codes, or a range of ACL return codes): the
    meaning, causes and fix in our words, and every code of the family with the vendor's name for it."""

    id: str
    name: str = Field(description="the module or range, in the vendor's words (HCCL, RTS, driver...)")
    prefixes: list[str] = Field(min_length=1, description="E-code prefixes (EI) or ACL code prefixes (107)")
    layer: Layer
    meaning: str
    causes: list[str] = Field(min_length=1)
    fix: str
    check_ids: list[str]
    sources: list[str] = Field(min_length=1)
    remote: list[str] = Field(
        default_factory=list, description="codes of the family that are timeouts waiting on another actor"
    )
    codes: dict[str, str | None] = Field(description="code -> the vendor's identifier (errTitle or ACL name)")

    @field_validator("sources")
    @classmethod
    def _cited(cls, v: list[str]) -> list[str]:
        return _check_sources(v)


class HcclResults(_Model):
    """The HcclResult values an HCCL call returns, by number."""

    sources: list[str] = Field(min_length=1)
    codes: dict[str, str] = Field(min_length=1)

    @field_validator("sources")
    @classmethod
    def _cited(cls, v: list[str]) -> list[str]:
        return _check_sources(v)


class CodeMeaning(_Model):
    """A kind of failure a code's vendor name states (NOT_SUPPORT, NO_DEVICE): its causes and fix replace the
    family's for every code whose name matches."""

    match: str = Field(description="regex searched in the vendor's identifier of the code")
    meaning: str
    causes: list[str] = Field(min_length=1)
    fix: str
    check_ids: list[str]

    @field_validator("match")
    @classmethod
    def _regex(cls, v: str) -> str:
        _compile(v, f"meaning {v!r}")
        return v


class CodeBook(_Model):
    """codes.yml: every documented CANN error code, ACL/runtime return code and HcclResult, by family."""

    schema_version: Literal[1]
    cann: list[CodeFamily] = Field(min_length=1)
    acl: list[CodeFamily] = Field(min_length=1)
    hccl_results: HcclResults
    meanings: list[CodeMeaning] = Field(default_factory=list)

    def meaning(self, name: str | None) -> CodeMeaning | None:
        """The meaning the vendor's name of a code states, if one of `meanings` matches it."""
        if not name:
            return None
        return next((m for m in self.meanings if re.search(m.match, name)), None)

    @model_validator(mode="after")
    def _consistent(self) -> CodeBook:
        for families, code_re, width in ((self.cann, _CANN_CODE_RE, 2), (self.acl, _ACL_CODE_RE, 3)):
            owner: dict[str, str] = {}
            for fam in families:
                for prefix in fam.prefixes:
                    if len(prefix) != width or prefix in owner:
                        raise ValueError(f"family {fam.id}: prefix {prefix!r} is not {width} characters or "
                                         f"is already {owner.get(prefix)}'s")
                    owner[prefix] = fam.id
                for code in fam.codes:
                    if not code_re.match(code) or code[:width] not in fam.prefixes:
                        raise ValueError(f"family {fam.id}: {code!r} is not one of its codes")
                bad = [c for c in fam.remote if c not in fam.codes]
                if bad:
                    raise ValueError(f"family {fam.id}: remote codes not listed in codes: {bad}")
        return self

    def family(self, code: str) -> CodeFamily | None:
        """The family a code belongs to by its prefix (whether or not the code itself is listed)."""
        cann = _CANN_CODE_RE.match(code) is not None
        width = 2 if cann else 3
        for fam in self.cann if cann else self.acl:
            if code[:width] in fam.prefixes:
                return fam
        return None

    def count(self) -> int:
        return sum(len(f.codes) for f in (*self.cann, *self.acl)) + len(self.hccl_results.codes)

    def example_lines(self) -> list[tuple[str, str]]:
        """(code, line) for every documented code as logs print it: a CANN code as `CODE: [PID: p] <time>
        <message>`, an ACL code as torch_npu's `NPU function error: ..., error code is CODE` and by its
        constant's name. What the coverage test and benchmark feed `diagnose`."""
        lines = [(c, f"{c}: [PID: 4242] 2025-06-01-10:00:00.000.000 something failed")
                 for fam in self.cann for c in fam.codes]
        for fam in self.acl:
            for code, name in fam.codes.items():
                lines.append((code, f"RuntimeError: x.cpp:1 NPU function error: f, error code is {code}"))
                if name:
                    lines.append((code, f"[ERROR] aclFoo failed with {name}"))
        return lines


@lru_cache(maxsize=4)
def load_code_book(path: Path = CODES_FILE) -> CodeBook:
    """The bundled code lists (or another file of the same shape), validated."""
    return _load(path, CodeBook, "code list")


def _load(path: Path, model, what: str):
    try:
        # libyaml's loader where PyYAML has it: the knowledge files load in a fifth of the time
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=loader)
        return model.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {exc}") from None
    except ValidationError as exc:
        lines = [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(f"{path}: invalid {what}\n" + "\n".join(lines)) from None


# ---------------------------------------------------------------- the report


class Evidence(_Model):
    """A log line a signature matched."""

    file: str
    line: int = Field(description="1-based line number in that file")
    text: str = Field(description="the line, decoded with errors='replace' and cut at 2000 characters")


class Finding(_Model):
    """One known error of one actor (rank, device or process), with the lines that show it."""

    id: str = Field(description="knowledge-base entry id")
    code: str
    title: str
    causes: list[str]
    fix: str
    check_ids: list[str]
    evidence: list[Evidence] = Field(description="the first matched lines, in log order (at most 20)")
    matches: int = Field(description="how many lines matched in all")
    role: Literal["cause", "consequence"] = Field(
        description="cause: the first failure, or one independent of it; consequence: a timeout or peer "
        "error that follows an earlier failure elsewhere"
    )
    caused_by: str | None = Field(None, description="for a consequence: the finding it follows (code, actor)")
    rank: int | None = Field(None, description="the rank the lines belong to, when the log says")
    actor: str | None = Field(
        None, description="'rank N', 'device N', 'pid N' or 'node NAME' (with ' on NAME' when the node is "
        "known); null when unknown"
    )
    first_seen: str | None = Field(None, description="timestamp of the first match, when the lines carry one")
    family: str
    kind: Kind
    sources: list[str]
    layer: str | None = Field(
        None, description="where the failure shows: host, device, driver, runtime, hccl or framework"
    )
    node: str | None = Field(None, description="the node whose log the lines come from, when known")


class DiagnoseReport(_Model):
    """`ascend-check diagnose --format json`."""

    schema_version: Literal[1] = DIAGNOSE_SCHEMA_VERSION
    findings: list[Finding] = Field(description="ordered by which came first")
    files: list[str] = Field(description="every file read")
    lines: int = Field(description="lines read in all")
    bytes: int = Field(description="bytes read in all")
    skipped: list[str] = Field(
        default_factory=list, description="files a directory walk found and did not read (binary content)"
    )


def json_schema() -> dict:
    """JSON Schema of the diagnose report, as published in checks/schemas/diagnose.schema.json."""
    schema = DiagnoseReport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ascend-ready.dev/schemas/ascend-check-diagnose-v{DIAGNOSE_SCHEMA_VERSION}.json"
    return schema
