"""`npu-smi` and `hccn_tool` for a burn-in probe run on this machine (tests/checks/test_burn_in.py): the
simulator's renderers over a node state file, so the probe samples what the simulated tools print.

    python burn_in_tools.py STATE.json npu-smi info -t common -i 1
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ascend_ready.sim.hw.state import NodeView
from ascend_ready.sim.node.tool import npu_smi_run
from ascend_ready.sim.render import hccn
from ascend_ready.sim.render.npu_smi import ToolError


def main(state_file: str, tool: str, *args: str) -> int:
    view = NodeView(json.loads(Path(state_file).read_text()))
    if tool == "npu-smi":
        try:
            sys.stdout.write(npu_smi_run(view, list(args)))
        except ToolError as err:
            sys.stdout.write(err.text)
            return err.rc
        return 0
    result = hccn.run(view, list(args))
    sys.stdout.write(result.text)
    return result.rc


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
