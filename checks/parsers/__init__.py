"""Pure parsers of Ascend vendor-tool output: `text -> model`, fail-closed.

Every parser registers itself under a KIND name (the one `ascend-check parse KIND FILE` takes)
and raises `ascend_ready.errors.ParseError` naming the line it could not read.
"""

from ascend_ready.checks.parsers.base import PARSERS, ParsedModel, get_parser, parser

__all__ = ["PARSERS", "ParsedModel", "get_parser", "parser"]
