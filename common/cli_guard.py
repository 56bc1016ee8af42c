"""The one CLI guard of every ascend-ready command: an error this package raises becomes `error:` and
`hint:` lines on stderr and the exit code its class names (ascend_ready.errors), never a traceback.

Use `cls=GuardedGroup` (or `GuardedCommand`) on a CLI's top-level click group or command: everything
invoked under it is covered, subcommands added from other modules included, and `-h` works as `--help`.
Click's own usage errors (a missing or unknown option, a bad value) take the same shape: one `error:`
line, a `hint:` naming the command's `-h`, exit 2. Ctrl-C prints `error: interrupted` and exits 130.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import click

from ascend_ready.errors import AscendReadyError, ExitCode

__all__ = ["GuardedCommand", "GuardedGroup", "debug_option", "show_error", "show_usage_error"]


def show_error(error: AscendReadyError, command_path: str | None = None) -> int:
    """Print `error` as the CLIs do and return its exit code. An error raised without a hint still gets
    one (every fatal message says what to do next): its class's, naming `command_path`'s help."""
    click.echo(f"error: {error.message}", err=True)
    click.echo(f"hint: {error.hint or fallback_hint(error, command_path)}", err=True)
    return int(error.exit_code)


def fallback_hint(error: AscendReadyError, command_path: str | None = None) -> str:
    """What to do next after an error whose raiser gave no hint, by its exit code."""
    command = command_path or "the command"
    if error.exit_code == ExitCode.USAGE:
        return f"fix the value it names; `{command} -h` says what each option takes"
    if error.exit_code == ExitCode.UNREACHABLE:
        return "check that `ssh HOST true` works with the same user, key and known_hosts"
    return (f"the lines above say what stopped it; `ascend-check diagnose DIR` names known causes in a run's "
            f"logs, and `{command} -h` lists the options")


def show_usage_error(error: click.UsageError, command_path: str | None = None) -> int:
    """Print click's usage error as ours (`error:` and a `hint:` naming the command's help) and return 2."""
    message = error.format_message().replace("\n", " ").strip()
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]  # "No such option" -> "no such option", as ours read
    path = command_path or (error.ctx.command_path if error.ctx is not None else None) or "the command"
    click.echo(f"error: {message}", err=True)
    click.echo(f"hint: `{path} -h` lists its options and arguments", err=True)
    return int(ExitCode.USAGE)


def _path_error(exc: OSError) -> AscendReadyError | None:
    """A path the user typed that no system call can take (a name too long, a symlink loop), wherever it
    was first touched: a usage error naming it. Any other OSError is not known to be the user's."""
    import errno

    from ascend_ready.errors import ConfigError

    why = {errno.ENAMETOOLONG: "file name too long", errno.ELOOP: "a symlink loop"}.get(exc.errno)
    if why is None or exc.filename is None:
        return None
    name = str(exc.filename)
    shown = name if len(name) <= 80 else name[:77] + "..."
    return ConfigError(f"{shown}: {why}", hint="give a path whose every part is under 256 bytes, and no link "
                       "that points back to itself")


class _Guarded:
    def __init__(self, *args, context_settings: dict | None = None, **kwargs):
        # -h as well as --help on every command (click's contexts pass it down to subcommands).
        context_settings = {"help_option_names": ["-h", "--help"], **(context_settings or {})}
        super().__init__(*args, context_settings=context_settings, **kwargs)  # type: ignore[call-arg]

    def make_context(self, info_name, args, parent=None, **extra):
        # click parses the command line here: its usage errors become ours before anything runs
        try:
            return super().make_context(info_name, args, parent=parent, **extra)  # type: ignore[misc]
        except click.UsageError as exc:
            path = exc.ctx.command_path if exc.ctx is not None else " ".join(
                p for p in ((parent.command_path if parent else None), info_name) if p)
            raise click.exceptions.Exit(show_usage_error(exc, path)) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except AscendReadyError as exc:
            ctx.exit(show_error(exc, ctx.command_path))
        except click.UsageError as exc:  # a subcommand from elsewhere, or a callback's own usage error
            ctx.exit(show_usage_error(exc))
        except OSError as exc:
            error = _path_error(exc)
            if error is None:
                raise
            ctx.exit(show_error(error, ctx.command_path))
        except (KeyboardInterrupt, click.exceptions.Abort):
            click.echo("error: interrupted", err=True)
            ctx.exit(int(ExitCode.INTERRUPTED))


class GuardedCommand(_Guarded, click.Command):
    """A click command whose callback's errors go through the guard."""


class GuardedGroup(_Guarded, click.Group):
    """A click group whose callback and every subcommand's errors go through the guard."""

    command_class = GuardedCommand
    group_class = type  # nested groups are GuardedGroups too


def _debug_logs(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        import logging
        import sys

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format=f"{ctx.info_name}: %(name)s: %(message)s")


#: `--debug` on every CLI: log records (ours, paramiko's, ...) on stderr. `-v/--verbose` is a command's
#: "more output" (more rows, more detail), never logs.
debug_option = click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_debug_logs,
                            help="Log debug detail (ours and the libraries') to stderr.")
