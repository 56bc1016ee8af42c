#!/usr/bin/env python3
"""Count the top-level folders the launch path crosses: a static walk of the calls from the CLI's
multi-node entry (training/cli.py) to where the nodes are reached (fleet/).

    python scripts/launch_crossings.py [--root DIR] [--from training/cli.py:launch_request,_finish] [-v]

How it counts. Every function and method of the product's folders (common, fleet, provision, checks,
training) is read with `ast`. A call is an edge when its callee resolves statically: a name defined in the
same module or imported from one of ours (`from ascend_ready.x import f`, `module.f` of an imported
module), a class's own methods (`self.f`), a class called (its `__init__`), and the launcher registry
(training/launcher.py `LAUNCHERS`: `launch` reaches each registered class's `launch`). The walk starts at
the entry functions and follows every edge once; a crossing is an edge whose caller and callee lie in
different top-level folders. The walk stops at fleet/ (the nodes are reached there: its own calls are not
followed). Prints the crossings, the files entered and the count.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

FOLDERS = {"common": "ascend_ready", "fleet": "ascend_ready.fleet", "provision": "ascend_ready.provision",
           "checks": "ascend_ready.checks", "training": "ascend_ready.training"}
STOP = "fleet"
#: where a node is reached: a command run on it (the probe batch, a session, a job on many nodes)
SINKS = {("ascend_ready.fleet.transport", "run_script"), ("ascend_ready.fleet.transport", "ssh_client"),
         ("ascend_ready.fleet.sessions", "open_sessions"), ("ascend_ready.fleet.job", "run_job")}
#: the module of each launcher the CLI registers (--launcher)
LAUNCHER_MODULES = {"ssh": ".multinode", "slurm": ".slurm_launch", "verl-ray": ".verl_glue"}


def module_of(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    base = FOLDERS[parts[0]]
    rest = [p for p in parts[1:] if p != "__init__"]
    return ".".join([base, *rest])


class Index:
    def __init__(self, root: Path):
        self.root = root
        self.files: dict[str, Path] = {}
        self.funcs: dict[tuple[str, str], ast.AST] = {}
        self.classes: dict[tuple[str, str], ast.ClassDef] = {}
        self.imports: dict[str, dict[str, tuple[str, str | None]]] = {}
        for folder in FOLDERS:
            for path in sorted((root / folder).rglob("*.py")):
                mod = module_of(root, path)
                self.files[mod] = path
                tree = ast.parse(path.read_text(), str(path))
                self._index(mod, tree)
        self.registry = self._registry()

    def _index(self, mod: str, tree: ast.Module) -> None:
        imports: dict[str, tuple[str, str | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ascend_ready"):
                for a in node.names:
                    imports[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("ascend_ready"):
                        imports[a.asname or a.name] = (a.name, None)
        self.imports[mod] = imports
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs[(mod, node.name)] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[(mod, node.name)] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.funcs[(mod, f"{node.name}.{item.name}")] = item

    def _registry(self) -> list[tuple[str, str]]:
        path = self.files.get("ascend_ready.training.launcher")
        if path is None:
            return []
        return [(m, f"{c}.launch") for m, c in re.findall(r'"(ascend_ready[\w.]+):(\w+)"', path.read_text())]

    def resolve_symbol(self, mod: str, name: str) -> tuple[str, str] | None:
        """(module, function) of a name as seen in `mod`: its own function or class, or an import."""
        if (mod, name) in self.funcs:
            return (mod, name)
        if (mod, name) in self.classes:
            return (mod, f"{name}.__init__") if (mod, f"{name}.__init__") in self.funcs else None
        imp = self.imports[mod].get(name)
        if imp is None:
            return None
        target, attr = imp
        if attr is None:
            return None
        if f"{target}.{attr}" in self.files:  # `from pkg import module`
            return None
        if target in self.files:
            return self.resolve_symbol(target, attr) if target != mod else None
        return None

    def module_alias(self, mod: str, name: str) -> str | None:
        imp = self.imports[mod].get(name)
        if imp is None:
            return None
        target, attr = imp
        full = target if attr is None else f"{target}.{attr}"
        return full if full in self.files else None

    def callees(self, mod: str, qual: str) -> list[tuple[str, str]]:
        func = self.funcs[(mod, qual)]
        cls = qual.split(".")[0] if "." in qual else None
        out: list[tuple[str, str]] = []
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            f, hit = node.func, None
            if isinstance(f, ast.Name):
                hit = self.resolve_symbol(mod, f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if f.value.id == "self" and cls and (mod, f"{cls}.{f.attr}") in self.funcs:
                    hit = (mod, f"{cls}.{f.attr}")
                elif (alias := self.module_alias(mod, f.value.id)) is not None:
                    hit = self.resolve_symbol(alias, f.attr)
                elif (mod, f.value.id) in self.classes and (mod, f"{f.value.id}.{f.attr}") in self.funcs:
                    hit = (mod, f"{f.value.id}.{f.attr}")
            if hit is not None and hit != (mod, qual):
                out.append(hit)
        if (mod, qual) == ("ascend_ready.training.launcher", "launch"):
            out += [r for r in self.registry if r in self.funcs]
        return list(dict.fromkeys(out))


def folder(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else "common"


def walk(index: Index, starts: list[tuple[str, str]], skip: set[str], reach: bool = True,
         ) -> tuple[list[tuple], set[str]]:
    """The crossings of the walk from `starts`, and the files it enters; with `reach`, only the calls on a
    path that ends where a node is reached (SINKS): loading a file, parsing text or reading a log here
    is not the walk to the nodes."""
    seen, crossings, files, edges = set(), [], set(), []
    stack = list(reversed(starts))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        files.add(node[0])
        if folder(node[0]) == STOP:
            continue
        for callee in index.callees(*node):
            if callee[0] in skip:
                continue
            edges.append((node, callee))
            stack.append(callee)
    if reach:
        reaches, grew = set(SINKS), True
        while grew:
            grew = False
            for a, b in edges:
                if b in reaches and a not in reaches:
                    reaches.add(a)
                    grew = True
        edges = [(a, b) for a, b in edges if b in reaches]
        files = {m for edge in edges for m, _ in edge}
    crossings = [(a, b) for a, b in edges if folder(a[0]) != folder(b[0])]
    return crossings, files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--from", dest="start", default="training/cli.py:launch_request,_finish",
                    help="FILE:FUNC[,FUNC...] the walk starts at")
    ap.add_argument("--launcher", help="follow only this registered launcher (ssh: the launch-spec walk)")
    ap.add_argument("--skip", action="append", default=[], metavar="MODULE",
                    help="do not enter MODULE (ascend_ready.training.verl_glue: a tree without the seam)")
    ap.add_argument("--by", choices=("call", "file"), default="file",
                    help="count distinct calls, or distinct (caller file, callee file) pairs [file]")
    ap.add_argument("--all", action="store_true",
                    help="every call reachable from the entry, not only those on a path to the nodes")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every crossing")
    args = ap.parse_args(argv)
    root = Path(args.root)
    index = Index(root)
    if args.launcher:
        suffix = LAUNCHER_MODULES.get(args.launcher, "?")
        index.registry = [r for r in index.registry if r[0].endswith(suffix)]
    path, _, names = args.start.partition(":")
    mod = module_of(root, root / path)
    starts = [(mod, n) for n in names.split(",")]
    missing = [n for n in starts if n not in index.funcs]
    if missing:
        print(f"no such function: {missing}", file=sys.stderr)
        return 2
    crossings, files = walk(index, starts, set(args.skip), reach=not args.all)
    if args.by == "file":
        crossings = list(dict.fromkeys(((a, ""), (b, "")) for (a, _), (b, _) in crossings))
    if args.verbose:
        for (a, fa), (b, fb) in crossings:
            print(f"{folder(a)} -> {folder(b)}: {a}{'.' + fa if fa else ''} -> {b}{'.' + fb if fb else ''}")
    print(f"crossings: {len(crossings)} ({args.by}); files: {len(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
