"""`lint-imports` (import-linter) on the product: the contracts in pyproject.toml's [tool.importlinter].

import-linter finds a package's modules by walking its folder, and ours is spread over several top-level
folders (pyproject's package-dir: common/ is `ascend_ready`, checks/ is `ascend_ready.checks`, ...). So the
package is first laid out as one tree of links in a temporary folder, which goes first on the path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]


def package_view(into: Path) -> Path:
    """`into`/ascend_ready: pyproject's package-dir as one folder tree (links to the real folders)."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    root = into / "ascend_ready"
    root.mkdir()
    for entry in (REPO / mapping["ascend_ready"]).iterdir():
        if entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "ascend_ready":
            (root / package.removeprefix("ascend_ready.").replace(".", "/")).symlink_to(REPO / folder)
    return into


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ascend-ready-imports-") as tmp:
        view = package_view(Path(tmp))
        path = os.pathsep.join(filter(None, [str(view), os.environ.get("PYTHONPATH")]))
        lint = Path(sys.executable).with_name("lint-imports")
        return subprocess.call([str(lint), str(REPO / "pyproject.toml"), "--no-cache"],
                               env={**os.environ, "PYTHONPATH": path}, cwd=tmp)


if __name__ == "__main__":
    sys.exit(main())
