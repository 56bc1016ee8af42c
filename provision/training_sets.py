"""One training dependency set per torch line of the matrix (provision/training_sets.yml): the versions of
transformers, TRL, accelerate, peft, datasets and deepspeed that declare support for that torch and the
stack's training Python, as a real resolver found them from those packages' own metadata.

`ascend-matrix resolve` names a stack's set (or says why it has none), `ascend-matrix packages` lists its
wheels, python_env installs it into the node's training venv, and `versions.training_env` judges a venv
against it. The file is written by `python -m ascend_ready.sim.harness.training_sets` (docs/packages.md).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field, ValidationError

from ascend_ready.errors import MatrixError
from ascend_ready.provision.matrix import MatrixModel
from ascend_ready.provision.versions import version_key

DATA_FILE = Path(__file__).with_name("training_sets.yml")
#: The index the sets were resolved against (the packages' own metadata, as published).
INDEX = "https://pypi.org/simple"
#: The packages of a set, in the order the resolver is given them (uv prefers the newest of the earlier
#: ones when two conflict): transformers with its `torch` extra, whose Requires-Dist carries its torch floor.
PACKAGES = ("transformers", "trl", "accelerate", "peft", "datasets", "deepspeed")
RESOLVE_INPUT = ("transformers[torch]", "trl", "accelerate", "peft", "datasets", "deepspeed")
#: deepspeed is in every set but installed only where ZeRO is used (the `deepspeed` extra): it builds ops
#: for the local accelerator.
OPTIONAL = ("deepspeed",)
#: ascend-ready's own floor (pyproject.toml requires-python).
PYTHON_FLOOR = "3.10"


class TrainingSet(MatrixModel):
    """The set of one torch line, or (`none`) the resolver's reason there is none."""

    torch: str
    python: str = Field(description="the Python it was resolved for (the stack's newest 3.10+)")
    platform: str = Field(description="uv's --python-platform: arch and the stack's manylinux floor")
    packages: dict[str, str] | None = Field(None, description="{name: version} of PACKAGES")
    limits: dict[str, str] | None = Field(
        None, description="per package, the resolver's reason a newer release does not fit (the source)")
    none: str | None = Field(None, description="why no set exists (the resolver's own words)")

    def requirements(self, optional: bool = False) -> list[str]:
        """`name==version` of each package (deepspeed only with `optional`)."""
        return [f"{n}=={v}" for n, v in (self.packages or {}).items() if optional or n not in OPTIONAL]


class TrainingSets(MatrixModel):
    schema_version: int
    resolver: str
    exclude_newer: str = Field(description="the resolver saw only releases uploaded before this instant")
    sources: dict[str, str]
    sets: list[TrainingSet]


@lru_cache(maxsize=4)
def load_training_sets(path: str | None = None) -> TrainingSets:
    p = Path(path) if path else DATA_FILE
    try:
        data = yaml.safe_load(p.read_text())
        return TrainingSets.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise MatrixError(f"{p}: cannot read the training sets: {exc}",
                          hint="restore it from the checkout") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise MatrixError(f"{p}: {where}: {first['msg']}", hint="fix the file (docs/packages.md)") from None


def set_for(torch: str, path: str | None = None) -> TrainingSet | None:
    """The set of torch line `torch` (a local version suffix ignored), None when the file has no row."""
    base = torch.split("+", 1)[0]
    return next((s for s in load_training_sets(path).sets if s.torch == base), None)


def training_python(pythons: list[str]) -> str:
    """The Python a training set is resolved for: the newest of `pythons` from PYTHON_FLOOR up (3.11 where
    it is there: the standalone CPython the matrix ships), else the newest."""
    fit = [v for v in pythons if version_key(v) >= version_key(PYTHON_FLOOR)]
    if "3.11" in fit:
        return "3.11"
    return max(fit or pythons, key=version_key)


def platform(arch: str, manylinux: str) -> str:
    """uv's --python-platform for an arch and a manylinux floor (manylinux2014 = manylinux_2_17)."""
    floor = "2_17" if manylinux == "manylinux2014" else manylinux.removeprefix("manylinux_")
    return f"{arch}-manylinux_{floor}"
