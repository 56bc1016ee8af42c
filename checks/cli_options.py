"""`ascend-check`'s shared options and how they become targets and preflight options: which hosts, how to
reach them, which checks, for the plain run and `collect` alike (checks/cli.py holds the commands)."""

from __future__ import annotations

import difflib
import socket
from pathlib import Path

import click

from ascend_ready.errors import ConfigError

#: --tier and --duration, as every command that runs checks takes them (a run, collect, node)
tier_option = click.option(
    "--tier",
    type=click.Choice(["quick", "full", "burn-in"]),
    default="quick",
    show_default=True,
    help="quick: no benchmarks; full: adds pings, the torch_npu import and the benchmarks; burn-in: "
    "the full tier, then sustained load on every device for --duration, sampled beside it.",
)
duration_option = click.option(
    "--duration",
    metavar="D",
    help="How long the burn-in loads the devices (--tier burn-in): a number and a unit: 60s, 10m.",
)


def target_options(fn):
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
        tier_option,
        duration_option,
        click.option(
            "--select", multiple=True, metavar="GLOB", help="Only checks whose id matches (repeatable)."
        ),
        click.option(
            "--skip", multiple=True, metavar="GLOB", help="Leave out checks whose id matches (repeatable)."
        ),
        click.option(
            "--profile",
            metavar="FILE|NAME",
            help="Hardware profile (bundled name or file); default: per host from the inventory; on this "
            "node (no --hosts, no -i) the one provisioning recorded, /etc/ascend-ready/profile.yml; "
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


def check_waived(waive: tuple[str, ...], without: str | None) -> None:
    """Refuse a --waive that names no check id (naming the nearest), or given where nothing records it."""
    if not waive:
        return
    if without:
        raise ConfigError(f"{without}, and no --launch-spec FILE was asked for",
                          hint="add --launch-spec spec.json, or leave out --waive")
    from ascend_ready.checks.registry import all_checks  # start-up (--help, list)

    known = list(all_checks())
    for check_id in waive:
        if check_id not in known:
            near = difflib.get_close_matches(check_id, known, n=3, cutoff=0.6)
            raise ConfigError(f"--waive {check_id!r} is no check id",
                              hint=(f"did you mean {' or '.join(near)}? " if near else "")
                              + "`ascend-check list --tier full` shows every id")


def deprecated_alias(value, old_value, old: str, new: str, ctx: click.Context):
    """The value of a required option given under its new name or, with a warning, its old one."""
    if old_value is not None:
        click.echo(f"warning: {old} is deprecated; use {new}", err=True)
        if value is not None and value != old_value:
            raise ConfigError(f"{new} {value} and {old} {old_value} disagree", hint=f"give {new} only")
        value = value or old_value
    if value is None:
        raise click.UsageError(f"missing option '{new.split('/')[0]}' / '{new.split('/')[-1]}'", ctx=ctx)
    return value


def merged_params(ctx: click.Context, params: dict) -> dict:
    """Subcommand options, falling back to the ones given before the subcommand name."""
    parent = ctx.parent.params if ctx.parent else {}
    out = dict(params)
    for key in params:
        source = ctx.get_parameter_source(key)
        if source in (click.core.ParameterSource.DEFAULT, None) and key in parent:
            out[key] = parent[key]
    return out


def targets_from(p: dict):
    from ascend_ready.checks.preflight import check_host_profiles  # start-up (--help, list)
    from ascend_ready.fleet.inventory import limit_targets, load_inventory, parse_hosts  # start-up
    from ascend_ready.fleet.transport import LOCAL, Target  # start-up (--help, list)

    if p["hosts"] is not None and p["inventory"]:
        raise ConfigError("give --hosts or -i INVENTORY, not both",
                          hint="drop one: -i reads the hosts and their SSH settings from the inventory")
    if p["inventory"]:
        targets = load_inventory(p["inventory"], vault_password_file=p.get("vault_password_file"))
    elif p["hosts"] is not None:  # --hosts '' is an empty list, refused: never "this node" by accident
        targets = parse_hosts(p["hosts"])
    else:
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


def preflight_options(p: dict):
    from ascend_ready.checks.preflight import PreflightOptions  # start-up (--help, list)
    from ascend_ready.fleet.transport import FanoutOptions  # start-up (--help, list)

    fanout = FanoutOptions(
        concurrency=p["concurrency"],
        probe_timeout_s=p["probe_timeout"],
        host_deadline_s=p["host_deadline"],
        connect_timeout_s=p["connect_timeout"],
        trust_on_first_use=p["trust_on_first_use"],
        known_hosts_file=p["known_hosts"],
        ssh_config_file=p["ssh_config"],
    )
    duration_s = burn_in_duration(p)
    if duration_s is not None:  # the burn-in probe runs for D: the host's batch may take that much longer
        from ascend_ready.checks.resources.burn_in import MARGIN_S  # start-up: a burn-in only

        fanout.host_deadline_s += duration_s + MARGIN_S
    profile = p["profile"]
    if profile is None and p.get("hosts") is None and not p.get("inventory"):
        from ascend_ready.checks.profile import NODE_PROFILE  # start-up (--help, list)

        # this node, provisioned: the thresholds the playbook recorded for it (its inventory's profile)
        profile = NODE_PROFILE if Path(NODE_PROFILE).is_file() else None
    return PreflightOptions(
        tier=p["tier"],
        select=p["select"],
        skip=p["skip"],
        profile=profile,
        training_user=p["training_user"],
        python=p["python"],
        fanout=fanout,
        duration_s=duration_s,
    )


def burn_in_duration(p: dict) -> float | None:
    """--duration's seconds, refused (exit 2) unless it is a duration given with --tier burn-in."""
    from ascend_ready.checks.burn_in import parse_duration  # start-up: a run's first imports are its own

    text, tier = p.get("duration"), p.get("tier")
    if tier == "burn-in" and text is None:
        raise ConfigError("--tier burn-in needs --duration D", hint="e.g. --tier burn-in --duration 10m")
    if text is None:
        return None
    if tier != "burn-in":
        raise ConfigError(f"--duration {text} is the burn-in's, not the {tier} tier's",
                          hint="add --tier burn-in, or leave out --duration")
    return parse_duration(text)
