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

from ascend_ready.cli_guard import GuardedGroup
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


def _target_options(fn):
    """Options shared by the plain run and `collect`: which hosts, how to reach them, which checks."""
    options = [
        click.option(
            "--hosts", metavar="H1,H2", help="Comma-separated hosts ([user@]host[:port]); default: this node."
        ),
        click.option(
            "-i",
            "--inventory",
            type=click.Path(),
            help="Ansible inventory: INI or YAML (read fast), or a directory, plugin, script or vaulted "
            "variables (read by ansible-inventory).",
        ),
        click.option(
            "--vault-password-file",
            type=click.Path(dir_okay=False),
            help="Vault password file for vaulted inventory variables "
            "(default: $ANSIBLE_VAULT_PASSWORD_FILE).",
        ),
        click.option(
            "-K",
            "--ask-become-pass",
            is_flag=True,
            help="Ask for the sudo password of hosts with ansible_become (once, for all of them).",
        ),
        click.option(
            "--limit", metavar="PATTERN", help="Only these inventory hosts/groups (Ansible syntax)."
        ),
        click.option(
            "--tier",
            type=click.Choice(["quick", "full"]),
            default="quick",
            show_default=True,
            help="quick: no benchmarks; full: adds pings and the torch_npu import.",
        ),
        click.option(
            "--select", multiple=True, metavar="GLOB", help="Only checks whose id matches (repeatable)."
        ),
        click.option(
            "--skip", multiple=True, metavar="GLOB", help="Leave out checks whose id matches (repeatable)."
        ),
        click.option(
            "--profile",
            metavar="FILE|NAME",
            help="Hardware profile (bundled name or file); default: per host from the inventory, "
            "else atlas-800t-a2.",
        ),
        click.option(
            "--training-user",
            metavar="USER",
            help="User the training job runs as: its login shell's limits and libraries are judged; "
            "default: inventory ascend_training_user, else the profile's (root).",
        ),
        click.option(
            "--python",
            metavar="PATH",
            help="Training interpreter on the node (e.g. ~ascend/venvs/ascend-STACK/bin/python); default: "
            "inventory python_env_venv/python_env_path or the venv of stack_id, else the profile's python3.",
        ),
        click.option(
            "--concurrency",
            type=click.IntRange(1, 1024),
            default=32,
            show_default=True,
            help="Hosts probed at once.",
        ),
        click.option(
            "--timeout",
            "probe_timeout",
            type=click.FloatRange(0.1, 3600),
            default=10.0,
            show_default=True,
            help="Seconds each remote command may run.",
        ),
        click.option(
            "--host-deadline",
            type=click.FloatRange(0.5, 86400),
            default=60.0,
            show_default=True,
            help="Seconds a host's whole probe batch (connect included) may take.",
        ),
        click.option(
            "--connect-timeout",
            type=click.FloatRange(0.1, 600),
            default=10.0,
            show_default=True,
            help="Seconds to wait for the SSH connection.",
        ),
        click.option(
            "--trust-on-first-use",
            is_flag=True,
            help="Accept and record unknown host keys (default: reject keys not in known_hosts).",
        ),
        click.option(
            "--known-hosts", type=click.Path(dir_okay=False), help="known_hosts file to verify against."
        ),
        click.option(
            "--ssh-config", type=click.Path(dir_okay=False), help="ssh_config file (default ~/.ssh/config)."
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _check_select(select: tuple[str, ...], tier: str | None) -> None:
    """Refuse a --select glob that matches no check id (naming the nearest ids), or, in the quick tier,
    only full-tier checks: mixed with a valid glob, either would silently shrink the run."""
    if not select:
        return
    import difflib
    import fnmatch

    from ascend_ready.checks.registry import all_checks

    checks = all_checks()
    for glob in select:
        hits = [spec for spec in checks.values() if fnmatch.fnmatchcase(spec.id, glob)]
        if not hits:
            near = difflib.get_close_matches(glob, list(checks), n=3, cutoff=0.7)
            raise ConfigError(
                f"no check matches --select/--skip: --select {glob!r} is no check id",
                hint=(f"did you mean {' or '.join(near)}? " if near else "")
                + "`ascend-check list` shows every id",
            )
        if tier == "quick" and all(spec.tier != "quick" for spec in hits):
            raise ConfigError(
                f"--select {glob!r} matches only full-tier checks ({', '.join(s.id for s in hits)})",
                hint="add --tier full",
            )


def _merged(ctx: click.Context, params: dict) -> dict:
    """Subcommand options, falling back to the ones given before the subcommand name."""
    parent = ctx.parent.params if ctx.parent else {}
    out = dict(params)
    for key in params:
        source = ctx.get_parameter_source(key)
        if source in (click.core.ParameterSource.DEFAULT, None) and key in parent:
            out[key] = parent[key]
    return out


def _targets(p: dict):
    from ascend_ready.checks.inventory import check_host_profiles, limit_targets, load_inventory, parse_hosts
    from ascend_ready.checks.transport import LOCAL, Target

    if p["hosts"] and p["inventory"]:
        raise ConfigError("give --hosts or -i INVENTORY, not both")
    if p["inventory"]:
        targets = load_inventory(p["inventory"], vault_password_file=p.get("vault_password_file"))
    elif p["hosts"]:
        targets = parse_hosts(p["hosts"])
    else:
        import socket

        targets = [Target(name=socket.gethostname().split(".")[0] or "localhost", address=LOCAL)]
    if p["limit"]:
        targets = limit_targets(targets, p["limit"])
    if p["inventory"]:
        check_host_profiles(targets, p["inventory"])
    if p.get("ask_become_pass") and any(t.become for t in targets):
        password = click.prompt("BECOME password", hide_input=True, err=True)
        for t in targets:
            if t.become and t.become_password is None:
                t.become_password = password
    return targets


def _options(p: dict):
    from ascend_ready.checks.preflight import PreflightOptions
    from ascend_ready.checks.transport import FanoutOptions

    fanout = FanoutOptions(
        concurrency=p["concurrency"],
        probe_timeout_s=p["probe_timeout"],
        host_deadline_s=p["host_deadline"],
        connect_timeout_s=p["connect_timeout"],
        trust_on_first_use=p["trust_on_first_use"],
        known_hosts_file=p["known_hosts"],
        ssh_config_file=p["ssh_config"],
    )
    return PreflightOptions(
        tier=p["tier"],
        select=p["select"],
        skip=p["skip"],
        profile=p["profile"],
        training_user=p["training_user"],
        python=p["python"],
        fanout=fanout,
    )


def _collect_with_progress(targets, options, specs):
    """Fan out with a live progress line on stderr (only when stderr is a terminal)."""
    from ascend_ready.checks.preflight import collect_snapshot

    if not sys.stderr.isatty():  # rich is not even imported then: a scripted run starts faster
        return collect_snapshot(targets, options, specs=specs)
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


def _write_rank_table(report, snap, targets, options, table_file, hosts_file, exclude) -> bool:
    """Write the rank table and/or its host list; False (after a line on stderr saying why) when no host
    has a device to put in it."""
    from ascend_ready.checks.cluster.ranktable import fleet_rank_table, hostfile
    from ascend_ready.checks.report import write_atomic

    failed: dict[str, list[str]] = {}
    for r in report.results:
        if r.status in ("fail", "error"):
            failed.setdefault(r.host, []).append(r.check_id)
    table = fleet_rank_table(snap, targets, options.fanout, exclude=exclude, failed=failed,
                             note=lambda line: click.echo(line, err=True))
    if table is None:
        return False
    devices = sum(len(s["device"]) for s in table["server_list"])
    for path, text in ((table_file, json.dumps(table, indent=1) + "\n"), (hosts_file, hostfile(table))):
        if path:
            try:
                write_atomic(Path(path), text)
            except OSError as exc:
                raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
            what = "rank table" if path == table_file else "hostfile"
            click.echo(f"{what}: {path} ({devices} device(s) on {table['server_count']} host(s))", err=True)
    return True


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
                raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None


@click.group(
    cls=GuardedGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]}
)
@_target_options
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
@click.option("-v", "--verbose", is_flag=True, help="List passing checks in the table too.")
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
        table_file, hosts_file, exclude = (params.pop("rank_table_file"), params.pop("hostfile_file"),
                                           params.pop("exclude"))
        _check_rank_table_args(table_file, hosts_file, exclude, snapshot_dir)
        fleet_file = params.pop("fleet_file")
        check_output_path(fleet_file, "--fleet-fingerprints")
        check_output_path(junit, "--junit")
        check_output_path(prometheus, "--prometheus")
        started = time.monotonic()
        options = _options(params)
        # a snapshot's own tier decides which selections are valid there, once it is read
        _check_select(params["select"], None if snapshot_dir else params["tier"])
        specs = None if snapshot_dir else options.checks()
    if snapshot_dir:
        from ascend_ready.checks.snapshot import load_snapshot

        if params["hosts"] or params["inventory"]:
            raise ConfigError("--snapshot judges saved outputs; it takes no --hosts or -i")
        snap = load_snapshot(Path(snapshot_dir))
        if params["limit"]:
            from ascend_ready.checks.inventory import limit_targets
            from ascend_ready.checks.transport import Target

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
        _check_select(params["select"], judging.tier)
        options, specs = judging, judging.checks()
        report = judge_snapshot(snap, options, source=str(snapshot_dir), specs=specs, started=started)
    else:
        targets = _targets(params)
        if exclude:
            from ascend_ready.checks.cluster.ranktable import parse_exclude

            exclude = parse_exclude(exclude, [t.name for t in targets])
        snap = _collect_with_progress(targets, options, specs)
        report = judge_snapshot(snap, options, specs=specs, started=started)
    if spec_file and snapshot_dir:
        raise ConfigError("--launch-spec needs a live run (it reads each node's route to the master)",
                          hint="run ascend-check -i INVENTORY --launch-spec FILE")
    _emit(report, fmt, junit, prometheus, verbose)
    write_html(report, html_file)
    if fleet_file:
        from ascend_ready.checks.cluster.fleet_file import write_fleet_fingerprints

        write_fleet_fingerprints(snap, Path(fleet_file))
    if spec_file:
        from ascend_ready.checks.cluster.launchspec import make_launch_spec

        spec = make_launch_spec(report, snap, targets, options.fanout, valid_s=spec_valid_s,
                                note=lambda line: click.echo(f"launch spec: {line}", err=True))
        Path(spec_file).write_text(spec.model_dump_json(indent=1) + "\n")
        click.echo(f"launch spec: {spec_file} ({len(spec.startable_hosts())} of {len(spec.hosts)} host(s) "
                   f"may start, valid {spec_valid_s} s)", err=True)
    code = exit_code(report)
    if (table_file or hosts_file) and not _write_rank_table(report, snap, targets, options, table_file,
                                                           hosts_file, exclude):
        code = code or ExitCode.FAILED  # asked for, not written: the run did not give what it was for
    sys.exit(code)


@main.command("collect")
@_target_options
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(file_okay=False),
    help="Directory to write the snapshot to (created; must not hold another snapshot).",
)
@click.option(
    "--plogs",
    is_flag=True,
    help="Also save the tails of the newest CANN plogs (a support bundle: ascend-check diagnose DIR).",
)
@click.pass_context
def collect_cmd(ctx: click.Context, output, plogs, **params) -> None:
    """Save every raw output the checks read into a snapshot directory (no judging).

    \b
    Layout: DIR/manifest.json, DIR/<host>/<probe>.out, .err, .meta.json (see checks/README.md).
    Judge it later, anywhere: ascend-check --snapshot DIR
    Exit codes: 0 saved; 3 a host was unreachable (the others are saved); 2 usage error.
    """
    from ascend_ready.checks.snapshot import save_snapshot
    from ascend_ready.paths import check_output_dir

    params = _merged(ctx, params)
    out = Path(output)
    if (out / "manifest.json").exists():
        raise ConfigError(f"{out} already holds a snapshot", hint="choose a new directory")
    check_output_dir(out, "-o")  # before any host is probed
    options = _options(params)
    _check_select(params["select"], params["tier"])
    specs = options.checks()
    if plogs:
        from ascend_ready.checks.diagnose import PLOG_REQUEST

        specs = [*specs, PLOG_REQUEST]
    snap = _collect_with_progress(_targets(params), options, specs)
    save_snapshot(snap, out)
    bad = [h for h in snap.hosts.values() if not h.reachable]
    probes = sum(len(h.probes) for h in snap.hosts.values())
    click.echo(f"saved {probes} probe outputs of {len(snap.hosts) - len(bad)} host(s) to {out}", err=True)
    for h in bad:
        click.echo(f"error: {h.name} unreachable: {h.error}", err=True)
    sys.exit(ExitCode.UNREACHABLE if bad else ExitCode.OK)


@main.command("list")
@click.option("--tier", type=click.Choice(["quick", "full"]), default="full", show_default=True)
@click.option("--select", multiple=True, metavar="GLOB")
@click.option("--skip", multiple=True, metavar="GLOB")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="table", show_default=True)
def list_cmd(tier, select, skip, fmt) -> None:
    """List the checks: id, tier, severity, what they assert and how to fix a failure."""
    from ascend_ready.checks.registry import select_checks

    _check_select(select, tier)
    specs = select_checks(tier, select, skip)
    if not specs:
        raise ConfigError("no check matches --select/--skip", hint="`ascend-check list` shows every id")
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
def diagnose_cmd(paths, fmt) -> None:
    """Say why a run failed: find known Ascend error signatures in its logs, with causes and fixes.

    \b
    PATH: training or inference stdout/stderr logs, CANN plog directories (~/ascend/log,
    /root/ascend/log/debug/plog), saved dmesg output, run directories; - reads standard input.
    Directories are searched for *.log, *.txt, *.out, *.err, plog-*, dmesg* files. Nothing is sent anywhere.
      ascend-check diagnose runs/grpo/logs ~/ascend/log/debug/plog
      dmesg | ascend-check diagnose - --format json
    Exit codes: 0 no known error signature; 1 something was found; 2 usage error (missing or
    unreadable path).
    """
    from ascend_ready.checks.diagnose import diagnose_paths, render_json, render_table, render_text

    if not paths:
        raise ConfigError("give at least one PATH", hint="ascend-check diagnose train.log ~/ascend/log")
    report = diagnose_paths(paths)
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
