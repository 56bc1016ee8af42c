"""Shared plumbing of the parsers: the model base class, the KIND registry and line helpers."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from ascend_ready.errors import ParseError

__all__ = ["PARSERS", "Line", "ParsedModel", "fail", "get_parser", "kinds", "numbered_lines", "parser"]


class ParsedModel(BaseModel):
    """Base of every parsed-output model: immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=ParsedModel)
ParserFn = Callable[[str], ParsedModel]

#: KIND -> parser function, filled by the @parser decorator when the modules are imported.
PARSERS: dict[str, ParserFn] = {}


def parser(kind: str) -> Callable[[Callable[[str], M]], Callable[[str], M]]:
    """Register `fn` as the parser of KIND (used by `ascend-check parse KIND FILE`)."""

    def register(fn: Callable[[str], M]) -> Callable[[str], M]:
        if kind in PARSERS and PARSERS[kind] is not fn:
            raise RuntimeError(f"two parsers registered for {kind!r}")
        PARSERS[kind] = fn
        return fn

    return register


def _load_all() -> None:
    """Import every parser module of this package (each registers its kinds), by its folder: the package
    itself imports this module, so this module does not import it back."""
    package = __name__.rpartition(".")[0]
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name != "base":
            importlib.import_module(f"{package}.{info.name}")


def get_parser(kind: str) -> ParserFn:
    """The parser registered for KIND; a ConfigError-like ParseError lists the known kinds."""
    _load_all()
    try:
        return PARSERS[kind]
    except KeyError:
        from ascend_ready.errors import ConfigError

        raise ConfigError(f"unknown output kind {kind!r}",
                          hint="choose one of: " + ", ".join(sorted(PARSERS))) from None


class Line(str):
    """A line of input that remembers its 1-based number, so errors can name it."""

    no: int

    def __new__(cls, text: str, no: int) -> Line:
        obj = super().__new__(cls, text)
        obj.no = no
        return obj


def numbered_lines(text: str) -> Iterator[Line]:
    """Lines of `text` without line endings, each carrying its 1-based number."""
    for no, raw in enumerate(text.splitlines(), start=1):
        yield Line(raw, no)


def fail(kind: str, reason: str, line: Line | str | None = None, *, line_no: int | None = None,
         hint: str | None = None) -> ParseError:
    """Build the ParseError for `line` (raise the result: `raise fail(...)`); `hint` says what to do."""
    if isinstance(line, Line) and line_no is None:
        line_no = line.no
    return ParseError(kind, reason, line_no=line_no, line=None if line is None else str(line), hint=hint)


def kinds() -> list[str]:
    """Every registered output KIND, sorted (what `ascend-check parse --list` prints)."""
    _load_all()
    return sorted(PARSERS)
