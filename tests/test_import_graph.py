"""The product's modules import one another without a cycle (docs/architecture.md): the graph is read from
the source with `ast` (every import, also those inside functions and under TYPE_CHECKING), for every module
of the folders pyproject.toml maps into `ascend_ready`, less the simulator."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
#: what the product is made of: the simulator (sim/) may import it, never the other way round
PRODUCT = ("ascend_ready", "ascend_ready.fleet", "ascend_ready.checks", "ascend_ready.training",
           "ascend_ready.provision")


def product_modules(repo: Path, packages: dict[str, str]) -> dict[str, Path]:
    """module name -> its file, for every module under the folders `packages` (package -> folder) maps."""
    mapped = {(repo / folder).resolve() for folder in packages.values()}
    out = {}
    for package, folder in packages.items():
        root = repo / folder
        for path in sorted(root.rglob("*.py")):
            inner = next((p for p in path.parents if p.resolve() in mapped), None)
            if inner is None or inner.resolve() != root.resolve():
                continue  # a subfolder mapped on its own (e.g. checks/ under common/'s package)
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """importer -> {imported module: line of the first import}, among `modules` only."""
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                # `from pkg import sub` imports the module pkg.sub where there is one, else pkg
                wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in wanted:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (a, b, ..., a) through each strongly connected group of modules (Tarjan), shortest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # iterative: a deep import chain must not hit the recursion limit
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.add(w)
                        if w == node:
                            break
                    if len(group) > 1:
                        groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        found = None
        while queue and found is None:  # breadth first: the shortest way back to `start`
            v = queue.pop(0)
            for w in sorted(graph[v]):
                if w == start:
                    found = [*paths[v], start]
                    break
                if w in group and w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
        out.append(found)
    return sorted(out, key=len)


def _product() -> dict[str, dict[str, int]]:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return import_graph(product_modules(REPO, {p: f for p, f in mapping.items() if p in PRODUCT}))


def _name(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)) + \
        f" -> {cycle[-1]}"


def test_the_products_modules_import_each_other_without_a_cycle():
    graph = _product()
    assert "ascend_ready.fleet.transport" in graph and "ascend_ready.checks.cli" in graph  # the graph is read
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_name(c, graph) for c in found)


def test_a_cycle_is_found_and_named_with_its_import_lines(tmp_path):
    (tmp_path / "lib" / "sub").mkdir(parents=True)
    for name, text in {
        "lib/__init__.py": "",
        "lib/a.py": "import os\nfrom lib import b\n",
        "lib/b.py": "def f():\n    from .sub import c\n",
        "lib/sub/__init__.py": "",
        "lib/sub/c.py": "from ..a import x\n",
        "lib/d.py": "from lib.a import x\n",
    }.items():
        (tmp_path / name).write_text(text)
    graph = import_graph(product_modules(tmp_path, {"lib": "lib"}))
    assert graph["lib.d"] == {"lib.a": 1}
    found = cycles(graph)
    assert found == [["lib.a", "lib.b", "lib.sub.c", "lib.a"]]
    assert _name(found[0], graph) == "lib.a (line 2) -> lib.b (line 2) -> lib.sub.c (line 1) -> lib.a"


# ---------------------------------------------------------------- function-level imports

#: optional dependencies too heavy to import at a module's top (the train and verl extras, numactl-free
#: binding aside): a function-level import of one needs no comment
HEAVY_OPTIONAL = frozenset({
    "torch", "torch_npu", "ray", "verl", "deepspeed", "matplotlib", "transformers", "trl", "peft",
    "datasets", "accelerate", "pandas", "pyarrow", "hydra", "omegaconf", "tensorboard", "vllm", "megatron",
    "tensordict",
})
FUNCTION_IMPORT_FOLDERS = ("common", "fleet", "provision", "checks", "training")


def function_level_imports(repo: Path) -> dict[str, list[tuple[int, str]]]:
    """file -> [(line, module)] of the function-level imports that are neither of a heavy optional
    dependency nor carry a comment (on their line or the line above) saying why they are there."""
    out: dict[str, list[tuple[int, str]]] = {}
    for folder in FUNCTION_IMPORT_FOLDERS:
        for path in sorted((repo / folder).rglob("*.py")):
            text = path.read_text()
            lines = text.splitlines()
            seen = set()
            for fn in ast.walk(ast.parse(text, str(path))):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                        continue
                    seen.add(node.lineno)
                    module = node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
                    said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
                    if module.split(".")[0] not in HEAVY_OPTIONAL and not said:
                        out.setdefault(path.relative_to(repo).as_posix(), []).append((node.lineno, module))
    return out


#: the function-level imports without a reason when this rule came (issue 27), per file: the count may
#: only go down (move the import to the top, or say why on its line); a file not listed may have none
FUNCTION_IMPORTS_BEFORE = {
    "checks/cli.py": 36,
    "checks/cluster/collective_worker.py": 1,
    "checks/cluster/fleet_file.py": 6,
    "checks/cluster/mesh_run.py": 5,
    "checks/diagnose/render.py": 1,
    "checks/html_report.py": 1,
    "checks/parse_cli.py": 2,
    "checks/parsers/base.py": 1,
    "checks/parsers/hccn/collection.py": 2,
    "checks/preflight.py": 5,
    "checks/profile.py": 1,
    "checks/registry.py": 2,
    "checks/report.py": 5,
    "checks/resources/hccn.py": 1,
    "checks/resources/npu.py": 2,
    "checks/snapshot.py": 2,
    "checks/suite/test_fleet.py": 1,
    "checks/suite/test_versions.py": 1,
    "common/cli_guard.py": 4,
    "common/errors.py": 2,
    "common/paths.py": 3,
    "fleet/inventory.py": 5,
    "fleet/job.py": 1,
    "fleet/transport.py": 8,
    "provision/cli.py": 1,
    "provision/packages.py": 2,
    "provision/prepare_cli.py": 4,
    "training/checkpoint.py": 3,
    "training/cli.py": 21,
    "training/config.py": 1,
    "training/launch.py": 4,
    "training/memory_plan.py": 1,
    "training/multinode.py": 1,
    "training/node_files.py": 4,
    "training/node_probe.py": 6,
    "training/preflight.py": 2,
    "training/ray_cluster.py": 1,
    "training/rewards.py": 2,
    "training/verl_data.py": 2,
    "training/worker_hooks.py": 2,
}


def test_a_function_level_import_is_of_a_heavy_dependency_or_says_why():
    found = function_level_imports(REPO)
    grown = {f: [m for _, m in found[f]] for f in found if len(found[f]) > FUNCTION_IMPORTS_BEFORE.get(f, 0)}
    assert not grown, (
        "function-level imports that are not of a heavy optional dependency (torch, ray, verl, deepspeed, "
        "matplotlib, ...) and say no reason: move them to the module's top, or put the reason (a measured "
        f"start-up cost, an optional dependency) in a comment on the line: {grown}")
    assert sum(len(v) for v in found.values()) <= sum(FUNCTION_IMPORTS_BEFORE.values())
