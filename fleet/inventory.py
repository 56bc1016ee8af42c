"""Targets from `--hosts` or an Ansible inventory (INI or YAML, incl. `ascend-sim inventory`), and `--limit`.

Our own reader (ansible-core's InventoryManager costs about a second to import): groups, children,
group/host vars with Ansible's precedence, host ranges `node[01:32]`, and the connection variables
ansible_host/_port/_user/_ssh_private_key_file plus UserKnownHostsFile/ProxyJump in ansible_ssh_common_args.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ascend_ready.errors import ConfigError
from ascend_ready.fleet.transport import Target, endpoint

__all__ = ["expand_range", "limit_targets", "load_inventory", "parse_hosts", "var_origin"]

_INVENTORY_HINT = "give -i an Ansible inventory (INI or YAML file, or a directory), e.g. -i inventory.ini"
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
        raise ConfigError(f"host range {match[0]!r} in {pattern!r} is not numeric or alphabetic",
                          hint="write a range as [01:04] or [a:d]")
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
                raise ConfigError(f"inventory group {g!r} is its own ancestor (a children loop)",
                                  hint="remove the loop from the children: sections")
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
    resolved, secret = _connection_vars(name, hostvars)
    v = {k: str(val) for k, val in resolved.items() if val is not None}
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
        raise ConfigError(f"inventory host {name}: ansible_port {port!r} is not a number",
                          hint="set ansible_port to the SSH port, e.g. 22") from None
    address = v.get("ansible_host") or v.get("ansible_ssh_host") or name
    if v.get("ansible_connection") != "local":
        check_address(address, f"inventory host {name}: " + ("ansible_host" if address != name else "name"))
    become = _boolean(name, "ansible_become", v.get("ansible_become") or v.get("ansible_sudo") or "false")
    method = v.get("ansible_become_method") or "sudo"
    if become and method != "sudo":
        raise ConfigError(
            f"inventory host {name}: ansible_become_method={method}: ascend-check only becomes with sudo",
            hint="use ansible_become_method=sudo, or connect as root (ansible_user=root)",
        )
    password = next((v[k] for k in _BECOME_PASSWORD if v.get(k)), None)
    return Target(
        name=name,
        address=address,
        port=port_number,
        user=v.get("ansible_user") or v.get("ansible_ssh_user"),
        key_file=v.get("ansible_ssh_private_key_file") or v.get("ansible_private_key_file"),
        known_hosts_file=options.get("userknownhostsfile"),
        proxy_jump=jump or options.get("proxyjump"),
        groups=groups,
        vars={k: val for k, val in v.items() if not k.startswith("ansible_") and k not in secret},
        become=become,
        become_user=v.get("ansible_become_user") or v.get("ansible_sudo_user") or "root",
        become_password=password,
    )


#: Where Ansible takes the become password from (newest name first).
_BECOME_PASSWORD = (
    "ansible_become_password", "ansible_become_pass", "ansible_sudo_password", "ansible_sudo_pass"
)
#: The connection variables ascend-check reads (the others, like ansible_python_interpreter, are Ansible's).
CONNECTION_VARS = frozenset({
    "ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port", "ansible_user",
    "ansible_ssh_user", "ansible_ssh_private_key_file", "ansible_private_key_file", "ansible_ssh_common_args",
    "ansible_ssh_extra_args", "ansible_become", "ansible_sudo", "ansible_become_method",
    "ansible_become_user", "ansible_sudo_user", *_BECOME_PASSWORD,
})
_TRUE, _FALSE = {"true", "yes", "on", "1", "y", "t"}, {"false", "no", "off", "0", "n", "f", ""}


def _boolean(host: str, key: str, value: str) -> bool:
    """An Ansible boolean (yes/no, true/false, on/off, 1/0)."""
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ConfigError(f"inventory host {host}: {key}={value!r} is not a boolean", hint="use true or false")


def _connection_vars(host: str, hostvars: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """`ansible_*: "{{ other_var }}"` (a become password kept in a vaulted variable) is that variable's
    value; any other template in a connection variable is refused: this reader renders no Jinja.
    Also the variables named so by a become password (secrets: they stay out of Target.vars)."""
    out, secret = dict(hostvars), set()
    for key, value in hostvars.items():
        if key not in CONNECTION_VARS or not isinstance(value, str) or "{" not in value:
            continue
        ref = re.fullmatch(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", value.strip())
        if ref and ref[1] in hostvars and ref[1] != key:
            out[key] = hostvars[ref[1]]
            if key in _BECOME_PASSWORD:
                secret.add(ref[1])
        elif "{{" in value or "{%" in value:
            raise ConfigError(
                f"inventory host {host}: {key}={value!r} is a Jinja template (not rendered here)",
                hint="give the value itself, or `{{ a_variable }}` naming one the host has",
            )
    return out, secret


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
                raise ConfigError(f"{origin}:{no}: bad section header {line!r}",
                                  hint="a section header is [group], [group:vars] or [group:children]")
            section, kind = m[1], m[2] or "hosts"
            inv.group(section)
            if section != "all" and section not in inv.children["all"]:
                inv.children["all"].append(section)
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{origin}:{no}: {exc}: {line!r}",
                              hint="fix the quoting of that line") from None
        if not words:
            continue
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep:
                raise ConfigError(f"{origin}:{no}: expected key=value in [{section}:vars]: {line!r}",
                                  hint="write each variable as key=value")
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
                    raise ConfigError(f"{origin}:{no}: expected key=value after the host name, got {word!r}",
                                      hint="write host variables as key=value after the host name")
                hostvars[key] = value
            inv.add_host(section, words[0], hostvars)
    return inv


def _parse_yaml(data: Any, origin: str) -> _Inventory:
    inv = _Inventory()
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: a YAML inventory is a mapping of groups (e.g. all: {{hosts: ...}})",
                          hint="start the file with all: {hosts: ..., children: ...}")

    def walk(name: str, body: Any, path: str) -> None:
        inv.group(name)
        if body is None:
            return
        if not isinstance(body, dict):
            raise ConfigError(f"{origin}: group {path} must be a mapping with hosts/vars/children",
                              hint="give the group hosts:, vars: and/or children: mappings")
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


class _NeedsAnsible(Exception):
    """Raised by the fast reader on what only Ansible reads: the inventory goes to ansible-inventory."""


#: A vault-encrypted file starts with this; a YAML value encrypted with `ansible-vault encrypt_string`
#: carries the `!vault` tag.
_VAULT_HEADER = "$ANSIBLE_VAULT;"
_VAULT_TAG_RE = re.compile(r"(?:^|[\s:\-\[{,])!vault\b")


def _vaulted(text: str) -> bool:
    return text.lstrip().startswith(_VAULT_HEADER) or bool(_VAULT_TAG_RE.search(text))


def _vars_file(folder: Path, name: str) -> dict[str, Any] | None:
    """Variables of `folder/name{,.yml,.yaml,.json}` and of the files in `folder/name/`."""
    found = _vars_paths(folder, name)
    if not found:
        return None
    merged: dict[str, Any] = {}
    for f in found:
        try:
            text = f.read_text()
            if _vaulted(text):
                raise _NeedsAnsible(f"{f} is vaulted")
            data = yaml.safe_load(text) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read inventory variables {f}: {exc}",
                              hint="fix the file: a YAML mapping of variable: value") from None
        if not isinstance(data, dict):
            raise ConfigError(f"inventory variables {f} are not a mapping",
                              hint="fix the file: a YAML mapping of variable: value")
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


#: Each target's inventory, as an absolute path (recorded in snapshots): fix lines name it.
INVENTORY_VAR = "ascend_check_inventory"


def load_inventory(path: str | Path, *, vault_password_file: str | None = None) -> list[Target]:
    """Targets of an Ansible inventory: an INI or YAML file with its group_vars/ and host_vars/ (read
    here, fast), or anything else Ansible reads (a directory, an inventory plugin or script, vaulted
    variables), which ansible-inventory reads for us (`_ansible_inventory`)."""
    targets = _load(Path(path), vault_password_file)
    where = str(Path(path).absolute())
    for t in targets:
        t.vars.setdefault(INVENTORY_VAR, where)
    return targets


def _load(path: Path, vault_password_file: str | None) -> list[Target]:
    if path.is_dir():
        return _ansible_inventory(path, vault_password_file)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read inventory {path}: {exc.strerror or exc}", hint=_INVENTORY_HINT
        ) from None
    if raw.startswith(b"#!") and os.access(path, os.X_OK):
        return _ansible_inventory(path, vault_password_file)  # an inventory script
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"inventory {path} is not text (UTF-8)", hint=_INVENTORY_HINT) from None
    if _vaulted(text):
        return _ansible_inventory(path, vault_password_file)
    data = None
    if path.suffix in (".yml", ".yaml") or text.lstrip().startswith(("all:", "---", "plugin:")):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"inventory {path} is not valid YAML: {exc}",
                              hint="fix the YAML syntax at the line it names") from None
        if isinstance(data, dict) and "plugin" in data:
            return _ansible_inventory(path, vault_password_file)
    inv = _parse_yaml(data, str(path)) if data is not None else _parse_ini(text, str(path))
    try:
        _load_vars_dirs(inv, path.parent)
    except _NeedsAnsible:
        return _ansible_inventory(path, vault_password_file)
    targets = inv.targets()
    if not targets:
        raise ConfigError(f"inventory {path} lists no hosts", hint="add hosts under all: or a group")
    return targets


# ---------------------------------------------------------------- what only Ansible reads

#: Variables ascend-check itself reads (checks/preflight.py): a vaulted one is decrypted; a vaulted
#: variable it does not read stays out of the targets (and so out of snapshots), never decrypted.
READ_VARS = frozenset({
    "ascend_check_profile", "ascend_check_training_user", "ascend_training_user", "python_env_user",
    "ascend_check_python", "python_env_venv", "python_env_path", "stack_id",
})
_VAULT_ENV = "ANSIBLE_VAULT_PASSWORD_FILE"


def _ansible_inventory(path: Path, vault_password_file: str | None) -> list[Target]:
    """The inventory as `ansible-inventory -i PATH --list` reads it (ansible-core's own loader, with
    every plugin and the vault), its JSON turned into the same Targets as the fast reader's."""
    exe = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which(
        "ansible-inventory"
    )
    if exe is None:
        raise ConfigError(
            f"inventory {path} needs Ansible to read it (a directory, plugin, script or vault), and "
            "ansible-inventory is not installed",
            hint="pip install ansible-core in ascend-ready's environment, or give a plain INI/YAML inventory",
        )
    password_file = vault_password_file or os.environ.get(_VAULT_ENV) or None
    cmd = [exe, "-i", str(path), "--list"]
    if vault_password_file:
        cmd += ["--vault-password-file", vault_password_file]
    env = {
        **os.environ,
        # fail closed: a source Ansible cannot parse is an error, not an empty inventory and a warning
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "false",
    }
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"ansible-inventory -i {path} --list did not run: {exc}",
                          hint="install ansible-core (ansible-inventory), or give an INI or YAML "
                          "inventory file") from None
    if done.returncode != 0:
        err = done.stderr.strip()
        if "no vault secrets" in err:
            raise _vault_error(path, _vault_where(path))
        lines = [line.strip() for line in err.splitlines() if line.strip()]
        first = next((ln for ln in lines if "ERROR" in ln), lines[0] if lines else f"rc {done.returncode}")
        raise ConfigError(
            f"ansible-inventory could not read inventory {path}: {first.removeprefix('ERROR! ')}",
            hint=f"run `{shlex.join(cmd)}` to see Ansible's whole message",
        )
    try:
        data = json.loads(done.stdout)
    except ValueError:
        raise ConfigError(f"ansible-inventory -i {path} --list printed no JSON",
                          hint=f"run `{shlex.join(cmd)}` to see what it printed") from None
    return _from_json(path, data, password_file)


def _vault_where(path: Path) -> str:
    """`host/var` or a file name: the first vaulted thing in the inventory, for the message."""
    roots = [path] if path.is_dir() else [path.parent / "group_vars", path.parent / "host_vars"]
    files = [] if path.is_dir() else [path]
    files += sorted(p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_file())
    for f in files:
        try:
            text = f.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if _vaulted(text):
            return str(f)
    return str(path)


def _vault_error(path: Path, where: str) -> ConfigError:
    return ConfigError(
        f"inventory {path} holds vaulted variables ({where}): pass --vault-password-file FILE or set "
        f"{_VAULT_ENV}",
        hint="the file holds the vault password (or is a script printing it), as for ansible-playbook",
    )


def _from_json(path: Path, data: Any, password_file: str | None) -> list[Target]:
    if not isinstance(data, dict):
        raise ConfigError(f"ansible-inventory -i {path} --list printed no inventory mapping",
                          hint="run ansible-inventory -i PATH --list to see what it prints")
    hostvars = (data.get("_meta") or {}).get("hostvars") or {}
    members = {g: list((body or {}).get("hosts") or []) for g, body in data.items() if g != "_meta"}
    children = {g: list((body or {}).get("children") or []) for g, body in data.items() if g != "_meta"}
    inv = _Inventory()
    for group in members:
        inv.group(group)
    inv.children.update(children)
    seen: list[str] = []

    def walk(group: str, depth: int) -> None:
        if depth > 32:
            raise ConfigError(f"inventory group {group!r} is its own ancestor (a children loop)",
                              hint="remove the loop from the children: sections")
        for host in members.get(group, []):
            if host not in seen:
                seen.append(host)
        for child in children.get(group, []):
            walk(child, depth + 1)

    walk("all", 0)
    decrypt = _Decrypter(path, password_file)
    for host in seen:
        inv.hosts[host] = decrypt.hostvars(host, dict(hostvars.get(host) or {}))
        for group, hosts in members.items():
            if host in hosts and host not in inv.members[group]:
                inv.members[group].append(host)
    targets = []
    for host in seen:
        groups = [g for g in inv.host_groups(host) if g != "all"]
        targets.append(_target(host, groups, inv.hosts[host]))  # --list has merged the group vars
    if not targets:
        raise ConfigError(f"inventory {path} lists no hosts", hint="add hosts under all: or a group")
    return targets


class _Decrypter:
    """Vaulted values (`{"__ansible_vault": ...}` in ansible-inventory's JSON) of the variables
    ascend-check reads, decrypted with ansible-core's VaultLib (imported only when one is there)."""

    def __init__(self, path: Path, password_file: str | None):
        self.path, self.password_file = path, password_file
        self._vault = None

    def hostvars(self, host: str, hostvars: dict[str, Any]) -> dict[str, Any]:
        wanted = set(READ_VARS) | set(CONNECTION_VARS)
        for value in list(hostvars.values()):  # `ansible_become_password: "{{ vault_pass }}"`
            ref = re.fullmatch(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", value.strip()) if isinstance(
                value, str) else None
            if ref:
                wanted.add(ref[1])
        out = {}
        for key, value in hostvars.items():
            if isinstance(value, dict) and set(value) == {"__ansible_vault"}:
                if key not in wanted:
                    continue
                value = self.decrypt(host, key, value["__ansible_vault"])
            out[key] = value
        return out

    def decrypt(self, host: str, key: str, ciphertext: str) -> str:
        if self.password_file is None:
            raise _vault_error(self.path, f"{host}/{key}")
        if self._vault is None:
            from ansible.errors import AnsibleError
            from ansible.parsing.dataloader import DataLoader
            from ansible.parsing.vault import VaultLib, get_file_vault_secret

            try:
                secret = get_file_vault_secret(filename=self.password_file, loader=DataLoader())
                secret.load()
            except AnsibleError as exc:
                raise ConfigError(f"cannot read the vault password file {self.password_file}: {exc.message}",
                                  hint="give the file holding the vault password") from None
            self._vault = VaultLib([("default", secret)])
        from ansible.errors import AnsibleError

        try:
            return self._vault.decrypt(ciphertext).decode()
        except AnsibleError as exc:
            raise ConfigError(
                f"inventory {self.path}: cannot decrypt {host}/{key}: {exc.message}",
                hint=f"check that {self.password_file} holds the password it was encrypted with",
            ) from None


#: one label of a host name (RFC 1123: letters, digits, '-', not at either end; '_' too, as ssh_config
#: aliases and many inventories use it)
_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)\Z")


def address_problem(host: str) -> str:
    """Why `host` is neither an IP address nor a host name ('' when it is one): RFC 1123 length (253, 63 a
    label) and characters. Checked before any connection: a resolver or SSH would fail on it later, some
    with a traceback ("label too long")."""
    import ipaddress

    try:
        ipaddress.ip_address(host.split("%", 1)[0])  # fe80::1%eth0: a scoped link-local address
        return ""
    except ValueError:
        pass
    if ":" in host:
        return "has ':' but is no IPv6 address (an IPv6 address with a port is written [ADDR]:PORT)"
    if len(host) > 253:
        return f"is {len(host)} characters long; a host name has at most 253"
    for label in host[:-1].split(".") if host.endswith(".") else host.split("."):
        if not label:
            return "has an empty label (two dots, or a dot at the start)"
        if len(label) > 63:
            return f"has a label of {len(label)} characters; a label has at most 63"
        if not _LABEL.match(label):
            return (f"label {label!r} has a character other than letters, digits, '-' and '_', "
                    "or starts or ends with '-'")
    return ""


def check_address(host: str, where: str) -> None:
    """ConfigError (exit 2) naming `where` when `host` is neither an IP address nor a host name."""
    why = address_problem(host)
    if why:
        shown = host if len(host) <= 60 else host[:57] + "..."
        raise ConfigError(f"{where}: {shown!r} {why}",
                          hint="give a host name (node01, node01.example.com), an IPv4 address or an IPv6 "
                          "address in brackets ([fe80::1]:22)")


def parse_hosts(spec: str) -> list[Target]:
    """`--hosts h1,user@h2:2222,[fe80::1]:22` as targets."""
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        for one in expand_range(item):  # before the port split: node[01:04] has a colon too
            if one.count("[") != one.count("]"):
                raise ConfigError(f"--hosts: unbalanced brackets in {one[:60]!r}",
                                  hint="write an IPv6 address as [ADDR] or [ADDR]:PORT, e.g. [fe80::1]:22")
            try:
                target = endpoint(one)
            except ValueError:
                raise ConfigError(
                    f"--hosts: bad port in {one!r}", hint="use host, user@host or host:port"
                ) from None
            if not target.name:
                raise ConfigError(
                    f"--hosts: no host name in {one!r}", hint="use host, user@host or host:port"
                )
            check_address(target.name, "--hosts")
            if target.port is not None and not 0 < target.port < 65536:
                raise ConfigError(
                    f"--hosts: port {target.port} in {one!r} is not 1-65535",
                    hint="use host:port, e.g. node01:22",
                )
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


def _vars_paths(folder: Path, name: str) -> list[Path]:
    """The files `folder/name{,.yml,.yaml,.json}` and `folder/name/*.{yml,yaml,json}`, in Ansible's order."""
    candidates = [folder / name, *(folder / f"{name}{ext}" for ext in (".yml", ".yaml", ".json"))]
    found = [c for c in candidates if c.is_file()]
    if (folder / name).is_dir():
        found += sorted(f for f in (folder / name).iterdir() if f.suffix in (".yml", ".yaml", ".json"))
    return found


def var_origin(inventory: Path, target: Target, key: str) -> Path:
    """The file that gives `target` its `key`: host_vars, then group_vars (innermost group first), else
    the inventory itself."""
    folder = inventory if inventory.is_dir() else inventory.parent
    groups = [("group_vars", g) for g in reversed(["all", *target.groups])]
    for sub, name in [("host_vars", target.name), *groups]:
        for f in reversed(_vars_paths(folder / sub, name)):
            try:
                data = yaml.safe_load(f.read_text())
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                continue
            if isinstance(data, dict) and key in data:
                return f
    return inventory
