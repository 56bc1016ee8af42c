"""No launch waits forever: a launch spec lets a node start only where it has a route and an address
toward the master in the master's address family (issue 25 item 6: with the master at an IPv6
ansible_host, a node without IPv6 was recorded `ip: null, nic: null` and still counted as startable; its
torchrun then waited on the master for 12.6 minutes).

`refuse_unrouted` is called by make_launch_spec (launchspec.py) once the spec is built from the routes
the nodes printed: every startable host without them turns `error`, with the reason in its failed checks,
so `ascend-train --launch-spec` leaves it out (or refuses when no host is left) and names it.
`refuse_unrouted_nodes` is the launcher's own refusal at the start, from the routes its pre-start probe
read (checks/cluster/node_facts.py), naming every node that has none.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from ascend_ready.checks.parsers.ip_route import parse_ip_route_get
from ascend_ready.errors import ConfigError, reasons

__all__ = [
    "ROUTE_CHECK", "family", "nothing_passed", "refuse_unrouted", "refuse_unrouted_nodes", "route_problem",
]

#: the pseudo check id a host without a route toward the master is failed with in a spec
ROUTE_CHECK = "launch.route"


def family(address: str | None) -> int | None:
    """4 or 6 for an IP address, None for a name or nothing."""
    try:
        return ipaddress.ip_address((address or "").split("%", 1)[0]).version
    except ValueError:
        return None


def route_problem(master: str, nic: str | None, ip: str | None, why: str | None = None) -> str | None:
    """Why a node with this NIC and source address toward `master` cannot take part (None: it can)."""
    want = family(master)
    fam = f"IPv{want} " if want else ""
    if nic is None or ip is None:
        said = f": `ip -o route get {master}` said {why.strip()!r}" if why and why.strip() else ""
        return f"no {fam}route and address toward the master {master}{said}"
    if want is not None and family(ip) not in (None, want):
        return f"its address toward the master, {ip}, is IPv{family(ip)}; the master {master} is IPv{want}"
    return None


def refuse_unrouted(spec, route_errors: Mapping[str, str] | None = None) -> list[str]:
    """Turn every startable host of `spec` without a route and an address toward its master (in the
    master's family) into `error`, its reason in failed_checks as `launch.route: ...`; returns
    `host: reason` for each, for the notes. `route_errors`: host -> what its `ip -o route get` printed on
    stderr where it failed."""
    out = []
    for name, h in spec.hosts.items():
        if not h.startable:
            continue
        why = route_problem(spec.master_addr, h.nic, h.ip, (route_errors or {}).get(name))
        if why is None:
            continue
        h.verdict = "error"
        h.failed_checks.append(f"{ROUTE_CHECK}: {why}")
        out.append(f"{name}: {why}")
    return out


def refuse_unrouted_nodes(facts: Mapping[str, object], master: str) -> None:
    """Refuse, naming every node, a start where a node's pre-start probe found no route toward the master
    (`ip -o route get MASTER` failed there) or its source address is in another family: its torchrun
    would only wait. `facts`: host -> fleet.plan.NodeFacts of the pre-start probe."""

    lines = []
    for name, f in facts.items():
        target = f.master_ip or master
        if f.route is None:
            lines.append(f"{name}: {route_problem(target, None, None)}")
            continue
        route = parse_ip_route_get(f.route)
        if not route.is_local:
            why = route_problem(target, route.dev, route.src or target)
            if why:
                lines.append(f"{name}: {why}")
    if lines:
        raise ConfigError("not every node can reach the master; nothing was started:\n  "
                          + "\n  ".join(lines),
                          hint="give the master an address every node routes to (--master-addr, or the first "
                          "host's ansible_host in the nodes' family), or leave the node out")


def nothing_passed(report, targets) -> tuple[str, str]:
    """(message, hint) of a spec with no host to start, naming what the hosts' results really are:
    failed, errored (not judged: a probe or tool that did not answer), or not in the report at all
    (issue 25 item 10: "fix the failed checks first" when none had failed)."""
    failed: dict[str, list[str]] = {}
    errored: dict[str, list[str]] = {}
    unjudged = []
    for t in targets:
        mine = [r for r in report.results if r.host == t.name]
        if not mine:
            unjudged.append(t.name)
        failed_here = [r.check_id for r in mine if r.status == "fail"]
        errored_here = [r.check_id for r in mine if r.status == "error"]
        if failed_here:
            failed[t.name] = failed_here
        if errored_here:
            errored[t.name] = errored_here

    def listed(by_host: dict[str, list[str]]) -> str:
        return "; ".join(f"{h}: {', '.join(ids)}" for h, ids in by_host.items())

    why = reasons(("failed ({})", listed(failed)), ("errored, i.e. not judged ({})", listed(errored)),
                  ("not judged at all: {} (unreachable or no check selected)", unjudged))
    message = "no host passed the preflight: there is nothing to launch on; " + (why or "-")
    if failed:
        hint = "fix the failed checks first (the report above names them)"
        if errored:
            hint += ", and the cause of each errored one (its message says which command did not answer)"
    elif errored:
        hint = ("no check failed: fix what kept the errored checks from being judged (each one's message "
                "names the command and its error), then make the spec again")
    else:
        hint = "reach the hosts (the report above says why not) and select checks that judge them"
    return message, hint
