#!/usr/bin/env bash
# The venv `make test-oldest-set` runs the trainers' tests in: the oldest training set of
# provision/training_sets.yml (the lowest TRL/transformers any torch line of the matrix gets: torch 2.0.1's)
# with the node extra's other requirements, and ascend-ready itself from this checkout with --no-deps, as
# python_env builds a node's venv. torch is this machine's CPU build (TORCH): the only CPU torch at hand,
# so the old transformers/TRL run on a newer torch than their stack pins (docs/packages.md says so).
# Usage: scripts/install-oldest-set.sh VENV TORCH_VERSION   (after `make venv`: .venv/bin/uv and the
# project's metadata come from there)
set -euo pipefail
venv=$1 torch=$2
reqs=$(.venv/bin/python - <<'PY'
from ascend_ready.provision import packages as pk
from ascend_ready.provision import training_sets as ts
from ascend_ready.provision.versions import version_key

rows = [s for s in ts.load_training_sets().sets if s.packages]
oldest = min(rows, key=lambda s: (version_key(s.packages["trl"]), version_key(s.packages["transformers"])))
print(" ".join(pk.training_requirements(torch=oldest.torch)[1:]))
PY
)
echo "oldest training set: $reqs"
uv=(.venv/bin/uv pip install -q --python "$venv/bin/python" --index-strategy unsafe-best-match)
# pip's find-links (where this machine's CPU torch lies, as install-venv.sh hands it to uv)
for dir in $(.venv/bin/pip config get global.find-links 2>/dev/null || true); do uv+=(--find-links "$dir"); done
# shellcheck disable=SC2086
"${uv[@]}" "torch==$torch" $reqs hypothesis pytest-timeout packaging
"${uv[@]}" --no-deps -e .
"$venv/bin/python" -c "import trl, transformers; print('trl', trl.__version__, 'transformers', transformers.__version__)"
