"""Run observability: namespaced metrics to the console, JSONL and TensorBoard; the end-of-run plot.

Only the main rank writes; the others get a logger that does nothing.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ascend_ready.errors import ConfigError

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "metrics.png"
TB_DIR = "tensorboard"
# Console shows these first, in this order; the files get everything.
CONSOLE_KEYS = (
    "reward/mean",
    "eval/accuracy",
    "eval/pairwise_accuracy",
    "kl",
    "loss/policy",
    "loss/value",
    "loss/total",
    "perf/tokens_per_s",
    "perf/step_time_s",
)


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


class MetricsLogger:
    """Append-only metrics stream; on resume, records after the resumed step are dropped first."""

    def __init__(
        self,
        output_dir: Path,
        enabled: bool = True,
        resume_step: int | None = None,
        max_steps: int | None = None,
    ):
        self.enabled = enabled
        self.path = Path(output_dir) / METRICS_FILE
        self.max_steps = max_steps
        self._tb = None
        if not enabled:
            return
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.is_file():
            kept = [
                ln
                for ln in self.path.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= resume_step
            ]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(Path(output_dir) / TB_DIR), purge_step=resume_step, flush_secs=10)
        except ImportError:  # tensorboard is in the train extra, but a JSONL record is still worth having
            print("warning: tensorboard is not installed; metrics go to JSONL only", file=sys.stderr)

    def log(self, step: int, metrics: dict[str, float], console: bool = True) -> None:
        if not self.enabled:
            return
        clean = {k: (float(v) if finite(v) else None) for k, v in metrics.items() if v is not None}
        record = {"step": step, "time": round(time.time(), 3), **clean}
        with self.path.open("a") as fh:
            fh.write(json.dumps(record) + "\n")
        if self._tb is not None:
            self._write_tensorboard(step, clean)
        if console:
            shown = [k for k in CONSOLE_KEYS if clean.get(k) is not None]
            total = f"/{self.max_steps}" if self.max_steps else ""
            print(f"step {step}{total}  " + "  ".join(f"{k} {clean[k]:.4g}" for k in shown), file=sys.stderr)

    def _write_tensorboard(self, step: int, values: dict[str, float | None]) -> None:
        """All of a step's scalars as one event (add_scalar per key costs ~40 us each, a visible share of a
        tiny step); the writer's own thread flushes, so a killed run loses at most its flush interval."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        tags = [Summary.Value(tag=k, simple_value=v) for k, v in values.items() if v is not None]
        summary = Summary(value=tags)
        # _get_file_writer() is what SummaryWriter.add_scalar itself calls; events stay standard scalars.
        self._tb._get_file_writer().add_summary(summary, step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl; ConfigError naming the file, or the line, that cannot be read."""
    return read_jsonl(path, hint="give the output dir of an ascend-train run (it holds metrics.jsonl, one "
                      "JSON record a line)", what="a metrics record (no integer 'step')",
                      valid=lambda r: isinstance(r, dict) and isinstance(r.get("step"), int))


def read_jsonl(path: Path, *, hint: str, what: str, valid: Callable[[object], bool]) -> list[dict]:
    """The records of a file of one JSON record a line that each pass `valid`; ConfigError naming the file,
    or the line (as not `what`), that cannot be read."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not text (byte {exc.start} is not UTF-8)", hint=hint) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", hint=hint) from None
    records = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{no}: not a JSON record ({exc.msg}): {line[:80]!r}",
                              hint=hint) from None
        if not valid(record):
            raise ConfigError(f"{path}:{no}: not {what}: {line[:80]!r}", hint=hint)
        records.append(record)
    return records


def plot_metrics(metrics_path: Path, png_path: Path) -> Path | None:
    """Reward, KL, losses and held-out accuracy against step, one panel each; None if nothing to plot."""
    records = read_metrics(metrics_path)  # before matplotlib's import: a bad file is refused at once
    import matplotlib

    matplotlib.use("Agg")  # headless nodes have no display
    import matplotlib.pyplot as plt

    panels = [
        ("reward/mean", "reward"),
        ("kl", "KL to reference"),
        ("loss/policy", "policy loss"),
        ("loss/value", "value loss"),
        ("loss/total", "loss"),
        ("eval/accuracy", "held-out accuracy"),
    ]
    series = {}
    for key, title in panels:
        pts = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if pts:
            series[key] = (title, pts)
    if not series:
        return None
    fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.2 * len(series)), sharex=True, squeeze=False)
    for ax, (_key, (title, pts)) in zip(axes[:, 0], series.items(), strict=True):
        xs, ys = zip(*pts, strict=True)
        ax.plot(xs, ys, marker="." if len(xs) < 50 else None)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return Path(png_path)
