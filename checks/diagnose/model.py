"""The diagnosis knowledge base (signatures.yml, validated here) and the report `diagnose` prints.

Both are pydantic models with extra="forbid": a typo in the YAML fails loading with `field: message`,
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
    "DiagnoseReport",
    "Entry",
    "Evidence",
    "Finding",
    "KnowledgeBase",
    "json_schema",
    "load_knowledge_base",
]

DIAGNOSE_SCHEMA_VERSION = 1
KB_FILE = Path(__file__).with_name("signatures.yml")

#: A source is a web address, or a GitHub `owner/repo#N` (issue or PR) or `owner/repo:path`.
_SOURCE_RE = re.compile(r"^(?:https://\S+|[\w.-]+/[\w.-]+#\d+|[\w.-]+/[\w.-]+:\S+)$")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_MACRO_RE = re.compile(r"\{([A-Z_]+)\}")

#: fault: this actor's own failure. remote: usually the echo of a failure elsewhere (timeouts waiting on
#: a peer rank); reported as a consequence when a fault came first. wrapper: a generic envelope (a
#: Python exception, a torch_npu call with its code); dropped when a specific entry matched the same actor.
Kind = Literal["fault", "remote", "wrapper"]
Family = Literal[
    "hccl", "runtime", "driver", "operator", "torch_npu", "loader", "env", "dcmi", "kernel", "python"
]


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

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("use lowercase letters, digits and '-'")
        return v

    @field_validator("sources")
    @classmethod
    def _cited(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not _SOURCE_RE.match(s)]
        if bad:
            raise ValueError(f"not a URL or owner/repo#N: {bad}")
        return v


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
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return KnowledgeBase.model_validate(data)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {exc}") from None
    except ValidationError as exc:
        lines = [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(f"{path}: invalid knowledge base\n" + "\n".join(lines)) from None


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
    actor: str | None = Field(None, description="'rank N', 'device N' or 'pid N'; null when unknown")
    first_seen: str | None = Field(None, description="timestamp of the first match, when the lines carry one")
    family: str
    kind: Kind
    sources: list[str]


class DiagnoseReport(_Model):
    """`ascend-check diagnose --format json`."""

    schema_version: Literal[1] = DIAGNOSE_SCHEMA_VERSION
    findings: list[Finding] = Field(description="ordered by which came first")
    files: list[str] = Field(description="every file read")
    lines: int = Field(description="lines read in all")
    bytes: int = Field(description="bytes read in all")


def json_schema() -> dict:
    """JSON Schema of the diagnose report, as published in checks/schemas/diagnose.schema.json."""
    schema = DiagnoseReport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://ascend-ready.dev/schemas/ascend-check-diagnose-v{DIAGNOSE_SCHEMA_VERSION}.json"
    return schema
