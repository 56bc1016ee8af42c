"""The one CLI guard of every ascend-ready command: an error this package raises becomes `error:` and
`hint:` lines on stderr and the exit code its class names (ascend_ready.errors), never a traceback.

Use `cls=GuardedGroup` (or `GuardedCommand`) on a CLI's top-level click group or command: everything
invoked under it is covered, subcommands added from other modules included, and `-h` works as `--help`.
Click's own usage errors keep click's message and exit 2; Ctrl-C prints `error: interrupted` and exits
130. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import click

from ascend_ready.errors import AscendReadyError, ExitCode

__all__ = ["GuardedCommand", "GuardedGroup", "show_error"]


def show_error(error: AscendReadyError) -> int:
    """Print `error` as the CLIs do and return its exit code."""
    click.echo(f"error: {error.message}", err=True)
    if error.hint:
        click.echo(f"hint: {error.hint}", err=True)
    return int(error.exit_code)


class _Guarded:
    def __init__(self, *args, context_settings: dict | None = None, **kwargs):
        # -h as well as --help on every command (click's contexts pass it down to subcommands).
        context_settings = {"help_option_names": ["-h", "--help"], **(context_settings or {})}
        super().__init__(*args, context_settings=context_settings, **kwargs)  # type: ignore[call-arg]

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except AscendReadyError as exc:
            ctx.exit(show_error(exc))
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            ctx.exit(int(ExitCode.INTERRUPTED))


class GuardedCommand(_Guarded, click.Command):
    """A click command whose callback's errors go through the guard."""


class GuardedGroup(_Guarded, click.Group):
    """A click group whose callback and every subcommand's errors go through the guard."""

    command_class = GuardedCommand
    group_class = type  # nested groups are GuardedGroups too
