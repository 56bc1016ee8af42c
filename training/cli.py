"""`ascend-train`: gate on the preflight, launch workers, and run GRPO, PPO, SFT or reward-model training.

Exit codes: 0 done; 1 training stopped (failed preflight, NaN, OOM); 2 bad config or usage;
others come from torchrun.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import click

from ascend_ready.errors import AscendReadyError, ConfigError
from ascend_ready.training import launch as launch_mod
from ascend_ready.training.config import TrainConfig, dump_config, load_config
from ascend_ready.training.metrics import METRICS_FILE, PLOT_FILE, TB_DIR
from ascend_ready.training.preflight import gate

ALGOS = ("grpo", "ppo", "sft", "rm")
RESOLVED_CONFIG = "config.yaml"


def _fail(exc: AscendReadyError) -> None:
    click.echo(f"error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"hint: {exc.hint}", err=True)
    sys.exit(exc.exit_code)


def _quiet_libraries() -> None:
    """Progress bars and deprecation chatter from transformers/TRL would bury our per-step lines."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is fetched at run time, ever
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*")
    try:
        import transformers

        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:
        pass


def _apply_flags(cfg: TrainConfig, opts: dict) -> TrainConfig:
    la, pf = cfg.launch, cfg.preflight
    for key in ("nnodes", "nproc_per_node", "node_rank", "master_addr", "master_port", "device"):
        if opts.get(key) is not None:
            setattr(la, key, opts[key])
    if opts.get("hosts"):
        pf.hosts = [h for h in opts["hosts"].split(",") if h]
    if opts.get("inventory"):
        pf.inventory = opts["inventory"]
    if opts.get("preflight_command"):
        pf.command = opts["preflight_command"]
    return cfg


def run_algorithm(algo: str, cfg: TrainConfig, output_dir: Path, resume: bool) -> dict:
    """Set up this process's device and process group, then train. Used by workers and single-process runs."""
    from importlib import import_module

    from ascend_ready.training.devices import setup_runtime, shutdown

    rt = setup_runtime(cfg.launch.device, cfg.precision)
    if rt.device_type == "cpu" and cfg.model.tiny is not None and "OMP_NUM_THREADS" not in os.environ:
        import torch

        # A tiny model gains nothing from intra-op threads and runs 40x slower when a core is busy elsewhere.
        torch.set_num_threads(1)
    try:
        return import_module(f"ascend_ready.training.{algo}").train(cfg, rt, output_dir, resume=resume)
    finally:
        shutdown(rt)


def _launch(
    algo: str,
    config: str,
    output_dir: str | None,
    resume: bool,
    skip_preflight: bool,
    overrides: tuple[str, ...],
    **opts,
) -> None:
    cfg = _apply_flags(load_config(config, overrides), opts)
    out = Path(output_dir or f"runs/{algo}")
    worker = os.environ.get(launch_mod.WORKER_ENV) == "1" or "RANK" in os.environ
    if not worker:
        pf = cfg.preflight
        gate(pf.command, pf.hosts, pf.inventory, pf.timeout_s, skip_preflight)
        out.mkdir(parents=True, exist_ok=True)
        (out / RESOLVED_CONFIG).write_text(dump_config(cfg))
        env = launch_mod.hccl_env(cfg.launch)
        click.echo("environment: " + " ".join(f"{k}={v}" for k, v in env.items()), err=True)
        note = launch_mod.check_visible_devices(cfg.launch.nproc_per_node, cfg.launch.device)
        if note:
            click.echo(note, err=True)
        os.environ.update(env)
        if cfg.launch.nnodes * cfg.launch.nproc_per_node > 1:
            argv = [algo, "--config", str(out / RESOLVED_CONFIG), "--output-dir", str(out)]
            cmd = launch_mod.torchrun_command(cfg.launch, argv + (["--resume"] if resume else []))
            click.echo("launch: " + " ".join(cmd), err=True)
            rc = subprocess.call(cmd, env={**os.environ, launch_mod.WORKER_ENV: "1"})
            if rc == 0:
                _report(out, {"output_dir": str(out)})
            sys.exit(rc)
    _quiet_libraries()
    summary = run_algorithm(algo, cfg, out, resume)
    if int(os.environ.get("RANK", "0")) == 0 and launch_mod.WORKER_ENV not in os.environ:
        _report(out, summary)


def _report(out: Path, summary: dict) -> None:
    """Where the results are: for people on stderr, one JSON line on stdout for scripts."""
    metrics, plot = out / METRICS_FILE, out / PLOT_FILE
    click.echo(
        f"metrics:     {metrics}\nplot:        {plot}\ntensorboard: tensorboard --logdir {out / TB_DIR}",
        err=True,
    )
    click.echo(
        json.dumps({**summary, "metrics": str(metrics), "plot": str(plot) if plot.is_file() else None})
    )


def _algo_command(algo: str, help_text: str):
    @click.command(algo, help=help_text, context_settings={"show_default": True})
    @click.option("--config", "-c", required=True, help="YAML file, or a bundled config name (e.g. tiny).")
    @click.option(
        "--output-dir",
        "-o",
        help="Checkpoints, metrics.jsonl, tensorboard/ and metrics.png go here [default: runs/<algo>].",
    )
    @click.option(
        "--resume", is_flag=True, help="Continue from the newest committed checkpoint in the output dir."
    )
    @click.option(
        "--hosts", help="Comma-separated nodes for the preflight (default: config, else this node)."
    )
    @click.option("-i", "--inventory", help="Ansible inventory for the preflight.")
    @click.option("--preflight-command", help="ascend-check executable [default: next to this Python].")
    @click.option(
        "--skip-preflight", is_flag=True, help="Start without validating the nodes (logged loudly)."
    )
    @click.option("--nnodes", type=int, help="Nodes in the job.")
    @click.option(
        "--nproc-per-node", type=int, help="Processes (devices) per node; >1 in total starts torchrun."
    )
    @click.option("--node-rank", type=int, help="This node's rank.")
    @click.option("--master-addr", help="Address of node 0.")
    @click.option("--master-port", type=int, help="Rendezvous port on node 0.")
    @click.option("--device", type=click.Choice(["auto", "npu", "cuda", "cpu"]), help="Force a device kind.")
    @click.argument("overrides", nargs=-1)
    def command(**kw):
        try:
            _launch(algo, **kw)
        except AscendReadyError as exc:
            _fail(exc)

    return command


@click.group(
    epilog="Exit codes: 0 done; 1 training refused or stopped (failed preflight, NaN/inf loss, out of "
    "memory); "
    "2 bad config or usage; anything else comes from torchrun or a crashed worker.",
    help="Train with GRPO, PPO, SFT or a reward model, after a passing ascend-check preflight.\n\n"
    "OVERRIDES are key=value pairs over the config, e.g. max_steps=20 grpo.beta=0.01.",
)
def main() -> None:
    pass


main.add_command(_algo_command("grpo", "GRPO (TRL GRPOTrainer) with rule-based or model rewards."))
main.add_command(_algo_command("ppo", "PPO with a critic, KL-penalised rewards and GAE."))
main.add_command(_algo_command("sft", "Supervised fine-tuning on prompt/completion pairs (TRL SFTTrainer)."))
main.add_command(_algo_command("rm", "Reward-model training on chosen/rejected pairs (TRL RewardTrainer)."))


@main.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of the training config (every field with its description)."""
    click.echo(json.dumps(TrainConfig.model_json_schema(), indent=1))


@main.command("tiny-model")
@click.argument("directory")
@click.option("--architecture", type=click.Choice(["qwen2", "qwen3"]), default="qwen3", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def tiny_model_cmd(directory: str, architecture: str, seed: int) -> None:
    """Write a tiny random Qwen model and its character tokenizer to DIRECTORY."""
    try:
        _quiet_libraries()
        from ascend_ready.training.config import TinyModelConfig
        from ascend_ready.training.models import build_tiny_model

        click.echo(build_tiny_model(directory, TinyModelConfig(architecture=architecture), seed=seed))
    except AscendReadyError as exc:
        _fail(exc)


@main.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
def plot_cmd(run_dir: str) -> None:
    """Redraw RUN_DIR/metrics.png from RUN_DIR/metrics.jsonl."""
    from ascend_ready.training.metrics import METRICS_FILE, PLOT_FILE, plot_metrics

    png = plot_metrics(Path(run_dir) / METRICS_FILE, Path(run_dir) / PLOT_FILE)
    if png is None:
        _fail(ConfigError(f"{run_dir}/{METRICS_FILE} has nothing to plot"))
    click.echo(png)


if __name__ == "__main__":
    main()
