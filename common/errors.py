"""The one exception hierarchy of ascend-ready.

Library code raises these; only the CLIs turn them into messages and exit codes. Every error
carries a `hint`: what the user should do next.
"""

from __future__ import annotations


class AscendReadyError(Exception):
    """Base of every error this package raises on purpose."""

    #: exit code a CLI uses for this error (2: usage/config, 1: a check/parse failed, 3: unreachable)
    exit_code = 2

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

    exit_code = 1

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

    exit_code = 3


class HostUnreachable(RemoteError):
    """A host could not be reached or authenticated over SSH."""


class CheckFailed(AscendReadyError):
    """One or more preflight checks failed."""

    exit_code = 1


class TrainingError(AscendReadyError):
    """A training run could not start or had to stop (NaN loss, OOM, failed preflight...)."""

    exit_code = 1
