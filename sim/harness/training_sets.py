"""Resolve the training dependency set of every torch line of the matrix with a real resolver (uv), from
the packages' own metadata (Requires-Dist, Requires-Python), and write provision/training_sets.yml.

The resolver is `uv pip compile` for the stack's training Python and platform (arch, the stack's
manylinux floor) with torch pinned to the line's version, `--exclude-newer` at the data file's date (the
answer does not move when PyPI publishes later) and its cache under the simulator's wheel cache
($ASCEND_SIM_CACHE_DIR/wheels/uv: the simple pages and wheel metadata, a few hundred MB once, most of it
deepspeed's sdists, whose metadata uv builds). Online once (`--online`), then `--offline`: the test
(tests/provision/test_training_sets.py) resolves offline from that cache and compares with the file.

For each package of a set it also asks the resolver for a newer release than the one chosen and records
the resolver's own reason it cannot have one (the declared requirement that binds): the file's sources.

Usage: python -m ascend_ready.sim.harness.training_sets [--online] [--check] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from ascend_ready.errors import SimError
from ascend_ready.provision import training_sets as ts
from ascend_ready.provision.matrix import DEFAULT_ARCH, load_matrix
from ascend_ready.sim.base import cache_root


def uv_cache() -> Path:
    return cache_root() / "wheels" / "uv"


#: A node installs wheels only (pip there has no compiler, and the package directory holds wheels), so a
#: release counts only where it publishes a wheel for the platform's arch and manylinux floor: without
#: this uv falls back to a release's sdist (pyarrow 21+ has no manylinux2014 wheel, so datasets 5 "fits"
#: glibc 2.17 on paper and pip on a CentOS 7.6 node finds no pyarrow>=21). deepspeed is the exception:
#: PyPI has only its sdist, built on the node for the local accelerator (the `deepspeed` extra).
#: The other arch a row's pins are checked on.
OTHER_ARCH = "x86_64"
BINARY = ("--only-binary", ":all:", "--no-binary", "deepspeed")


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        raise SimError("uv is not installed: the training sets are resolved with `uv pip compile`",
                       hint="pip install uv (make venv installs it)")
    return found


def compile_set(torch: str, python: str, platform: str, exclude_newer: str, extra: list[str] = (),
                online: bool = False) -> tuple[dict[str, str] | None, str]:
    """Resolve torch==TORCH with the six training packages; ({name: version}, "") or (None, reason)."""
    reqs = [f"torch=={torch}", *ts.RESOLVE_INPUT, *extra]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.txt"
        src.write_text("\n".join(reqs) + "\n")
        out = Path(tmp) / "out.txt"
        argv = [_uv(), "pip", "compile", str(src), "-q", "--no-header", "--no-annotate", "-o", str(out),
                "--python-version", python, "--python-platform", platform, "--exclude-newer", exclude_newer,
                "--index-url", ts.INDEX, "--cache-dir", str(uv_cache()), *BINARY]
        if not online:
            argv.append("--offline")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            return None, _reason(proc.stderr)
        pins = {}
        for line in out.read_text().splitlines():
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", line.strip())
            if m:
                pins[m.group(1).lower()] = m.group(2)
        return {n: pins[n] for n in ts.PACKAGES}, ""


def _reason(stderr: str) -> str:
    """The resolver's own sentences ("Because all versions of peft depend on torch>=1.13.0 ..."), joined."""
    text = " ".join(line.strip() for line in stderr.splitlines() if line.strip())
    text = re.sub(r"^.*?(?=Because|╰▶)", "", text).replace("╰▶", "").strip()
    text = re.sub(r"\s+", " ", text)
    if "network" in text.lower() or ("offline" in text.lower() and "Because" not in text):
        raise SimError(f"uv could not resolve offline: {text[:300]}",
                       hint="fill the cache once: python -m ascend_ready.sim.harness.training_sets --online")
    return text


def _short(reason: str, limit: int = 400) -> str:
    """uv's reason, its last sentence first where it is long (the one that names the binding requirement)."""
    if len(reason) <= limit:
        return reason
    return reason[: limit // 2].rstrip() + " ... " + reason[-limit // 2:].lstrip()


def lines(m=None) -> list[tuple[str, str, str]]:
    """(torch, python, platform) of every torch line of the matrix: the newest Python 3.10+ its stacks'
    wheels support (ascend-ready's floor), the oldest manylinux floor among its stacks."""
    m = m or load_matrix()
    out: dict[str, tuple[str, str]] = {}
    for s in m.stacks:
        py = ts.training_python(s.python)
        plat = ts.platform(DEFAULT_ARCH, s.manylinux)
        out.setdefault(s.torch, (py, plat))
    return [(t, py, plat) for t, (py, plat) in out.items()]


def resolve_all(online: bool, exclude_newer: str) -> list[dict]:
    rows = []
    for torch, python, plat in lines():
        pins, why = compile_set(torch, python, plat, exclude_newer, online=online)
        row: dict = {"torch": torch, "python": python, "platform": plat}
        if pins is None:
            row["none"] = why
        else:
            row["packages"] = pins
            # The row is resolved for the matrix's arch (aarch64, where Ascend servers are); the same
            # pins must install on x86_64 at the same floor too (Atlas x86 servers, the simulated nodes).
            other = plat.replace(f"{DEFAULT_ARCH}-", f"{OTHER_ARCH}-", 1)
            same, why = compile_set(torch, python, other, exclude_newer,
                                    [f"{n}=={v}" for n, v in pins.items()], online)
            if same is None:
                raise SimError(f"torch {torch}: the {plat} set does not install on {other}: {_short(why)}",
                               hint="resolve the line for both arches (sim/harness/training_sets.py)")
            limits = {}
            for name, version in pins.items():
                newer, reason = compile_set(torch, python, plat, exclude_newer, [f"{name}>{version}"], online)
                limits[name] = (_short(reason) if newer is None else
                                f"a newer {name} resolves too, with other packages older: {newer}")
            row["limits"] = limits
        rows.append(row)
        print(f"torch {torch} (Python {python}, {plat}): {row.get('packages') or row['none']}",
              file=sys.stderr)
    return rows


class _Indented(yaml.SafeDumper):
    """Lists indented under their key, as yamllint (playbooks/.yamllint) wants them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--online", action="store_true", help="ask the index (fills the cache)")
    ap.add_argument("--out", type=Path, default=ts.DATA_FILE)
    ap.add_argument("--exclude-newer", default=None, help="default: the data file's date")
    args = ap.parse_args(argv)
    date = args.exclude_newer or ts.load_training_sets().exclude_newer
    rows = resolve_all(args.online, date)
    head = ts.DATA_FILE.read_text().split("\nsets:", 1)[0] if ts.DATA_FILE.is_file() else ""
    body = yaml.dump({"sets": rows}, Dumper=_Indented, sort_keys=False, width=10_000, allow_unicode=True)
    args.out.write_text(head.rstrip("\n") + "\n" + body if head else body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
