"""The literal text every match of a regex contains: the scanner and the vendor graph test it with `in`
before they run the regex (both import it from here); and the words an error line holds."""

from __future__ import annotations

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

__all__ = ["ERROR_WORDS", "required_literal"]

#: A line that says it is an error or a failure holds one of these (`in` tests: cheaper than a regex). The
#: vendor graph's keyword groups that hold none are tried on every line the prefilter passes; the others only
#: on lines that hold one.
ERROR_WORDS = ("rror", "ail", "xception", "[ERROR]", "ERROR ", "FAIL", "nvalid", "refused", "enied")


def required_literal(pattern: str) -> str | None:
    """The longest run of literal characters every match of `pattern` contains (None if under 3): a
    substring test that skips the regex on lines that cannot match. Read from the regex's parse tree."""
    runs: list[str] = []
    current: list[str] = []

    def walk(items) -> None:
        for op, arg in items:
            name = op.name
            if name == "LITERAL":
                current.append(chr(arg))
            elif name == "SUBPATTERN" and arg[1] == 0 and arg[2] == 0:  # a plain group: its items in line
                walk(arg[3])
            elif name == "AT":  # \b, ^, $: zero width, the literals around it stay adjacent
                continue
            else:
                runs.append("".join(current))
                current.clear()

    walk(sre_parse.parse(pattern))
    runs.append("".join(current))
    best = max(runs, key=len)
    return best if len(best) >= 3 else None
