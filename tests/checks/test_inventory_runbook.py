"""The runbook's and README's commands run from the checkout's root, where ansible.cfg is: no `cd
playbooks`, every playbook named by its path from there, every inventory they name from the repo exists."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "docs" / "runbook.md"]


def shell_lines(page: Path) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_commands_run_from_the_checkout_root(page):
    text = page.read_text()
    assert "cd playbooks" not in text and "../.venv" not in text and "-i ../" not in text
    assert (REPO / "ansible.cfg").exists()
    for line in shell_lines(page):
        words = line.partition("#")[0].split()
        if words and words[0].endswith("ansible-playbook"):
            playbooks = [w for w in words if w.endswith(".yml")]
            assert playbooks and all((REPO / w).is_file() for w in playbooks), line
        for flag, value in itertools.pairwise(words):
            if flag == "-i" and value.startswith("playbooks/"):
                assert (REPO / value).exists(), line


def test_the_runbook_starts_from_the_sample_inventory():
    text = (REPO / "docs" / "runbook.md").read_text()
    assert "cp -r playbooks/inventory/sample4 inventory/rack1" in text
    sample = REPO / "playbooks" / "inventory" / "sample4"
    assert (sample / "hosts.ini").is_file() and (sample / "group_vars" / "ascend_nodes.yml").is_file()
    assert len(list((sample / "host_vars").glob("node0*.yml"))) == 4
