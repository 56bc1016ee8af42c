"""Build the simulated nodes' cached base image (`ascend-sim base build`) from the source tree with any
Python 3.10+, before .venv/ exists: `make demo` runs it while the virtual environment installs.

sim/base.py needs only the standard library and ascend_ready.errors; this loads the two packages it
sits in from their folders (pyproject's package-dir) without installing anything. A concurrent
`ascend-sim up` waits for this build on the base's lock instead of starting a second one.
Usage: python3 scripts/sim-base.py
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _package(name: str, folder: Path) -> None:
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="sim-base: %(message)s")
    _package("ascend_ready", REPO / "common")
    _package("ascend_ready.sim", REPO / "sim")
    from ascend_ready.errors import AscendReadyError
    from ascend_ready.sim import base

    try:
        image = base.ensure()
    except AscendReadyError as exc:
        print(f"sim-base: error: {exc}", file=sys.stderr)
        return 1
    print(image.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
