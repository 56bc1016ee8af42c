"""docs/: the generated pages match their sources, and the hand-written ones name commands and
folders that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("h8_gen_docs", REPO / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_docs = _generator()


@pytest.mark.parametrize("page", ["checks.md", "matrix.md", "packages.md", "verl.md", "README.md"])
def test_generated_page_is_up_to_date(page):
    want = {path.name: text for path, text in gen_docs.pages().items()}[page]
    have = (REPO / "checks" / page if page == "README.md" else DOCS / page).read_text()
    assert have == want, f"docs/{page} is stale: run .venv/bin/python scripts/gen_docs.py"


def test_every_check_and_matrix_stack_is_documented():
    from ascend_ready.checks.registry import all_checks
    from ascend_ready.provision.matrix import load_matrix

    checks = (DOCS / "checks.md").read_text()
    assert all(f"### {cid}\n" in checks for cid in all_checks())
    matrix = (DOCS / "matrix.md").read_text()
    assert all(f"`{s.id}`" in matrix for s in load_matrix().stacks)


def _subcommands(cli) -> set[str]:
    return set(cli.commands)


def test_commands_named_in_the_docs_exist():
    from ascend_ready.checks.cli import main as check_cli
    from ascend_ready.provision.cli import main as matrix_cli
    from ascend_ready.training.cli import main as train_cli

    known = {
        "ascend-matrix": _subcommands(matrix_cli),
        "ascend-check": _subcommands(check_cli),
        "ascend-train": _subcommands(train_cli),
    }
    used = []
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "bad-inputs.md":  # the record of what users mistype: wrong commands on purpose
            continue
        for tool, sub in re.findall(
            r"\b(ascend-matrix|ascend-check|ascend-train) ([a-z][a-z-]+)\b", page.read_text()
        ):
            used.append((page.name, tool, sub))
    # `ascend-check` runs checks with no subcommand, so a following word may be prose ("ascend-check runs")
    wrong = [u for u in used if u[2] not in known[u[1]] and u[1] != "ascend-check"]
    assert not wrong, wrong
    assert ("runbook.md", "ascend-matrix", "packages") in used


def test_the_architecture_page_names_every_stage_folder():
    text = (DOCS / "architecture.md").read_text()
    for folder in ("provision/", "playbooks/", "checks/", "training/", "sim/", "common/"):
        assert folder in text, folder
        assert (REPO / folder).is_dir()
