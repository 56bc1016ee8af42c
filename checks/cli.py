"""`ascend-check`: node preflight over SSH (or on this node), from a snapshot, and its helpers.

Exit codes: 0 every check passed (warnings allowed); 1 a check failed or could not be judged;
2 usage or configuration error; 3 a host was unreachable and no check failed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time
from pathlib import Path

import click

from ascend_ready.checks.cli_options import (
    check_waived,
    deprecated_alias,
    merged_params,
    preflight_options,
    target_options,
    targets_from,
)
from ascend_ready.cli_guard import GuardedGroup, debug_option
from ascend_ready.errors import ConfigError, ExitCode

_FORMATS = ("table", "json")


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector off while the run imports its modules and picks its checks: the
    import of hundreds of modules creates objects that live for the whole run, and the collector's
    passes over them cost a tenth of the start-up. Reference counting still frees the rest."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _note_coverage(spec) -> None:
    """Say at write time what ascend-train will say at launch: a spec that left out a check training needs
    is refused there (the preflight's own exit code is about the checks it ran)."""
    from ascend_ready.checks.cluster.launchspec import LaunchSpecRefused

    if spec.waived:
        click.echo(f"launch spec: waived (training may start without them judged): {', '.join(spec.waived)}",
                   err=True)
    try:
        spec.require_covered()
    except LaunchSpecRefused as exc:
        click.echo(f"warning: ascend-train will refuse this launch spec: {exc.message}", err=True)


class _Ticker:
    """Progress for a log (stderr not a terminal): nothing for the first second, then one line every
    `every_s` seconds saying how many hosts are done, until stopped."""

    def __init__(self, total: int, what: str, every_s: float = 5.0, first_s: float = 1.0):
        import threading

        self.total, self.what, self.done, self.every_s, self.first_s = total, what, 0, every_s, first_s
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def advance(self, _host=None) -> None:
        self.done += 1

    def _run(self) -> None:
        wait = self.first_s
        while not self._stop.wait(wait):
            click.echo(f"{self.what}: {self.done} of {self.total} host(s) done, "
                       f"{time.monotonic() - self.started:.0f} s", err=True)
            wait = self.every_s


def _collect_with_progress(targets, options, specs, *, quiet: bool = False, log_progress: bool = False):
    """Fan out with a live progress line on stderr when it is a terminal; else, with `log_progress`, a
    line every 5 s once the run takes more than a second (`quiet`: neither)."""
    from ascend_ready.checks.preflight import collect_snapshot

    if quiet:
        return collect_snapshot(targets, options, specs=specs)
    if not sys.stderr.isatty():  # rich is not even imported then: a scripted run starts faster
        if not log_progress:
            return collect_snapshot(targets, options, specs=specs)
        with _Ticker(len(targets), "collect") as ticker:
            return collect_snapshot(targets, options, progress=ticker.advance, specs=specs)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        return collect_snapshot(targets, options, specs=specs)
    columns = (
        TextColumn("probing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=len(targets))

        def progress(host):
            note = "" if host.reachable else f" ({host.name} unreachable)"
            bar.update(task, advance=1, description=f"{host.name} {host.collect_s:.2f}s{note}")

        return collect_snapshot(targets, options, progress=progress, specs=specs)


def _check_rank_table_args(table_file, hosts_file, exclude, snapshot_dir) -> None:
    """--rank-table/--hostfile/--exclude refused before any host is probed (exit 2, saying what to type)."""
    from ascend_ready.checks.cluster.ranktable import parse_exclude
    from ascend_ready.checks.html_report import check_output_path

    check_output_path(table_file, "--rank-table")
    check_output_path(hosts_file, "--hostfile")
    parse_exclude(exclude)
    if exclude and not (table_file or hosts_file):
        raise ConfigError("--exclude chooses what the rank table leaves out, and no rank table was asked for",
                          hint="add --rank-table hccl.json and/or --hostfile hostfile")
    if (table_file or hosts_file) and snapshot_dir:
        raise ConfigError("--rank-table/--hostfile need a live run (they name each node's address and may "
                          "read its device IPs again)",
                          hint="run ascend-check -i INVENTORY --rank-table hccl.json")


def _emit(report, fmt: str, junit: str | None, prometheus: str | None, verbose: bool) -> None:
    from ascend_ready.checks.report import (
        render_json,
        render_junit,
        render_prometheus,
        render_table,
        write_atomic,
    )

    if fmt == "json":
        click.echo(render_json(report), nl=False)
    else:
        from rich.console import Console

        render_table(report, Console(soft_wrap=False, width=max(100, Console().width)), verbose=verbose)
    for path, render in ((junit, render_junit), (prometheus, render_prometheus)):
        if path:
            try:
                write_atomic(Path(path), render(report))
            except OSError as exc:
                raise ConfigError(f"cannot write {path}: {exc.strerror or exc}",
                                  hint="pick a file in a directory you may write") from None


@click.group(
    cls=GuardedGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]}
)
@target_options
@click.option(
    "--snapshot",
    "snapshot_dir",
    type=click.Path(file_okay=False),
    help="Judge a snapshot directory (from `ascend-check collect`) instead of live hosts.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_FORMATS),
    default="table",
    show_default=True,
    help="Report on stdout as a table or as JSON (schema: `ascend-check schema`).",
)
@click.option("--junit", type=click.Path(dir_okay=False), help="Also write a JUnit XML report here.")
@click.option(
    "--prometheus",
    type=click.Path(dir_okay=False),
    help="Also write node_exporter textfile metrics here (e.g. .../textfile/ascend_check.prom).",
)
@click.option(
    "--html",
    "html_file",
    metavar="FILE",
    help="Also write a self-contained HTML page here: node x check grid, each problem's evidence and fix.",
)
@click.option(
    "--launch-spec",
    "launch_spec_file",
    metavar="FILE",
    help="Also write the launch spec here (JSON, `ascend-check schema launch-spec`): per host its verdict, "
    "healthy devices, stack and NIC to the master, and the rank table (for ascend-train --launch-spec).",
)
@click.option(
    "--launch-spec-valid",
    "launch_spec_valid_s",
    type=click.IntRange(min=1),
    default=3600,
    show_default=True,
    metavar="SECONDS",
    help="How long the launch spec stays valid.",
)
@click.option(
    "--waive",
    multiple=True,
    metavar="CHECK",
    help="Record in the launch spec that training may start without CHECK judged (repeatable; "
    "ascend-train prints each waived check). Without it, a spec of a run narrowed by --select/--skip that "
    "left out a check the profile requires for training (training_checks) is refused.",
)
@click.option(
    "--rank-table",
    "rank_table_file",
    metavar="FILE",
    help="Also write the HCCL rank table here (hccl.json, RANK_TABLE_FILE): every reachable host's devices "
    "npu-smi shows healthy and whose device IP was read, less --exclude.",
)
@click.option(
    "--hostfile",
    "hostfile_file",
    metavar="FILE",
    help="Also write the host list of that rank table here (`HOST slots=N` per line, for torchrun/mpirun "
    "launchers).",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="HOST[:DEV]",
    help="Leave this node, or one device of it, out of --rank-table/--hostfile (repeatable), e.g. "
    "--exclude node03 --exclude node02:5.",
)
@click.option(
    "--fleet-fingerprints",
    "fleet_file",
    metavar="FILE",
    help="Also record every host's fleet fingerprints here, for `ascend-check node --fleet-fingerprints "
    "FILE` on each node (its fleet.* checks compare it with them).",
)
@click.option("-v", "--verbose", is_flag=True, help="More output: list passing checks in the table too.")
@debug_option
@click.version_option(package_name="ascend-ready", prog_name="ascend-check")
@click.pass_context
def main(ctx: click.Context, snapshot_dir, fmt, junit, prometheus, verbose, **params) -> None:
    """Preflight checks of Ascend NPU nodes: NPUs, PCIe, HCCL links, OS and the software stack.

    \b
    Runs on this node by default, or over SSH on --hosts / -i INVENTORY:
      ascend-check                                  # this node, quick tier
      ascend-check -i inventory.ini --tier full     # every inventory host
      ascend-check --hosts n1,n2 --select 'pcie.*' --format json
      ascend-check collect -o snap/ && ascend-check --snapshot snap/   # offline triage
    \b
    Exit codes: 0 all passed (warnings allowed), 1 a check failed, 2 usage or config error,
    3 a host was unreachable and nothing failed.
    """
    if ctx.invoked_subcommand is not None:
        return
    with _no_gc():
        from click.core import ParameterSource

        from ascend_ready.checks.html_report import check_output_path, write_html
        from ascend_ready.checks.preflight import (
            PROFILE_OPTIONS,
            judge_snapshot,
            override_profiles,
            snapshot_options,
        )
        from ascend_ready.checks.report import exit_code

        html_file = params.pop("html_file")
        check_output_path(html_file, "--html")  # before any host is probed
        spec_file, spec_valid_s = params.pop("launch_spec_file"), params.pop("launch_spec_valid_s")
        check_output_path(spec_file, "--launch-spec")
        if spec_file and snapshot_dir:
            raise ConfigError("--launch-spec needs a live run (it reads each node's route to the master)",
                              hint="run ascend-check -i INVENTORY --launch-spec FILE")
        waive = params.pop("waive")
        check_waived(waive, "--waive records a waiver in the launch spec" if not spec_file else None)
        table_file, hosts_file, exclude = (params.pop("rank_table_file"), params.pop("hostfile_file"),
                                           params.pop("exclude"))
        _check_rank_table_args(table_file, hosts_file, exclude, snapshot_dir)
        fleet_file = params.pop("fleet_file")
        check_output_path(fleet_file, "--fleet-fingerprints")
        check_output_path(junit, "--junit")
        check_output_path(prometheus, "--prometheus")
        started = time.monotonic()
        options = preflight_options(params)
        # a snapshot's own tier decides which selections are valid there, once it is read
        from ascend_ready.checks.registry import check_select

        check_select(params["select"], None if snapshot_dir else params["tier"])
        specs = None if snapshot_dir else options.checks()
    if snapshot_dir:
        from ascend_ready.checks.snapshot import load_snapshot

        if params["hosts"] is not None or params["inventory"]:
            raise ConfigError("--snapshot judges saved outputs; it takes no --hosts or -i",
                              hint="drop --hosts/-i, or drop --snapshot to probe the hosts live")
        snap = load_snapshot(Path(snapshot_dir))
        if params["limit"]:
            from ascend_ready.fleet.inventory import limit_targets
            from ascend_ready.fleet.transport import Target

            keep = {
                t.name
                for t in limit_targets(
                    [Target(name=h.name, groups=h.groups) for h in snap.hosts.values()], params["limit"]
                )
            }
            snap.hosts = {k: v for k, v in snap.hosts.items() if k in keep}
        # What the collect recorded (tier, selection, each host's profile) unless given here.
        given = {k for k in params if ctx.get_parameter_source(k) not in (None, ParameterSource.DEFAULT)}
        judging, notes = snapshot_options(snap, options, given)
        if given & set(PROFILE_OPTIONS):
            notes += override_profiles(snap, judging)
        for note in notes:
            click.echo(f"warning: {note}", err=True)
        from ascend_ready.checks.registry import check_select

        check_select(params["select"], judging.tier)
        options, specs = judging, judging.checks()
        report = judge_snapshot(snap, options, source=str(snapshot_dir), specs=specs, started=started)
    else:
        targets = targets_from(params)
        if exclude:
            from ascend_ready.checks.cluster.ranktable import parse_exclude

            exclude = parse_exclude(exclude, [t.name for t in targets])
        snap = _collect_with_progress(targets, options, specs)
        report = judge_snapshot(snap, options, specs=specs, started=started)
    _emit(report, fmt, junit, prometheus, verbose)
    write_html(report, html_file)
    if fleet_file:
        from ascend_ready.checks.cluster.fleet_file import write_fleet_fingerprints

        write_fleet_fingerprints(snap, Path(fleet_file))
    if spec_file:
        from ascend_ready.checks.cluster.launchspec import write_launch_spec

        spec = write_launch_spec(Path(spec_file), report, snap, targets, options.fanout, valid_s=spec_valid_s,
                                 waived=waive, note=lambda line: click.echo(line, err=True))
        _note_coverage(spec)
    code = exit_code(report)
    if table_file or hosts_file:
        from ascend_ready.checks.cluster.ranktable import write_rank_table

        if not write_rank_table(report, snap, targets, options.fanout, table_file, hosts_file, exclude,
                                note=lambda line: click.echo(line, err=True)):
            code = code or ExitCode.FAILED  # asked for, not written: the run did not give what it was for
    sys.exit(code)


@main.command("collect")
@target_options
@click.option(
    "-o",
    "--output-dir",
    "output",
    type=click.Path(file_okay=False),
    help="Directory to write the snapshot to (created; must not hold another snapshot). Required.",
)
@click.option("--output", "output_deprecated", type=click.Path(file_okay=False), hidden=True,
              help="Deprecated spelling of -o/--output-dir.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option(
    "--plogs",
    is_flag=True,
    help="Also save the tails of the newest CANN plogs (a support bundle: ascend-check diagnose DIR).",
)
@click.pass_context
def collect_cmd(ctx: click.Context, output, output_deprecated, quiet, plogs, **params) -> None:
    """Save every raw output the checks read into a snapshot directory (no judging).

    \b
    Layout: DIR/manifest.json, DIR/<host>/<probe>.out, .err, .meta.json (see checks/README.md).
    Judge it later, anywhere: ascend-check --snapshot DIR
    Exit codes: 0 saved; 3 a host was unreachable (the others are saved); 2 usage error.
    """
    from ascend_ready.checks.snapshot import save_snapshot
    from ascend_ready.paths import check_output_dir

    params = merged_params(ctx, params)
    output = deprecated_alias(output, output_deprecated, "--output", "-o/--output-dir", ctx)
    out = Path(output)
    if (out / "manifest.json").exists():
        raise ConfigError(f"{out} already holds a snapshot", hint="choose a new directory")
    check_output_dir(out, "-o")  # before any host is probed
    options = preflight_options(params)
    from ascend_ready.checks.registry import check_select

    check_select(params["select"], params["tier"])
    specs = options.checks()
    if plogs:
        from ascend_ready.checks.diagnose import PLOG_REQUEST

        specs = [*specs, PLOG_REQUEST]
    snap = _collect_with_progress(targets_from(params), options, specs, quiet=quiet, log_progress=True)
    save_snapshot(snap, out)
    bad = [h for h in snap.hosts.values() if not h.reachable]
    probes = sum(len(h.probes) for h in snap.hosts.values())
    click.echo(f"saved {probes} probe outputs of {len(snap.hosts) - len(bad)} host(s) to {out}", err=True)
    for h in bad:
        click.echo(f"error: {h.name} unreachable: {h.error}", err=True)
    sys.exit(ExitCode.UNREACHABLE if bad else ExitCode.OK)


@main.command("list")
@click.option("--tier", type=click.Choice(["quick", "full", "burn-in"]), default="quick", show_default=True,
              help="The checks a run of this tier runs (as a run, quick by default; full adds benchmarks).")
@click.option("--select", multiple=True, metavar="GLOB",
              help="Only checks whose id matches (repeatable), as for a run.")
@click.option("--skip", multiple=True, metavar="GLOB", help="Leave out checks whose id matches (repeatable).")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="table", show_default=True,
              help="A table, or JSON (one object per check, with its probes and fix).")
def list_cmd(tier, select, skip, fmt) -> None:
    """List the checks a run would run: id, tier, severity, what they assert and how to fix a failure
    (--tier full: the benchmarks too)."""
    from ascend_ready.checks.registry import check_select, select_checks

    check_select(select, tier)
    specs = select_checks(tier, select, skip)
    if not specs:
        raise ConfigError("no check matches --select/--skip",
                          hint="`ascend-check list --tier full` shows every id")
    if fmt == "json":
        rows = [
            {
                "id": s.id,
                "tier": s.tier,
                "severity": s.severity,
                "title": s.title,
                "probes": list(s.probes),
                "remediation": s.remediation.model_dump() if s.remediation else None,
            }
            for s in specs
        ]
        click.echo(json.dumps(rows, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "tier", "severity", "asserts", "fix", title=f"{len(specs)} checks")
    for s in specs:
        fix = ""
        if s.remediation:
            fix = s.remediation.text + (f"\n$ {s.remediation.command}" if s.remediation.command else "")
            fix += "\n(disrupts running jobs)" if s.remediation.disruptive else ""
        table.add_row(s.id, s.tier, s.severity, s.title, fix)
    Console().print(table)


@main.command("schema")
@click.argument(
    "what", type=click.Choice(["report", "profile", "snapshot", "diagnose", "launch-spec"]), default="report"
)
def schema_cmd(what) -> None:
    """Print the JSON Schema of the report (--format json), the hardware profile, the snapshot manifest or
    the diagnose report (diagnose --format json).

    The same schemas are published in the package: ascend_ready/checks/schemas/<what>.schema.json.
    """
    if what == "diagnose":
        from ascend_ready.checks.diagnose import json_schema as diagnose_schema

        click.echo(json.dumps(diagnose_schema(), indent=1))
        return
    if what == "launch-spec":
        from ascend_ready.checks.cluster.launchspec import LaunchSpec

        click.echo(json.dumps(LaunchSpec.model_json_schema(), indent=1))
        return
    from ascend_ready.checks.report import json_schema

    click.echo(json.dumps(json_schema(what), indent=1))


@main.command("diagnose")
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="table", show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr during a long scan.")
def diagnose_cmd(paths, fmt, quiet) -> None:
    """Say why a run failed: find known Ascend error signatures in its logs, with causes and fixes.

    \b
    PATH: training or inference stdout/stderr logs, CANN plog directories (~/ascend/log,
    /root/ascend/log/debug/plog), saved dmesg output, run directories; - reads standard input.
    Directories are searched for *.log, *.txt, *.out, *.err, plog-*, dmesg* files (binary ones are skipped;
    a binary file named on the command line is refused). Nothing is sent anywhere. A scan longer than a
    second prints a progress line on stderr every 5 s (-q: none).
      ascend-check diagnose runs/grpo/logs ~/ascend/log/debug/plog
      dmesg | ascend-check diagnose - --format json
    Exit codes: 0 no known error signature; 1 something was found; 2 usage error (missing, unreadable or
    binary path).
    """
    from ascend_ready.checks.diagnose import diagnose_paths, render_json, render_table, render_text

    if not paths:
        raise ConfigError("give at least one PATH", hint="ascend-check diagnose train.log ~/ascend/log")
    from ascend_ready.paths import check_input_path

    for path in paths:  # each named path exists and is no symlink loop before any is read (the scan refuses
        if path != "-":  # a binary file named here, naming it)
            check_input_path(path, None, hint="give log files or run directories that exist, or - for stdin")
    report = diagnose_paths(paths, progress=None if quiet else lambda line: click.echo(line, err=True))
    if fmt == "json":
        click.echo(render_json(report), nl=False)
    else:
        if report.findings:
            from rich.console import Console

            render_table(report, Console(soft_wrap=False, width=max(100, Console().width)))
        click.echo(render_text(report), nl=False)
    sys.exit(ExitCode.FAILED if report.findings else ExitCode.OK)


def _add_parse() -> None:
    from ascend_ready.checks.node_mode import node_command
    from ascend_ready.checks.parse_cli import parse_command

    main.add_command(parse_command, "parse")
    main.add_command(node_command, "node")


_add_parse()

if __name__ == "__main__":  # python -m ascend_ready.checks.cli (e.g. with -X importtime)
    main()
