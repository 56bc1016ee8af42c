"""The held-out split of issue 31: how many real logs from public threads `diagnose` names the cause of.

tests/diagnose/data/corpus/manifest.yml lists every log with its source thread and what cause 1 must be
(a regex over the first cause's `<id> <code>`). `dev` logs are the ones the knowledge base was written
from, `heldout` logs were held back, `healthy` logs must give no finding. Prints one line per log and the
hit rate per split; --json writes the figures. --corpus scores another directory of the same shape (a new
collection, before it joins the corpus: scored on the tree its entries were not written on).

    .venv/bin/python bench/diagnose_corpus.py [--split heldout] [--json out.json] [-v] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests/diagnose/data/corpus"


def load_manifest(corpus: Path = CORPUS) -> dict[str, dict]:
    return yaml.safe_load((corpus / "manifest.yml").read_text(encoding="utf-8"))["logs"]


def judge(name: str, spec: dict, corpus: Path = CORPUS) -> tuple[bool, str]:
    """(hit, what diagnose said) for one log of the manifest."""
    from ascend_ready.checks.diagnose import diagnose_paths

    report = diagnose_paths([corpus / name])
    causes = [f for f in report.findings if f.role == "cause"]
    said = f"{causes[0].id} {causes[0].code}" if causes else "(no finding)"
    if name.startswith("healthy/"):
        return not report.findings, ", ".join(f"{f.id} {f.code}" for f in report.findings) or "(none)"
    if not causes:
        return False, said
    first = causes[0]
    ok = bool(re.search(spec["expect"], said, re.IGNORECASE)) and bool(first.fix) and first.kind != "wrapper"
    return ok, said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "heldout", "fresh", "healthy"), action="append")
    ap.add_argument("--round", help="only the fresh logs of this round (e.g. 11)")
    ap.add_argument("--json")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="a directory with manifest.yml and */*.log")
    args = ap.parse_args(argv)
    manifest = load_manifest(args.corpus)
    figures: dict[str, dict] = {}
    for split in args.split or ("dev", "heldout", "fresh", "healthy"):
        names = sorted(n for n in manifest if n.startswith(split + "/")
                       and (not args.round or manifest[n].get("collected") in (None, f"round {args.round}")))
        hits, misses = 0, []
        for name in names:
            ok, said = judge(name, manifest[name], args.corpus)
            hits += ok
            if not ok:
                misses.append({"log": name, "said": said, "want": manifest[name].get("expect")})
            if args.verbose or not ok:
                print(f"{'ok  ' if ok else 'MISS'} {name}: {said}")
        rate = 100.0 * hits / len(names) if names else 0.0
        figures[split] = {"logs": len(names), "named": hits, "rate": round(rate, 1), "misses": misses}
        label = "clean (no finding)" if split == "healthy" else "cause named"
        print(f"{split}: {hits} of {len(names)} {label} ({rate:.1f} %)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
