"""`--engine verl`'s data side: our prompts as the parquet rows verl's RLHFDataset reads, and the reward
hook verl's workers call on them (`reward.custom_reward_function.path=pkg://ascend_ready.training.verl_data`).

verl's driver and Ray workers import this module on the nodes, from the ascend-ready package installed
there: it needs only the package itself (pandas only to write the files, on the controller).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascend_ready.errors import MissingExtraError

#: how verl loads compute_score on every node: the installed package's module, never a file of a checkout
REWARD_MODULE = "pkg://ascend_ready.training.verl_data"
REWARD_FUNCTION = "compute_score"
VERL_EXTRA_HINT = "pip install 'ascend-ready[verl]' && pip install --no-deps verl==0.9.1"


def verl_rows(rows: list[dict], data_source: str, split: str, cfg: Any) -> list[dict]:
    """Our {"prompt", "answer"} rows as verl reads them: chat prompt, data_source, ground truth."""
    rewards = {"functions": list(cfg.reward.functions),
               "weights": list(cfg.reward.weights or [1.0] * len(cfg.reward.functions))}
    return [{"data_source": data_source,
             "prompt": [{"role": "user", "content": row["prompt"]}],
             "ability": "math",
             "reward_model": {"style": "rule", "ground_truth": str(row["answer"])},
             "extra_info": {"split": split, "index": i, "rewards": rewards}}
            for i, row in enumerate(rows)]


def write_parquet(cfg: Any, out_dir: Path) -> tuple[Path, Path]:
    """train.parquet and val.parquet of the configured prompts under out_dir/verl-data."""
    try:
        import pandas as pd  # the [verl] extra
    except ImportError:
        raise MissingExtraError("writing verl's parquet files needs pandas and pyarrow", hint=VERL_EXTRA_HINT
                                ) from None
    from ascend_ready.training.data import load_prompts

    prompts = load_prompts(cfg.data, cfg.seed)
    data_dir = out_dir / "verl-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, rows in (("train", prompts.train), ("val", prompts.eval or prompts.train[:1])):
        path = data_dir / f"{split}.parquet"
        pd.DataFrame(verl_rows(rows, cfg.data.source, split, cfg)).to_parquet(path)
        paths.append(path)
    return paths[0], paths[1]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                  **kwargs) -> float:
    """verl's custom reward hook (reward.custom_reward_function): our reward functions, weighted."""
    from ascend_ready.training import rewards as rw

    spec = (extra_info or {}).get("rewards") or {"functions": ["answer_match"], "weights": [1.0]}
    total = 0.0
    for name, weight in zip(spec["functions"], spec["weights"], strict=True):
        fn = {"answer_match": rw.answer_match, "format": rw.format_reward}.get(name) or rw.import_reward(name)
        total += weight * fn(prompts=[""], completions=[solution_str], answer=[ground_truth])[0]
    return total
