#!/usr/bin/env bash
# Installs the project into the virtual environment VENV (made by the Makefile's venv target): uv where it
# can be had (pip install uv, a few seconds; the install itself then takes seconds instead of minutes),
# else pip. Both resolve the same: uv is given pip's configuration (its indexes, find-links, constraints)
# and pip's rule of taking the best match across every index, so torch==2.13.0 is the CPU build wherever
# pip would pick it. ASCEND_READY_INSTALLER=pip forces pip.
#   install-venv.sh VENV TORCH_VERSION VERL_VERSION
set -euo pipefail
venv=$1 torch=$2 verl=$3
bin=$venv/bin
# torch in the same command, so nothing resolves to a CUDA build.
main=(-e '.[dev,train,verl]' "torch==$torch")
# verl without its requirements (a transformers pin and its vllm/megatron extras would pull a CUDA torch):
# the [verl] extra above brings what composing its Hydra config and its validate_config need (docs/verl.md).
verl=("verl==$verl")

if [ "${ASCEND_READY_INSTALLER:-uv}" = uv ] && "$bin/pip" install -q uv 2>/dev/null; then
  # pip's effective configuration (pip.conf files and PIP_* variables) as uv's variables
  eval "$("$bin/python" - <<'PY'
import shlex, subprocess, sys
out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
conf = {}
for line in out.splitlines():  # global.find-links='/opt/wheels', :env:.cert='...': the later one wins
    key, _, value = line.partition("=")
    conf[key.split(".", 1)[-1]] = value.strip("'\"")
uv = {"index-url": "UV_INDEX_URL", "extra-index-url": "UV_EXTRA_INDEX_URL", "find-links": "UV_FIND_LINKS",
      "constraint": "UV_CONSTRAINT", "cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT"}
for key, name in uv.items():
    if conf.get(key):
        value = conf[key]
        if name == "UV_FIND_LINKS":  # pip separates by whitespace, uv by commas
            value = ",".join(value.split())
        print(f"export {name}={shlex.quote(value)}")
PY
)"
  echo "installing with uv ($("$bin/uv" --version))"
  # --compile-bytecode, as pip does: the simulated nodes run this .venv from a read-only mount, where a
  # module without its .pyc is compiled again by every process that imports it (torch, in every rank).
  uv=("$bin/uv" pip install -q --python "$bin/python" --index-strategy unsafe-best-match --compile-bytecode)
  # pip, setuptools and wheel as pip's branch upgrades them: what the venv offers a later pip install
  "${uv[@]}" "${main[@]}" pip setuptools wheel
  "${uv[@]}" --no-deps "${verl[@]}"
else
  echo "installing with pip"
  "$bin/pip" install -q -U pip setuptools wheel
  "$bin/pip" install -q "${main[@]}"
  "$bin/pip" install -q --no-deps "${verl[@]}"
fi
# The heaviest imports once, so their bytecode is written now (in `make demo` while the node base image
# builds) rather than by two nodes and the controller at once in the middle of a run.
"$bin/python" -c "import ansible.cli.playbook, torch.distributed, transformers, trl; from trl import GRPOTrainer
import ascend_ready.training.grpo, ascend_ready.checks.cli" || echo "warning: importing the training stack failed" >&2
echo "installed $venv in ${SECONDS}s"
