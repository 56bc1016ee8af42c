"""Targets from `--hosts` or an Ansible inventory (INI or YAML, incl. `ascend-sim inventory`), and `--limit`.

Our own reader (ansible-core's InventoryManager costs about a second to import): groups, children,
group/host vars with Ansible's precedence, host ranges `node[01:32]`, and the connection variables
ansible_host/_port/_user/_ssh_private_key_file plus UserKnownHostsFile/ProxyJump in ansible_ssh_common_args.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from ascend_ready.checks.transport import Target, _endpoint
from ascend_ready.errors import ConfigError

__all__ = ["expand_range", "limit_targets", "load_inventory", "parse_hosts"]

_RANGE_RE = re.compile(r"\[(\w+):(\w+)(?::(\d+))?\]")


def expand_range(pattern: str) -> list[str]:
    """`node[01:03]` -> node01 node02 node03 (Ansible's numeric and alphabetic ranges, with stride)."""
    match = _RANGE_RE.search(pattern)
    if not match:
        return [pattern]
    start, end, stride = match[1], match[2], int(match[3] or 1)
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1, stride)]
    elif len(start) == len(end) == 1 and start.isalpha() and end.isalpha():
        values = [chr(c) for c in range(ord(start), ord(end) + 1, stride)]
    else:
        raise ConfigError(f"host range {match[0]!r} in {pattern!r} is not numeric or alphabetic")
    return [name for v in values for name in expand_range(head + v + tail)]


class _Inventory:
    def __init__(self) -> None:
        self.hosts: dict[str, dict[str, Any]] = {}  # host -> host vars (in order of appearance)
        self.groups: dict[str, dict[str, Any]] = {"all": {}, "ungrouped": {}}  # group -> vars
        self.members: dict[str, list[str]] = {"all": [], "ungrouped": []}  # group -> direct hosts
        self.children: dict[str, list[str]] = {"all": []}  # group -> child groups

    def group(self, name: str) -> None:
        self.groups.setdefault(name, {})
        self.members.setdefault(name, [])
        self.children.setdefault(name, [])

    def add_host(self, group: str, name: str, hostvars: dict[str, Any]) -> None:
        self.group(group)
        for host in expand_range(name):
            self.hosts.setdefault(host, {}).update(hostvars)
            if host not in self.members[group]:
                self.members[group].append(host)

    def parents(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for parent, kids in self.children.items():
            for kid in kids:
                out.setdefault(kid, []).append(parent)
        return out

    def host_groups(self, host: str) -> list[str]:
        """The host's groups, outermost first (all, parents, then the groups it is listed in)."""
        parents = self.parents()
        direct = [g for g, hosts in self.members.items() if host in hosts and g not in ("all",)]
        if not direct:
            direct = ["ungrouped"]
        order: list[str] = []

        def visit(g: str, depth: int) -> None:
            if depth > 32:
                raise ConfigError(f"inventory group {g!r} is its own ancestor (a children loop)")
            for p in parents.get(g, []):
                visit(p, depth + 1)
            if g not in order:
                order.append(g)

        visit("all", 0)
        for g in direct:
            visit(g, 0)
        return order

    def targets(self) -> list[Target]:
        out = []
        for host, hostvars in self.hosts.items():
            groups = self.host_groups(host)
            merged: dict[str, Any] = {}
            for g in groups:
                merged.update(self.groups.get(g, {}))
            merged.update(hostvars)
            out.append(_target(host, [g for g in groups if g != "all"], merged))
        return out


def _target(name: str, groups: list[str], hostvars: dict[str, Any]) -> Target:
    v = {k: str(val) for k, val in hostvars.items() if val is not None}
    ssh_args = shlex.split(v.get("ansible_ssh_common_args", "") + " " + v.get("ansible_ssh_extra_args", ""))
    options: dict[str, str] = {}
    jump = None
    i = 0
    while i < len(ssh_args):
        arg = ssh_args[i]
        if arg in ("-o", "-J") and i + 1 < len(ssh_args):
            value = ssh_args[i + 1]
            i += 2
        elif arg.startswith(("-o", "-J")) and len(arg) > 2:
            value, arg = arg[2:], arg[:2]
            i += 1
        else:
            i += 1
            continue
        if arg == "-J":
            jump = value
        else:
            key, _, val = value.partition("=")
            options[key.strip().lower()] = val.strip()
    port = v.get("ansible_port") or v.get("ansible_ssh_port")
    try:
        port_number = int(port) if port else None
    except ValueError:
        raise ConfigError(f"inventory host {name}: ansible_port {port!r} is not a number") from None
    return Target(
        name=name,
        address=v.get("ansible_host") or v.get("ansible_ssh_host") or name,
        port=port_number,
        user=v.get("ansible_user") or v.get("ansible_ssh_user"),
        key_file=v.get("ansible_ssh_private_key_file") or v.get("ansible_private_key_file"),
        known_hosts_file=options.get("userknownhostsfile"),
        proxy_jump=jump or options.get("proxyjump"),
        groups=groups,
        vars={k: val for k, val in v.items() if not k.startswith("ansible_")},
    )


def _ini_value(raw: str) -> Any:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def _parse_ini(text: str, origin: str) -> _Inventory:
    inv = _Inventory()
    section, kind = "ungrouped", "hosts"
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            m = re.fullmatch(r"\[([^\]:]+)(?::(vars|children))?\]", line)
            if not m:
                raise ConfigError(f"{origin}:{no}: bad section header {line!r}")
            section, kind = m[1], m[2] or "hosts"
            inv.group(section)
            if section != "all" and section not in inv.children["all"]:
                inv.children["all"].append(section)
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{origin}:{no}: {exc}: {line!r}") from None
        if not words:
            continue
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{origin}:{no}: expected key=value in [{section}:vars]: {line!r}")
            inv.groups[section][key.strip()] = _ini_value(value.strip())
        elif kind == "children":
            inv.group(words[0])
            inv.children[section].append(words[0])
            if words[0] in inv.children["all"]:
                inv.children["all"].remove(words[0])
        else:
            hostvars = {}
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep:
                    raise ConfigError(f"{origin}:{no}: expected key=value after the host name, got {word!r}")
                hostvars[key] = value
            inv.add_host(section, words[0], hostvars)
    return inv


def _parse_yaml(data: Any, origin: str) -> _Inventory:
    inv = _Inventory()
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: a YAML inventory is a mapping of groups (e.g. all: {{hosts: ...}})")

    def walk(name: str, body: Any, path: str) -> None:
        inv.group(name)
        if body is None:
            return
        if not isinstance(body, dict):
            raise ConfigError(f"{origin}: group {path} must be a mapping with hosts/vars/children")
        unknown = set(body) - {"hosts", "vars", "children"}
        if unknown:
            raise ConfigError(
                f"{origin}: group {path}: unknown key(s) {', '.join(sorted(unknown))}",
                hint="a group has only hosts, vars and children",
            )
        inv.groups[name].update(body.get("vars") or {})
        for host, hostvars in (body.get("hosts") or {}).items():
            inv.add_host(name, str(host), dict(hostvars or {}))
        for child, child_body in (body.get("children") or {}).items():
            if child not in inv.children[name]:
                inv.children[name].append(child)
            walk(child, child_body, f"{path}.children.{child}")

    for top, body in data.items():
        if top != "all":
            inv.children["all"].append(top)
        walk(top, body, top)
    return inv


def _vars_file(folder: Path, name: str) -> dict[str, Any] | None:
    """Variables of `folder/name{,.yml,.yaml,.json}` and of the files in `folder/name/`."""
    candidates = [folder / name, *(folder / f"{name}{ext}" for ext in (".yml", ".yaml", ".json"))]
    found = [c for c in candidates if c.is_file()]
    if (folder / name).is_dir():
        found += sorted(f for f in (folder / name).iterdir() if f.suffix in (".yml", ".yaml", ".json"))
    if not found:
        return None
    merged: dict[str, Any] = {}
    for f in found:
        try:
            data = yaml.safe_load(f.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read inventory variables {f}: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"inventory variables {f} are not a mapping")
        merged.update(data)
    return merged


def _load_vars_dirs(inv: _Inventory, folder: Path) -> None:
    """group_vars/ and host_vars/ beside the inventory file: they override the file's own variables."""
    for group in list(inv.groups):
        extra = _vars_file(folder / "group_vars", group)
        if extra:
            inv.groups[group].update(extra)
    for host in list(inv.hosts):
        extra = _vars_file(folder / "host_vars", host)
        if extra:
            inv.hosts[host].update(extra)


def load_inventory(path: str | Path) -> list[Target]:
    """Targets of an Ansible inventory file (YAML when it parses as a mapping with groups, else INI)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read inventory {path}: {exc.strerror or exc}") from None
    data = None
    if path.suffix in (".yml", ".yaml") or text.lstrip().startswith(("all:", "---")):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"inventory {path} is not valid YAML: {exc}") from None
    inv = _parse_yaml(data, str(path)) if data is not None else _parse_ini(text, str(path))
    _load_vars_dirs(inv, path.parent)
    targets = inv.targets()
    if not targets:
        raise ConfigError(f"inventory {path} lists no hosts")
    return targets


def parse_hosts(spec: str) -> list[Target]:
    """`--hosts h1,user@h2:2222,[fe80::1]:22` as targets."""
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        for one in expand_range(item):  # before the port split: node[01:04] has a colon too
            try:
                target = _endpoint(one)
            except ValueError:
                raise ConfigError(
                    f"--hosts: bad port in {one!r}", hint="use host, user@host or host:port"
                ) from None
            out.append(Target(name=target.name, address=target.name, port=target.port, user=target.user))
    if not out:
        raise ConfigError("--hosts is empty", hint="e.g. --hosts node01,node02")
    return out


def limit_targets(targets: list[Target], limit: str) -> list[Target]:
    """Ansible-style --limit: host or group globs separated by , or :; `!pat` excludes, `&pat` intersects."""
    include, exclude, intersect = [], [], []
    for pat in (p.strip() for p in re.split(r"[,:]", limit) if p.strip()):
        if pat.startswith("!"):
            exclude.append(pat[1:])
        elif pat.startswith("&"):
            intersect.append(pat[1:])
        else:
            include.append(pat)

    def hit(t: Target, pat: str) -> bool:
        return fnmatch.fnmatchcase(t.name, pat) or any(
            fnmatch.fnmatchcase(g, pat) for g in ["all", *t.groups]
        )

    out = [
        t
        for t in targets
        if (not include or any(hit(t, p) for p in include))
        and all(hit(t, p) for p in intersect)
        and not any(hit(t, p) for p in exclude)
    ]
    if not out:
        raise ConfigError(
            f"--limit {limit!r} matches no host", hint="hosts: " + ", ".join(t.name for t in targets[:10])
        )
    return out
