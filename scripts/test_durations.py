"""Writes tests/durations.json, the seconds each test module took, from a run's JUnit XML (pytest
--junitxml): tests/xdist_support.py hands the longest modules to the xdist workers first.

    .venv/bin/pytest -n 2 --dist loadgroup --no-loadscope-reorder --junitxml=/tmp/junit.xml
    .venv/bin/python scripts/test_durations.py /tmp/junit.xml
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_of(classname: str) -> str | None:
    """tests.checks.test_x.TestY -> tests/checks/test_x.py (the longest dotted prefix that is a file)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (REPO / path).is_file():
            return path
    return None


def module_seconds(junit: Path) -> dict[str, float]:
    totals: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        module = module_of(case.get("classname", ""))
        if module:
            totals[module] = totals.get(module, 0.0) + float(case.get("time", "0"))
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=REPO / "tests" / "durations.json")
    args = parser.parse_args(argv)
    totals = module_seconds(args.junit)
    if not totals:
        print(f"{args.junit}: no test case names a module of this checkout", file=sys.stderr)
        return 1
    data = {"source": f"pytest --junitxml, {sum(totals.values()):.0f} s in all (setup included: a module "
                      "that first uses a session cluster pays for it)",
            "modules": {k: round(v, 1) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}}
    args.output.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
