"""Issue 28: verl's own requirements (its installed wheel's metadata, importlib.metadata) against this
controller's venv and the matrix row's node pins: every difference on the controller is one
provision/engines.py's CONTROLLER_ONLY explains, and what it says ("not imported on the controller") is
checked by running the controller's verl path (compose and validate_config, Megatron and a critic) in a
fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ascend_ready.errors import MatrixError
from ascend_ready.provision.engines import CONTROLLER_ONLY, VERL_EXTRA_PACKAGES, controller_pins
from ascend_ready.provision.matrix import load_matrix

md = pytest.importorskip("importlib.metadata")
try:
    VERL = md.distribution("verl")
except md.PackageNotFoundError:
    pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1)", allow_module_level=True)

#: the module each package of CONTROLLER_ONLY is imported as
MODULES = {"megatron-core": "megatron.core", "megatron-bridge": "megatron.bridge",
           "transferqueue": "transfer_queue", "torchdata": "torchdata", "wandb": "wandb",
           "pybind11": "pybind11", "pylatexenc": "pylatexenc", "transformers": "transformers"}


def test_every_difference_from_verls_metadata_is_explained_and_the_node_pins_agree_with_it():
    pins = {p.package: p for p in controller_pins()}
    # the packages the acceptance names are judged, each against verl's own specifier
    assert {"transformers", *VERL_EXTRA_PACKAGES} <= set(pins)
    assert pins["transformers"].required == "!=5.6.0,<5.11,>=5.5.3"
    for p in pins.values():
        assert p.ok or p.reason, p
        if p.pinned and p.required:  # the nodes' release is inside verl's own range
            from packaging.specifiers import SpecifierSet

            assert SpecifierSet(p.required).contains(p.pinned, prereleases=True), p
    row = next(r for r in load_matrix().engines if r.id == f"verl-{VERL.version}")
    assert pins["megatron-core"].pinned == row.companions["megatron-core"]
    for p in pins.values():  # what the launch log says of each
        if p.note:
            line = p.describe()
            assert line.startswith(f"controller: {p.package} ") and "safe here: " in line


def test_a_difference_nobody_explained_is_refused_naming_package_version_and_requirement():
    have = {p.package: p.installed for p in controller_pins()}
    with pytest.raises(MatrixError) as exc:
        controller_pins(installed={**have, "tensordict": "0.9.0"})
    assert "tensordict 0.9.0, verl requires tensordict!=0.9.0,<=0.10.0,>=0.8.0" in exc.value.message
    with pytest.raises(MatrixError, match="hydra-core not installed, verl requires hydra-core"):
        controller_pins(installed={**have, "hydra-core": None})


_CONTROLLER_PATH = """
import json, sys
from ascend_ready.training import memory_plan as mp, verl_overrides as vo
from ascend_ready.training.config import load_config
for name, algo, extra in (("grpo-qwen3-235b-a22b-a2", "grpo", []), ("tiny", "ppo", ["launch.device=npu",
                          "precision=bf16", "distributed.strategy=megatron"]), ("ppo-qwen3-lora", "ppo", [])):
    cfg = load_config(name, extra)
    plan, _, _ = mp.plan_for_config(cfg, algo, engine="verl")
    raw = vo.to_overrides(cfg, algo, plan=plan, train_file="/d/t.parquet", val_file="/d/v.parquet",
                          output_dir="/r")
    vo.verl_validate(vo.compose(raw), cfg)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.slow  # composes and validates three configs in a fresh interpreter: about a minute here
def test_the_controllers_verl_path_imports_only_what_the_table_says():
    proc = subprocess.run([sys.executable, "-c", _CONTROLLER_PATH], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    for package, reason in CONTROLLER_ONLY.items():
        module = MODULES[package]
        imported = any(m == module or m.startswith(module + ".") for m in loaded)
        assert imported == (not reason.startswith("not imported")), (package, reason)
