"""The one exception hierarchy of ascend-ready.

Library code raises these; only the CLI guard (`ascend_ready.cli_guard`) turns them into messages
and exit codes, and each class carries its exit code. Every error carries a `hint`: what to do next.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes every ascend-ready CLI documents (each error class names its own)."""

    OK = 0
    #: a check failed or could not be judged, an output could not be parsed, training stopped
    FAILED = 1
    #: usage or configuration error (click's own usage errors exit 2 as well)
    USAGE = 2
    #: a host could not be reached and nothing failed
    UNREACHABLE = 3
    #: interrupted (Ctrl-C): 128 + SIGINT, as a shell reports it
    INTERRUPTED = 130


class AscendReadyError(Exception):
    """Base of every error this package raises on purpose."""

    #: exit code a CLI uses for this error
    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(AscendReadyError):
    """Bad configuration, inventory, profile or command-line input."""


class MatrixError(ConfigError):
    """The compatibility matrix file is invalid, or no stack fits a request."""


class MissingExtraError(ConfigError):
    """An optional dependency group is not installed (the hint says which pip line to run)."""


class PrivilegeError(ConfigError):
    """The operation needs root."""


class ParseError(AscendReadyError):
    """Vendor-tool output could not be read. Always names the line that broke."""

    exit_code = ExitCode.FAILED

    def __init__(self, kind: str, reason: str, *, line_no: int | None = None, line: str | None = None,
                 hint: str | None = None):
        where = f" at line {line_no}" if line_no is not None else ""
        shown = f": {line!r}" if line is not None else ""
        super().__init__(f"cannot parse {kind}{where}: {reason}{shown}",
                         hint=hint or "report this output and the tool version to the maintainers")
        self.kind = kind
        self.reason = reason
        self.line_no = line_no
        self.line = line


class SimError(AscendReadyError):
    """The simulated cluster could not be built, started, changed or torn down."""


class RemoteError(AscendReadyError):
    """A remote command could not be run (not: it ran and failed)."""

    exit_code = ExitCode.UNREACHABLE


class HostUnreachable(RemoteError):
    """A host could not be reached or authenticated over SSH (the transport raises it; a fan-out
    records it in the host's snapshot instead of stopping the run)."""


class TrainingError(AscendReadyError):
    """A training run could not start or had to stop (NaN loss, OOM, failed preflight...)."""

    exit_code = ExitCode.FAILED


def reasons(*parts: tuple[str, object]) -> str:
    """The `; `-joined parts of a refusal's message: each (template, what) whose `what` is not empty, the
    template's last `{}` replaced by `what` (a list or tuple joined with ", "); "" when every one is."""
    out = []
    for template, what in parts:
        if what:
            head, _, tail = template.rpartition("{}")
            out.append(head + (", ".join(what) if isinstance(what, (list, tuple)) else str(what)) + tail)
    return "; ".join(out)


def validation_lines(exc, model: type | None = None) -> list[str]:
    """A pydantic ValidationError as `field: message` lines (the style every CLI prints); a key the model
    does not know names the nearest one it does (`model`: the model validated, to find them)."""
    import difflib

    lines = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        msg = err["msg"]
        if err.get("type") == "extra_forbidden" and model is not None and loc:
            near = difflib.get_close_matches(str(loc[-1]), _fields_at(model, loc[:-1]), n=1, cutoff=0.6)
            if near:
                msg += f" (did you mean {near[0]}?)"
        lines.append(f"{'.'.join(str(p) for p in loc) or '(top)'}: {msg}")
    return lines


def _fields_at(model: type, loc: tuple) -> list[str]:
    """The field names of the (sub)model `loc` points into: a part that is a field descends into the model
    its annotation holds (through list/dict/Optional); any other part is a key or index and stays."""
    import typing

    def inner(annotation):
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            return annotation
        for arg in typing.get_args(annotation):
            found = inner(arg)
            if found is not None:
                return found
        return None

    for part in loc:
        field = getattr(model, "model_fields", {}).get(part) if isinstance(part, str) else None
        if field is not None:
            model = inner(field.annotation) or model
    return list(getattr(model, "model_fields", {}))
