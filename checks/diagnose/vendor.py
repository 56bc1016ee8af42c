"""MindCluster ascend-fd's knowledge graph as a matcher (vendor_kg.yml, issue 31): the vendor's entity codes
and log keywords, with causes and fixes of our own families.

A line is matched against an entity when it holds every keyword of one of the entity's groups, in order (as
ascend-fd matches them), or its regex. Keywords are indexed by a whole word each contains, so a line costs one
word split and a few set lookups, not one substring test per entity.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import Field, PrivateAttr, field_validator

from ascend_ready.checks.diagnose.literals import ERROR_WORDS
from ascend_ready.checks.diagnose.literals import required_literal as _required_literal
from ascend_ready.checks.diagnose.model import Entry, Family, _check_sources, _load, _Model

__all__ = ["VendorGraph", "load_vendor_graph"]

KG_FILE = Path(__file__).with_name("vendor_kg.yml")
_WORD_RE = re.compile(r"\w+")
# a keyword that is a fault code on its own: capitals and digits, at least three digits (MIE03E400008)
_CODE_KEYWORD_RE = re.compile(r"(?=[A-Z0-9_]*\d{3})[A-Z][A-Z0-9_]{5,}")
# a word of a keyword that is a whole word in any line holding the keyword: bounded inside the keyword
_INNER_WORD_RE = re.compile(r"(?<=\W)\w{3,}(?=\W)")


class KgFamily(_Model):
    title: str
    family: Family
    causes: list[str] = Field(min_length=1)
    fix: str
    check_ids: list[str]


class KgEntity(_Model):
    code: str
    family: str
    log: str = Field(description="the ascend-fd log type the entity is found in")
    in_: list[list[str]] = Field(default_factory=list, alias="in")
    regex: str | None = None
    leads_to: list[str] = Field(default_factory=list)

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            re.compile(v)
        return v


class VendorGraph(_Model):
    schema_version: int
    source: str
    commit: str
    families: dict[str, KgFamily]
    entities: list[KgEntity]
    _entries: dict = PrivateAttr(default_factory=dict)
    _by_word: dict = PrivateAttr(default_factory=dict)
    _plain_by_word: dict = PrivateAttr(default_factory=dict)
    _scan: list = PrivateAttr(default_factory=list)
    _regexes: list = PrivateAttr(default_factory=list)
    _caused_by: dict = PrivateAttr(default_factory=dict)
    _buckets: dict = PrivateAttr(default_factory=dict)

    @field_validator("source")
    @classmethod
    def _cited(cls, v: str) -> str:
        return _check_sources([v])[0]

    def model_post_init(self, _ctx) -> None:
        bad = [e.code for e in self.entities if e.family not in self.families]
        if bad:
            raise ValueError(f"entities of no family: {bad[:5]}")
        self._entries = {
            name: Entry.model_construct(
                id=f"kg-{name}", code="{code}", family=fam.family, kind="fault", title="", patterns=[],
                causes=list(fam.causes), fix=fam.fix, check_ids=list(fam.check_ids),
                sources=[f"{self.source}"], examples=[], layer=None, explained_by=[],
            )
            for name, fam in self.families.items()
        }
        # groups with no whole word to index by are tested on every line (self._scan)
        # a regex is tried only on lines holding the literal every match of it contains; one without (the
        # graph's generic CANN-code and ERRxxxxx patterns) is what signatures.yml and codes.yml already read
        self._regexes = [(e, lit, re.compile(e.regex)) for e in self.entities if e.regex
                         if (lit := _required_literal(e.regex)) is not None]
        # a group none of whose keywords says error or fail (an INFO/WARNING wording, a bare MindIE code) is
        # indexed apart: it is tried on every line the prefilter passes, the others on error lines only
        for e in self.entities:
            for group in e.in_:
                words = [w for kw in group for w in _INNER_WORD_RE.findall(f" {kw} ")]
                if not words:
                    self._scan.append((e, group))
                    continue
                plain = not any(w in kw for kw in group for w in ERROR_WORDS)
                index = self._plain_by_word if plain else self._by_word
                index.setdefault(max(words, key=len), []).append((e, group))
        for e in self.entities:
            for dst in e.leads_to:
                self._caused_by.setdefault(dst, set()).add(e.code)

    def causes_of(self, code: str) -> set[str]:
        """The entities that lead to this one (its causes, by the graph's rules)."""
        return self._caused_by.get(code, set())

    def entry(self, family: str) -> Entry:
        return self._entries[family]

    def title(self, e: KgEntity) -> str:
        return f"{self.families[e.family].title} ({e.code}, ascend-fd knowledge graph)"

    def match(self, text: str) -> list[KgEntity]:
        """The entities one line that says it is an error or a failure shows, each once, in graph order."""
        found: dict[str, KgEntity] = {}
        words = set(_WORD_RE.findall(text))
        candidates = [c for w in words.intersection(self._plain_by_word) for c in self._plain_by_word[w]]
        candidates += [c for w in words.intersection(self._by_word) for c in self._by_word[w]]
        for e, group in (*candidates, *self._scan):
            if e.code not in found and _in_order(group, text):
                found[e.code] = e
        for e, lit, rx in self._regexes:
            if lit in text and e.code not in found and rx.search(text):
                found[e.code] = e
        return list(found.values())

    def plain_buckets(self, prefilter: tuple[str, ...]) -> list[tuple[re.Pattern, tuple[str, ...], list]]:
        """The groups that name a fault code and say no error (MindIE's `MIE03E400008`), by the first
        prefilter pattern one of their keywords holds: a line that says no error can show only the groups of
        a pattern it holds too. A code is a fault whatever the line says; a plain wording on a line that says
        no error is a warning, found when its line says error (a plog's `[ERROR]` tag, an exception). Built
        once per prefilter."""
        key = tuple(prefilter)
        if key not in self._buckets:
            rxs = [re.compile(p) for p in prefilter]
            buckets: dict[int, list] = {}
            for groups in self._plain_by_word.values():
                for e, group in groups:
                    if not any(_CODE_KEYWORD_RE.fullmatch(kw) for kw in group):
                        continue  # a wording that says no error, on a line that says none: a warning
                    at = next((i for i, rx in enumerate(rxs) if any(rx.search(kw) for kw in group)), None)
                    if at is not None:
                        buckets.setdefault(at, []).append((e, group))
            # each bucket's longest keywords, once each: a line holding none is rejected in one `any`
            self._buckets[key] = [
                (rxs[i], tuple(dict.fromkeys(max(g, key=len) for _e, g in buckets[i])), buckets[i])
                for i in sorted(buckets)
            ]
        return self._buckets[key]

    def match_plain(self, text: str, buckets: list) -> list[KgEntity]:
        """The entities a line that says no error shows: only groups that say none either, tried by bucket
        (a regex search and a few substring tests, no word split: most such lines are warnings)."""
        found: dict[str, KgEntity] = {}
        for rx, longest, groups in buckets:
            if rx.search(text) and any(kw in text for kw in longest):
                for e, group in groups:
                    if e.code not in found and _in_order(group, text):
                        found[e.code] = e
        return list(found.values())


def _in_order(keywords: list[str], text: str) -> bool:
    at = 0
    for kw in keywords:
        at = text.find(kw, at)
        if at == -1:
            return False
        at += len(kw)
    return True


@lru_cache(maxsize=2)
def load_vendor_graph(path: Path = KG_FILE) -> VendorGraph:
    return _load(path, VendorGraph, "vendor knowledge graph")
