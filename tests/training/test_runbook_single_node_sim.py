"""The runbook's single-node commands (docs/runbook.md, "On one node, as the training user") work as
written on a node provisioned by site.yml: `sudo -iu ascend`, the venv the playbook built activated,
`ascend-train grpo -c ...` with no inventory. Its preflight is ascend-check on the node itself, as the
training user, judged by the profile the playbook recorded there (the one the controller judges the node
by), and it passes before training starts; the tiny config stands in for the 7B one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sim_support import TRAINING_STACK, node_run, own_cluster, provisioned_cluster

from ascend_ready.checks.profile import NODE_PROFILE

RUN_DIR, SUBNET = own_cluster("runbook", 6)
RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"
OUT = "/tmp/runbook-grpo"  # the training user's output dir on the node
STEPS = 2


def runbook_single_node_block() -> list[str]:
    """The runbook's single-node commands, one per line (continuations joined)."""
    text = RUNBOOK.read_text()
    intro = text.index("On one node, as the training user")
    block = re.search(r"```sh\n(.*?)```", text[intro:], re.S)
    assert block, "no sh block after the runbook's single-node paragraph"
    return [ln.strip() for ln in re.sub(r"\\\n\s*", "", block.group(1)).splitlines() if ln.strip()]


def test_the_runbook_names_the_training_user_and_the_provisioned_venv():
    login, activate, train = runbook_single_node_block()
    assert login == "sudo -iu ascend"
    assert activate == f"source ~/venvs/ascend-{TRAINING_STACK}/bin/activate"
    assert train.startswith("ascend-train grpo -c ") and "--skip-preflight" not in train


@pytest.fixture(scope="module")
def node(sim_host):
    with provisioned_cluster(RUN_DIR, SUBNET, 1, "a2-ubuntu2204", os_prereqs=True,
                             check_profile=True) as (c, _inventory):
        yield c


# provisioning one node, os_prereqs included, then training on it: minutes on a loaded 2-core machine
@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_runbook_single_node_commands_pass_the_preflight_and_train(node):
    login, activate, train = runbook_single_node_block()
    # the runbook's login and venv as written; its ascend-train line with the tiny config and a few steps
    algo = train.split()[1]
    script = (f"{activate}\nascend-train {algo} -c tiny -o {OUT} eval_max_examples=0 save_every={STEPS} "
              f"max_steps={STEPS}\n")
    from ascend_ready.sim import cluster as sim

    run = sim.node_exec(node.node("node01"), login.split(), input=script, capture_output=True, text=True,
                        timeout=900)
    output = run.stdout + run.stderr
    assert "preflight: ascend-check on the local node" in output, output[-4000:]
    assert "preflight: passed" in output, output[-6000:]
    assert run.returncode == 0, output[-6000:]
    assert "PREFLIGHT SKIPPED" not in output
    # the profile the preflight judged by is the one the playbook recorded (the inventory's)
    recorded = node_run(node, "node01", "cat", NODE_PROFILE).stdout
    assert "min_disk_free_gb: 1" in recorded, recorded
    metrics = node_run(node, "node01", "cat", f"{OUT}/metrics.jsonl").stdout
    steps = {json.loads(ln).get("step") for ln in metrics.splitlines() if ln.strip()}
    assert STEPS in steps, metrics[-2000:]
