"""`ascend-train`: gate on the preflight, launch workers, and run GRPO, PPO, SFT or reward-model training.

Exit codes: 0 done; 1 training stopped (failed preflight, NaN, OOM); 2 bad config or usage;
3 a node could not be reached over SSH (multi-node launch); others come from torchrun.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import click

from ascend_ready.cli_guard import GuardedGroup, debug_option
from ascend_ready.errors import ConfigError
from ascend_ready.runtime import detect_device
from ascend_ready.training import launch as launch_mod
from ascend_ready.training import sniff
from ascend_ready.training.config import TrainConfig, dump_config, load_config
from ascend_ready.training.metrics import METRICS_FILE, PLOT_FILE, TB_DIR
from ascend_ready.training.preflight import gate, slurm_step_of_judged_job

ALGOS = ("grpo", "ppo", "sft", "rm")
RESOLVED_CONFIG = "config.yaml"


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
    if opts.get("hosts") is not None:  # --hosts '' is refused (parse_hosts), never "this node"
        from ascend_ready.fleet.inventory import parse_hosts

        parse_hosts(opts["hosts"])
        pf.hosts = [h for h in opts["hosts"].split(",") if h]
    if opts.get("inventory"):
        pf.inventory = opts["inventory"]
    if opts.get("preflight_command"):
        pf.command = opts["preflight_command"]
    return cfg


def run_algorithm(algo: str, cfg: TrainConfig, output_dir: Path, resume: bool) -> dict:
    """Set up this process's device and process group, then train. Used by workers and single-process runs."""
    from importlib import import_module

    from ascend_ready.runtime import barrier, setup_runtime, shutdown
    from ascend_ready.training.worker_hooks import digest_callback, ensure_node_model, profiled

    if "RANK" in os.environ:
        ensure_node_model(cfg, output_dir)  # before the ranks wait for rank 0's copy, which may be elsewhere
    rt = setup_runtime(cfg.launch.device, cfg.precision)
    if rt.device_type == "cpu" and cfg.model.tiny is not None and "OMP_NUM_THREADS" not in os.environ:
        import torch

        # A tiny model gains nothing from intra-op threads and runs 40x slower when a core is busy elsewhere.
        torch.set_num_threads(1)
    try:
        # GRPO takes extra callbacks: across ranks, each prints its final weights' digest (they must agree)
        extra = {"extra_callbacks": [digest_callback(rt.rank)]} if algo == "grpo" and rt.distributed else {}
        with profiled(algo, cfg, rt.device_type, rt.rank):
            summary = import_module(f"ascend_ready.training.{algo}").train(cfg, rt, output_dir,
                                                                           resume=resume, **extra)
    except BaseException:
        shutdown(rt)
        raise
    # Every rank reaches the end before any closes its connections: a gloo rank whose peer closed its
    # sockets first aborts in gloo's own thread ("terminate called after throwing an instance of
    # 'gloo::IoException' ... Connection closed by peer", SIGABRT; horovod/horovod#1364), which failed
    # a finished run. On failure there is no such wait: the peer may be gone.
    barrier(rt)
    shutdown(rt)
    return summary


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
    if opts.get("strategy"):
        if (opts.get("engine") or "trl") != "verl":
            raise ConfigError("--strategy chooses verl's training strategy", hint="add --engine verl")
        cfg.distributed.strategy = opts["strategy"]
    worker = os.environ.get(launch_mod.WORKER_ENV) == "1" or "RANK" in os.environ
    if not worker:  # hook (ops-launch, training/run_dir.py): -o 'DIR/{run}' is a fresh subdirectory
        from ascend_ready.training import run_dir  # start-up time: it imports the checks' resources

        output_dir, opts["node_output_dir"] = run_dir.expand(output_dir, opts.get("node_output_dir"), algo)
    out = Path(output_dir or f"runs/{algo}")
    engine = opts.get("engine") or "trl"
    pf = cfg.preflight
    across_nodes = opts.get("launch_spec") or ((pf.hosts or pf.inventory) and opts.get("node_rank") is None)
    plan = None
    if not worker:
        # The plan first: a job that cannot fit is refused whatever else is wrong (it needs no files).
        plan = _plan_gate(algo, cfg, engine)
        _check_inputs(cfg, out, here=engine == "trl" and not across_nodes)
        if resume and engine == "trl":  # before the preflight and before config.yaml is written
            from ascend_ready.training.checkpoint import check_resume
            from ascend_ready.training.trl_glue import CHECKPOINT_DIR

            step = check_resume(out / CHECKPOINT_DIR, algo, cfg.model_dump(mode="json"))
            click.echo(f"resume: from step {step} of {out / CHECKPOINT_DIR}", err=True)
        # hook (ops-launch, training/run_dir.py): a run directory that holds a run is never overwritten;
        # a Slurm job's node step is not judged again (the launcher did, before the step: another node's
        # config.yaml is this run's, not an old one)
        if not slurm_step_of_judged_job():
            run_dir.refuse_run_here(out, resume=resume)
    if engine == "verl" and not across_nodes:  # across nodes: a Ray cluster, _launch_across_nodes
        from ascend_ready.training import verl_glue

        _report(out.absolute(), verl_glue.launch(algo, cfg, out, skip_preflight=skip_preflight,
                                                 dry_run=bool(opts.get("dry_run")),
                                                 log=lambda msg: click.echo(msg, err=True),
                                                 waive=tuple(opts.get("waive") or ())))
        return
    if not worker and across_nodes:
        request = launch_request(algo, cfg, out, config=config, resume=resume, skip_preflight=skip_preflight,
                                 overrides=overrides, opts=opts, memory_plan=plan,
                                 launcher="verl-ray" if engine == "verl" else "ssh")
        _finish(out, request)
        return
    for flag in ("dry_run", "profile_steps"):
        if opts.get(flag) and not worker:
            raise ConfigError(f"--{flag.replace('_', '-')} needs the multi-node launcher",
                              hint="pass --launch-spec FILE, -i INVENTORY or --hosts")
    if not worker:
        _launch_on_this_node(algo, cfg, out, resume, skip_preflight, opts)
    _quiet_libraries()
    summary = run_algorithm(algo, cfg, out, resume)
    if int(os.environ.get("RANK", "0")) == 0 and launch_mod.WORKER_ENV not in os.environ:
        _report(out, summary)


def _launch_on_this_node(algo: str, cfg: TrainConfig, out: Path, resume: bool, skip_preflight: bool,
                         opts: dict) -> None:
    """One node: the gate, the resolved config, the HCCL environment; torchrun for several processes (this
    process exits with its status), else nothing more: the caller trains in this process."""
    pf = cfg.preflight
    gate(pf.command, pf.hosts, pf.inventory, pf.timeout_s, skip_preflight,
         log=lambda msg: click.echo(msg, err=True), waive=tuple(opts.get("waive") or ()))
    if cfg.launch.device != "auto":  # a forced device that is not there: refused before anything is written
        detect_device(cfg.launch.device)
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
        log_dir = out / "logs" / time.strftime("launch-%Y%m%d-%H%M%S")
        cmd = launch_mod.torchrun_command(cfg.launch, argv + (["--resume"] if resume else []), log_dir)
        click.echo("launch: " + " ".join(cmd), err=True)
        rc = subprocess.call(cmd, env={**os.environ, launch_mod.WORKER_ENV: "1"})
        if rc == 0:
            _report(out, {"output_dir": str(out)})
        else:
            # start-up: the diagnosis (its knowledge base) loads after a failed job only
            from ascend_ready.checks.diagnose.render import explain_failure

            click.echo(explain_failure([log_dir]), err=True, nl=False)
        sys.exit(rc)


def _launch_slurm(algo: str, config: str, output_dir: str | None, resume: bool, skip_preflight: bool,
                  overrides: tuple[str, ...], **opts) -> None:
    """--launcher slurm (training/slurm_launch.py): in this allocation, or its sbatch script."""
    if opts.get("print_sbatch") and opts.get("launcher") != "slurm":
        raise ConfigError("--print-sbatch writes a script for the Slurm launcher",
                          hint="add --launcher slurm")
    cfg = _apply_flags(load_config(config, overrides), opts)
    plan = None if opts.get("print_sbatch") else _plan_gate(algo, cfg, opts.get("engine") or "trl")
    _finish(Path(output_dir or f"runs/{algo}"), launch_request(
        algo, cfg, Path(output_dir or f"runs/{algo}"), config=config, resume=resume,
        skip_preflight=skip_preflight, overrides=overrides, opts=opts, memory_plan=plan, launcher="slurm"))


def _check_inputs(cfg: TrainConfig, out: Path, *, here: bool) -> None:
    """Every input the command line and config name, before the memory plan, the preflight or the run
    directory: the hosts or inventory, the output dir, and (`here`: trained on this node) the model,
    reward model and data files. A multi-node launch checks those paths on every node instead."""
    from ascend_ready.checks.preflight import check_host_profiles
    from ascend_ready.fleet.inventory import load_inventory, parse_hosts
    from ascend_ready.paths import check_output_dir

    pf = cfg.preflight
    if pf.inventory:
        check_host_profiles(load_inventory(pf.inventory), pf.inventory)
    elif pf.hosts:
        parse_hosts(",".join(pf.hosts))
    check_output_dir(out, "--output-dir")
    if not here:
        return
    from ascend_ready.training.data import read_jsonl
    from ascend_ready.training.models import local_dir

    if cfg.model.tiny is None:
        local_dir(cfg.model.path, "model.path")
    if cfg.model.reward_model_path:
        local_dir(cfg.model.reward_model_path, "model.reward_model_path")
    if cfg.data.source != "arithmetic" and cfg.data.path:
        try:
            read_jsonl(cfg.data.path, limit=1)
        except UnicodeDecodeError as exc:
            raise ConfigError(f"data.path: {cfg.data.path} is not UTF-8 text (byte {exc.start})",
                              hint="give a JSONL file, one JSON object per line") from None
        except OSError as exc:
            raise ConfigError(f"data.path: cannot read {cfg.data.path}: {exc.strerror or exc}",
                              hint="give a readable JSONL file") from None
        except ConfigError as exc:
            raise ConfigError(f"data.path: {exc.message}",
                              hint=exc.hint or "give a JSONL file, one JSON object per line") from None


def _plan_gate(algo: str, cfg: TrainConfig, engine: str):
    """Refuse a job whose memory plan is over the device limit, before any node is touched."""
    from ascend_ready.training.memory_plan import GIB, launch_gate

    plan = launch_gate(cfg, algo, engine=engine)
    if plan is not None:
        phase, need, limit = plan.binding
        click.echo(f"memory plan: peak {need / GIB:.1f} of {limit / GIB:.1f} GiB per device in the {phase} "
                   f"phase on {plan.layout.describe()}", err=True)
    return plan


def launch_request(algo: str, cfg: TrainConfig, out: Path, *, config: str, resume: bool, skip_preflight: bool,
                   overrides: tuple[str, ...], opts: dict, launcher: str, memory_plan=None):
    """The command line as one typed LaunchRequest (training/launcher.py), built once, here: `--launch-spec`,
    or `-i`/`--hosts` without `--node-rank` (the job on every node, from here), or `--launcher slurm`."""
    # function-level: the launch machinery (checks, fleet) is start-up cost `ascend-train --help` never pays
    from ascend_ready.fleet.transport import FanoutOptions
    from ascend_ready.training import launcher as seam
    from ascend_ready.training import multinode

    pf = cfg.preflight
    waive = tuple(opts.get("waive") or ())
    fanout = FanoutOptions(known_hosts_file=opts.get("known_hosts"), ssh_config_file=opts.get("ssh_config"),
                           connect_timeout_s=opts.get("connect_timeout") or 10.0)
    options = multinode.LaunchOptions(
        launch_spec=opts.get("launch_spec"), inventory=pf.inventory, hosts=list(pf.hosts),
        skip_preflight=skip_preflight, waive=waive,
        dry_run=bool(opts.get("dry_run")), python=opts.get("python"),
        set_env=opts.get("set_env") or multinode.DEFAULT_SET_ENV, numa_bind=not opts.get("no_numa_bind"),
        # the Slurm launcher never read --profile-steps: it is judged where it is used
        profile_steps=(None if launcher == "slurm"
                       else multinode.parse_profile_steps(opts.get("profile_steps"))),
        master_addr=opts.get("master_addr"), master_port=opts.get("master_port"),
        node_output_dir=opts.get("node_output_dir"),
        nproc_per_node=opts.get("nproc_per_node"), nnodes=opts.get("nnodes"), fanout=fanout,
        preflight_command=pf.command, preflight_timeout_s=pf.timeout_s,
        log=lambda msg: click.echo(msg, err=True),
    )
    return seam.LaunchRequest(
        launcher=launcher,
        job=seam.TrainJob(algo, cfg, config, out, resume, tuple(overrides), opts.get("engine") or "trl"),
        gate=seam.GateVerdict(memory_plan, skip_preflight, waive),
        options=options,
        slurm=seam.SlurmOptions(opts.get("print_sbatch"), opts.get("sbatch_time"), opts.get("sbatch_gres"),
                                opts.get("sbatch_partition"), opts.get("device"),
                                opts.get("preflight_command")),
        join_timeout_s=opts.get("join_timeout") or 120.0,
    )


def _finish(out: Path, request) -> None:
    """Start `request` with its launcher; report the summary, or end with the launcher's exit status."""
    from ascend_ready.training import launcher as seam

    result = seam.launch(request)
    if result.dry_run:
        sys.exit(0)
    if result.summary is None:
        sys.exit(result.exit_code)
    _report(out.absolute(), result.summary)


def _report(out: Path, summary: dict) -> None:
    """Where the results are: for people on stderr, one JSON line on stdout for scripts (with the sniffs'
    account, the ranks they named and their hosts, where the run sniffed: --sniff-every)."""
    metrics, plot = out / METRICS_FILE, out / PLOT_FILE
    sniffed = sniff.summarize(out / sniff.SNIFF_FILE)
    for line in sniff.summary_lines(sniffed) if sniffed else ():
        click.echo(line, err=True)
    click.echo(
        f"metrics:     {metrics}\nplot:        {plot}\ntensorboard: tensorboard --logdir {out / TB_DIR}",
        err=True,
    )
    extra = {"sniff": sniffed} if sniffed else {}
    shown = str(plot) if plot.is_file() else None
    click.echo(json.dumps({**summary, "metrics": str(metrics), "plot": shown, **extra}))


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
        "--hosts",
        help="Comma-separated nodes: preflight them, then train on all of them over SSH (with --node-rank: "
        "the preflight only, and this node trains) [default: config, else this node].",
    )
    @click.option("-i", "--inventory", help="Ansible inventory: its hosts, as for --hosts.")
    @click.option("--preflight-command", help="ascend-check executable [default: next to this Python].")
    @click.option(
        "--skip-preflight", is_flag=True, help="Start without validating the nodes (logged loudly)."
    )
    @click.option(
        "--waive", multiple=True, metavar="CHECK",
        help="Start although the preflight or launch spec did not judge CHECK, one the profile requires for "
        "training (repeatable; printed at the launch). --skip-preflight bypasses the whole gate.",
    )
    @click.option("--nodes", "--nnodes", "nnodes", type=click.IntRange(min=1),
                  help="Nodes in the job (--nnodes: the same, torchrun's spelling).")
    @click.option(
        "--nproc-per-node", type=click.IntRange(min=1),
        help="Processes (devices) per node; >1 in total starts torchrun.",
    )
    @click.option("--node-rank", type=click.IntRange(min=0), help="This node's rank (0 is the master).")
    @click.option("--master-addr", help="Address of node 0.")
    @click.option("--master-port", type=click.IntRange(1, 65535), help="Rendezvous port on node 0.")
    @click.option("--device", type=click.Choice(["auto", "npu", "cuda", "cpu"]), help="Force a device kind.")
    @click.option("--engine", type=click.Choice(["trl", "verl"]), default="trl",
                  help="trl: our entrypoints under torchrun; verl (grpo, ppo): verl's trainer (Ray).")
    @click.option("--strategy", type=click.Choice(["fsdp", "megatron"]),
                  help="--engine verl: verl's training strategy [default: distributed.strategy].")
    @click.option(
        "--launch-spec",
        type=click.Path(dir_okay=False),
        help="Train on every host this spec (ascend-check --launch-spec) lets start, over SSH. -i/--hosts "
        "without --node-rank do the same after a preflight.",
    )
    @click.option("--dry-run", is_flag=True, help="Print each host's exact command and environment only.")
    @click.option("--python", help="Interpreter on the nodes [default: spec/inventory, else this path].")
    @click.option("--set-env", help="CANN set_env.sh sourced on the nodes [default: the toolkit's].")
    @click.option(
        "--node-output-dir",
        help="The output dir as the nodes see it, where a shared filesystem is mounted elsewhere on them "
        "[default: the --output-dir path].",
    )
    @click.option("--no-numa-bind", is_flag=True, help="Do not bind each rank to its NPU's NUMA node.")
    @click.option("--profile-steps", metavar="A:B", help="Profiler trace of steps A..B on every rank.")
    @click.option("--sniff-every", type=click.IntRange(min=1), metavar="N",
                  help="Every N steps, time a matmul and an all-reduce on every rank and name a straggler "
                  "(> 10 % and > 1 sigma off the mean) with its host; the same as sniff_every=N.")
    @click.option("--ssh-config", type=click.Path(dir_okay=False), help="ssh_config for reaching the nodes.")
    @click.option("--known-hosts", type=click.Path(dir_okay=False), help="known_hosts of the nodes.")
    @click.option("--connect-timeout", type=click.FloatRange(0.1, 600),
                  help="Seconds to wait for each SSH connection [10].")
    @click.option("--join-timeout", type=click.FloatRange(min=1),
                  help="--engine verl: seconds for every node to join the Ray cluster [120].")
    @click.option("--launcher", type=click.Choice(["ssh", "slurm"]),
                  help="slurm: inside an sbatch/salloc allocation, srun on its nodes "
                  "(training/slurm_launch.py) [default: ssh, from here].")
    @click.option("--print-sbatch", metavar="FILE", help="--launcher slurm: write a ready sbatch script for "
                  "this job there (- for stdout) instead of training.")
    @click.option("--sbatch-time", metavar="D-HH:MM:SS",
                  help="--print-sbatch: the job's time limit [24:00:00].")
    @click.option("--sbatch-gres", metavar="SPEC", help="--print-sbatch: GRES per node, none for no line "
                  "[npu:<nproc per node>].")
    @click.option("--sbatch-partition", metavar="NAME",
                  help="--print-sbatch: the partition [Slurm's default].")
    @click.argument("overrides", nargs=-1)
    def command(**kw):
        every = kw.pop("sniff_every", None)
        if every is not None:  # an override, so it travels to every node's workers with the others
            kw["overrides"] = (*kw["overrides"], f"sniff_every={every}")
        if kw.get("launcher") == "slurm" or kw.get("print_sbatch"):
            _launch_slurm(algo, **kw)
        for flag in ("launcher", "print_sbatch", "sbatch_time", "sbatch_gres", "sbatch_partition"):
            kw.pop(flag)
        _launch(algo, **kw)

    return command


@click.group(
    cls=GuardedGroup,
    epilog="Exit codes: 0 done; 1 training refused or stopped (failed preflight, NaN/inf loss, out of "
    "memory); "
    "2 bad config or usage; 3 a node could not be reached over SSH; anything else comes from torchrun or a "
    "crashed worker.",
    help="Train with GRPO, PPO, SFT or a reward model, after a passing ascend-check preflight.\n\n"
    "OVERRIDES are key=value pairs over the config, e.g. max_steps=20 grpo.beta=0.01.",
)
@debug_option
@click.version_option(package_name="ascend-ready", prog_name="ascend-train")
def main() -> None:
    pass


main.add_command(_algo_command("grpo", "GRPO (TRL GRPOTrainer) with rule-based or model rewards."))
main.add_command(_algo_command("ppo", "PPO with a critic, KL-penalised rewards and GAE."))
main.add_command(_algo_command("sft", "Supervised fine-tuning on prompt/completion pairs (TRL SFTTrainer)."))
main.add_command(_algo_command("rm", "Reward-model training on chosen/rejected pairs (TRL RewardTrainer)."))


@main.command("plan", context_settings={"show_default": True})
@click.option("--config", "-c", required=True, help="YAML file, or a bundled config name.")
@click.option("--algorithm", "-a", type=click.Choice(ALGOS), default="grpo")
@click.option("--engine", type=click.Choice(["trl", "verl"]),
              help="[default: the config's: verl where it names a verl strategy or model-parallel size]")
@click.option("--nodes", "--nnodes", "nodes", type=click.IntRange(min=1),
              help="Nodes to plan for [default: launch.nnodes].")
@click.option("--profile", help="Hardware profile name or file [default: atlas-800t-a2].")
@click.option("--strategy", type=click.Choice(["zero", "fsdp", "megatron"]),
              help="Sharding [default: zero for trl; fsdp for verl, megatron with --tp/--pp/--ep].")
@click.option("--tp", type=click.IntRange(min=1), help="Tensor parallel size (megatron) [default: "
              "distributed.tensor_parallel].")
@click.option("--pp", type=click.IntRange(min=1), help="Pipeline parallel size (megatron) [default: "
              "distributed.pipeline_parallel].")
@click.option("--ep", type=click.IntRange(min=1), help="Expert parallel size (megatron, MoE) [default: "
              "distributed.expert_parallel].")
@click.option("--rollout-tp", type=click.IntRange(min=1),
              help="Rollout tensor parallel size [default: smallest that fits].")
@click.option("--model-config", type=click.Path(dir_okay=False), help="The model's config.json.")
@click.option("--hbm-gb", type=click.FloatRange(min=0, min_open=True),
              help="Device memory in GB, instead of the profile's.")
@click.option("--host-ram-gb", type=click.FloatRange(min=0, min_open=True),
              help="Host RAM per node in GB, for offloaded states.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.argument("overrides", nargs=-1)
def plan_cmd(config: str, algorithm: str, engine: str | None, fmt: str, overrides: tuple[str, ...],
             **kw) -> None:
    """What the job needs per device (weights, gradients, optimizer, activations, KV cache) against the
    profile's HBM limit; exit 1 when it does not fit, naming the smallest fleet and layout that does."""
    from ascend_ready.errors import TrainingError
    from ascend_ready.training import memory_plan as mp

    cfg = load_config(config, overrides)
    if engine is None:  # the config's engine and strategy unless the flags say otherwise
        engine, why = mp.engine_of(cfg)
        click.echo(f"engine: {engine} ({why}; --engine overrides)", err=True)
    plan, model, work = mp.plan_for_config(cfg, algorithm, engine=engine, **kw)
    best = None if plan.fits else mp.smallest_fleet(model, work, plan.device, engine=plan.engine,
                                                    base=plan.layout)
    if fmt == "json":
        fleet = mp.plan_as_dict(best) if best else None
        click.echo(json.dumps({**mp.plan_as_dict(plan), "smallest_fleet": fleet}, indent=1))
    else:
        click.echo(mp.format_plan(plan))
        if best is not None:
            click.echo("\nsmallest fleet that fits:\n" + mp.format_plan(best))
    if not plan.fits:
        try:
            mp.check_plan(plan, model, work)
        except TrainingError as exc:
            raise exc from None


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
    _quiet_libraries()
    from ascend_ready.training.config import TinyModelConfig
    from ascend_ready.training.models import build_tiny_model

    click.echo(build_tiny_model(directory, TinyModelConfig(architecture=architecture), seed=seed))


@main.command("plot")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
def plot_cmd(run_dir: str) -> None:
    """Redraw RUN_DIR/metrics.png from RUN_DIR/metrics.jsonl."""
    from ascend_ready.training.metrics import METRICS_FILE, PLOT_FILE, plot_metrics

    try:
        png = plot_metrics(Path(run_dir) / METRICS_FILE, Path(run_dir) / PLOT_FILE)
    except OSError as exc:
        raise ConfigError(f"cannot write {Path(run_dir) / PLOT_FILE}: {exc.strerror or exc}",
                          hint="plot a run directory you may write") from None
    if png is None:
        raise ConfigError(f"{run_dir}/{METRICS_FILE} has nothing to plot",
                          hint="plot after the run has logged a step (reward, KL, loss or accuracy)")
    click.echo(png)


if __name__ == "__main__":
    main()
