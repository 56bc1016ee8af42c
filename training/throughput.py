"""Training throughput a user can trust: tokens/s per device, model FLOPs utilisation (MFU) and the run
against published figures (training/throughput_expected.yml), with the slowest phase.

Model FLOPs per trained token are PaLM's (Chowdhery et al. 2022, appendix B): 6N + 12·L·H·Q·T, N the
parameters, L layers, H·Q the hidden size, T the sequence length (forward and backward, no recomputation),
the form Megatron-LM's `num_floating_point_operations` reduces to for a dense model. MFU = tokens/s per
device x FLOPs per token / the device's dense BF16 peak (checks/profiles/sku_perf.yml, from the chip name
the device reports). For RL the tokens are those trained on (prompt + response): generation and scoring do
work MFU does not count, so an RL run's MFU is low by design, and the slowest phase says where time goes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ascend_ready.checks.perf_sku import sku_for_chip

__all__ = [
    "EXPECTED_FILE",
    "ModelShape",
    "Run",
    "expected_row",
    "mfu",
    "report_lines",
    "slowest_phase",
    "train_flops_per_token",
]

EXPECTED_FILE = Path(__file__).resolve().parent / "throughput_expected.yml"

#: metric keys each phase's time is logged under (verl's timing_s/*, our PPO loop's perf/*_s)
PHASES: dict[str, tuple[str, ...]] = {
    "generation": ("timing_s/gen", "timing_s/generate_sequences", "perf/generation_s"),
    "scoring": ("timing_s/reward", "timing_s/old_log_prob", "timing_s/ref", "timing_s/values",
                "perf/scoring_s"),
    "update": ("timing_s/update_actor", "timing_s/update_critic", "perf/update_s"),
}


@dataclass(frozen=True)
class ModelShape:
    n_params: int
    n_layers: int
    hidden: int

    @classmethod
    def of(cls, model) -> ModelShape:
        """From a transformers model: its parameter count and config (num_hidden_layers, hidden_size)."""
        cfg = model.config
        n_params = sum(p.numel() for p in model.parameters())
        return cls(n_params, int(cfg.num_hidden_layers), int(cfg.hidden_size))


def train_flops_per_token(shape: ModelShape, seq_len: int) -> float:
    """PaLM's model FLOPs per trained token: 6N + 12·L·d·T."""
    return 6.0 * shape.n_params + 12.0 * shape.n_layers * shape.hidden * seq_len


def mfu(tokens_per_s_per_device: float, flops_per_token: float, peak_tflops: float) -> float:
    """Fraction of the device's peak the model FLOPs use."""
    return tokens_per_s_per_device * flops_per_token / (peak_tflops * 1e12)


@dataclass(frozen=True)
class Run:
    """What a finished run measured and ran on."""

    algorithm: str
    devices: int
    device_type: str  # npu, cuda, cpu
    chip_name: str | None  # what the device reports (torch_npu's get_device_name), None on CPU
    shape: ModelShape
    prompt_len: int
    response_len: int
    tokens_per_s: float  # across all devices

    @property
    def per_device(self) -> float:
        return self.tokens_per_s / max(1, self.devices)


@lru_cache(maxsize=2)
def _rows(path: Path = EXPECTED_FILE) -> list[dict]:
    data = yaml.safe_load(Path(path).read_text())
    return list(data["rows"])


def _family(sku_id: str) -> str:
    return "A3" if sku_id == "910_93" else "A2" if sku_id.startswith("910B") else sku_id


def expected_row(run: Run) -> tuple[dict | None, str]:
    """(the published row this run compares with, or None; why none where there is none)."""
    if run.device_type == "cpu" or not run.chip_name:
        return None, "no expected figure for a CPU run: the table holds NPU runs only"
    found = sku_for_chip(run.chip_name)
    if found is None:
        return None, f"no expected figure: {run.chip_name!r} is not in checks/profiles/sku_perf.yml"
    family = _family(found[0])
    params_b = run.shape.n_params / 1e9
    for row in _rows():
        if (row["algorithm"] == run.algorithm and row["sku_family"] == family
                and abs(params_b - row["params_b"]) <= 0.15 * row["params_b"]
                and abs(run.prompt_len - row["prompt_len"]) <= 0.25 * row["prompt_len"]
                and abs(run.response_len - row["response_len"]) <= 0.25 * row["response_len"]
                and row["devices"] in (None, run.devices)):
            return row, ""
    return None, (f"no expected figure for {params_b:.3g}B {run.algorithm} on {family} with "
                  f"{run.prompt_len}+{run.response_len} tokens (training/throughput_expected.yml)")


def slowest_phase(metrics: dict[str, float]) -> tuple[str, float] | None:
    """(phase, seconds) of the phase that took longest, from the phase timings the trainer logged."""
    totals = {phase: sum(float(metrics[k]) for k in keys if isinstance(metrics.get(k), (int, float)))
              for phase, keys in PHASES.items()}
    totals = {p: s for p, s in totals.items() if s > 0}
    if not totals:
        return None
    phase = max(totals, key=totals.__getitem__)
    return phase, totals[phase]


def report_lines(run: Run, phase_metrics: dict[str, float] | None = None) -> list[str]:
    """What a run prints at its end: tokens/s per device, MFU, x of expected, the slowest phase."""
    seq = run.prompt_len + run.response_len
    fpt = train_flops_per_token(run.shape, seq)
    lines = [f"throughput: {run.per_device:.4g} tokens/s per device ({run.tokens_per_s:.4g} on {run.devices} "
             f"{run.device_type} device(s)); model FLOPs {fpt:.4g} per token (6N + 12·L·d·T, T={seq})"]
    found = sku_for_chip(run.chip_name) if run.chip_name else None
    if found is not None:
        sku_id, sku = found
        peak = sku.peak_tflops_bf16 or sku.peak_tflops_fp16
        u = mfu(run.per_device, fpt, peak)
        lines.append(f"MFU: {100 * u:.3g} % of {sku_id}'s {peak:g} TFLOPS dense peak (sku_perf.yml)")
    else:
        why = "a CPU run" if run.device_type == "cpu" else f"{run.chip_name!r} not in sku_perf.yml"
        lines.append(f"MFU: not computed (no peak for this device: {why})")
    row, why = expected_row(run)
    if row is None:
        lines.append(why)
    else:
        ratio = run.per_device / row["tokens_per_s_per_device"]
        lines.append(f"{ratio:.2f} x of expected: {row['tokens_per_s_per_device']:g} tokens/s per device for "
                     f"{row['model']} {row['algorithm']} {row['prompt_len']}+{row['response_len']} on "
                     f"{row['sku_family']} ({row['source']})")
    slow = slowest_phase(phase_metrics or {})
    lines.append(f"slowest phase: {slow[0]} ({slow[1]:.3g} s)" if slow else
                 "slowest phase: not known (the trainer logged no generation/scoring/update timings)")
    return lines



def chip_name(device_type: str) -> str | None:
    """What the device calls itself (`Ascend910B3`; torch_npu's get_device_name), None on CPU or unknown."""
    if device_type == "cpu":
        return None
    try:
        import torch  # heavy optional dependency (train extra): only where a device runs

        module = getattr(torch, device_type)
        return str(module.get_device_name(0))
    except Exception:
        return None


class Tracker:
    """Per-step throughput metrics (perf/tokens_per_s_per_device, perf/mfu) and the end-of-run report."""

    def __init__(self, algorithm: str, device_type: str, world_size: int, prompt_len: int, response_len: int):
        self.algorithm, self.device_type, self.world_size = algorithm, device_type, max(1, world_size)
        self.prompt_len, self.response_len = prompt_len, response_len
        self.chip = chip_name(device_type)
        found = sku_for_chip(self.chip) if self.chip else None
        self.peak = (found[1].peak_tflops_bf16 or found[1].peak_tflops_fp16) if found else None
        self.shape: ModelShape | None = None
        self.rates: list[float] = []
        self.phases: dict[str, float] = {}

    def step(self, metrics: dict[str, float], model=None) -> dict[str, float]:
        """Metrics to add to a step's record (the total tokens/s is in metrics['perf/tokens_per_s'])."""
        if self.shape is None and model is not None:
            with contextlib.suppress(AttributeError):  # no transformers config: tokens/s only
                self.shape = ModelShape.of(getattr(model, "module", model))
        for keys in PHASES.values():
            for k in keys:
                if isinstance(metrics.get(k), (int, float)):
                    self.phases[k] = self.phases.get(k, 0.0) + float(metrics[k])
        total = metrics.get("perf/tokens_per_s")
        if not isinstance(total, (int, float)):
            return {}
        self.rates.append(float(total))
        out = {"perf/tokens_per_s_per_device": total / self.world_size}
        if self.shape is not None and self.peak is not None:
            fpt = train_flops_per_token(self.shape, self.prompt_len + self.response_len)
            out["perf/mfu"] = mfu(total / self.world_size, fpt, self.peak)
        return out

    def report(self) -> list[str]:
        """The end-of-run lines (empty where no step logged a rate)."""
        if not self.rates or self.shape is None:
            return []
        rate = sorted(self.rates)[len(self.rates) // 2]  # the median step: warm-up steps do not drag it
        run = Run(self.algorithm, self.world_size, self.device_type, self.chip, self.shape, self.prompt_len,
                  self.response_len, rate)
        return report_lines(run, self.phases)
