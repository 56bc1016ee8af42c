"""`ascend-train grpo|ppo --engine verl`: the Ray launch of verl's PPO trainer with our config's overrides.

What happens here: prepare() writes the prompts as verl's parquet files (verl_data), translates the config
(verl_overrides: composed with the installed verl's own Hydra config and checked by verl's own
validate_config before any node is touched), then `launch()` starts `python -m verl.trainer.main_ppo` on
this node, or `launch_across_nodes()` brings up Ray on a launch spec's nodes (training/ray_cluster.py) and
runs the trainer there as the cluster's driver. The nodes must run the verl, vllm-ascend and megatron-core
releases the matrix pins (provision/engines.check_engine_versions), checked before Ray starts.

Install: `pip install 'ascend-ready[verl]'` (hydra-core, omegaconf, pandas, pyarrow, ray, and verl's CPU
dependencies) and `pip install --no-deps verl==0.9.1`; verl's own requirements would pull a CUDA torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ascend_ready.checks import rl_rules
from ascend_ready.checks.cluster.node_facts import FactQuery, node_facts
from ascend_ready.checks.parsers.version_info import parse_toolkit_install_info
from ascend_ready.errors import ConfigError, MatrixError, ParseError, TrainingError
from ascend_ready.fleet.job import root_cause, run_job
from ascend_ready.fleet.sessions import open_sessions
from ascend_ready.provision.engines import (
    check_engine_fleet,
    check_engine_versions,
    controller_note,
    installed_version,
)
from ascend_ready.training import job_ports, node_probe, ray_cluster, run_dir
from ascend_ready.training import multinode as mn
from ascend_ready.training.launcher import LaunchResult
from ascend_ready.training.memory_plan import plan_for_config
from ascend_ready.training.models import build_tiny_model
from ascend_ready.training.preflight import gate
from ascend_ready.training.verl_data import VERL_EXTRA_HINT, write_parquet
from ascend_ready.training.verl_overrides import (
    config_name,
    dropped_defaults,
    strategy_of,
    to_overrides,
    validate_overrides,
    verl_dir,
    verl_validate,
)

# ---------------------------------------------------------------------------------------------------
# Launch


def prepare(algorithm: str, cfg: Any, out: Path, *, plan: Any | None = None,
            node_dir: str | None = None, data: bool = True) -> list[str]:
    """Overrides, our check and verl's, then the parquet files (`data`) and out/verl-overrides.txt.
    Touches no node.

    `node_dir`: the run dir as the nodes see it (a shared filesystem mounted elsewhere on them); the
    overrides name the data, model and checkpoints there."""

    if plan is None:
        plan, _, _ = plan_for_config(cfg, algorithm, engine="verl")
    seen = Path(node_dir) if node_dir else out
    data_dir = seen / "verl-data"
    # translated and checked (ours, then verl's own) before anything is written
    overrides = to_overrides(cfg, algorithm, plan=plan, train_file=data_dir / "train.parquet",
                             val_file=data_dir / "val.parquet", output_dir=seen)
    verl_validate(validate_overrides(overrides), cfg)
    out.mkdir(parents=True, exist_ok=True)
    if data:  # a dry run translates and checks; the prompts are read at launch
        write_parquet(cfg, out)
    overrides = [f"--config-name={config_name(overrides)}", *overrides]
    (out / "verl-overrides.txt").write_text("\n".join(overrides) + "\n")
    return overrides


def _validated(overrides: list[str], out: Path, cfg: Any, algorithm: str) -> str:
    """The launch log's account of the translation, with the defaults of ours verl has no key for."""
    lines = [f"verl: {len(overrides) - 1} overrides validated against {verl_dir()}/trainer/config/"
             f"{config_name(overrides)}.yaml and by verl's validate_config (written to "
             f"{out / 'verl-overrides.txt'})"]
    return "\n".join(lines + [f"verl: {note}" for note in dropped_defaults(cfg, algorithm)])


#: verl renders prompts with the tokenizer's chat template; the tiny character tokenizer has none
TINY_CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def ensure_tiny_model(cfg: Any, out: Path) -> Path | None:
    """Build the tiny model where the overrides point (out/tiny-model), with a chat template verl can use."""
    if cfg.model.path is not None or cfg.model.tiny is None:
        return None

    directory = out / "tiny-model"
    if not (directory / "config.json").is_file():
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # its shard bar would sit among the launcher's lines
        build_tiny_model(directory, cfg.model.tiny, seed=cfg.seed)
    tok_cfg = directory / "tokenizer_config.json"
    data = json.loads(tok_cfg.read_text())
    if not data.get("chat_template"):
        data["chat_template"] = TINY_CHAT_TEMPLATE
        tok_cfg.write_text(json.dumps(data, indent=2))
    return directory


def launch(algorithm: str, cfg: Any, out: Path, *, skip_preflight: bool = False, dry_run: bool = False,
           log: Callable[[str], None] = print, cluster: Any | None = None,
           run: Callable[[str, str, float], tuple[int, str]] | None = None,
           fingerprints: dict[str, dict[str, str | None]] | None = None, waive: tuple[str, ...] = ()) -> dict:
    """Validate everything here, gate on the preflight (`waive`: checks it may leave unjudged), then run
    verl's trainer with the overrides.

    With `fingerprints` (node -> cann/torch/torch_npu as read), a fleet verl does not support is refused
    first (provision.engines.check_engine_fleet). With `cluster` (training.ray_cluster.RayCluster) and
    `run` (ray_cluster.runner), Ray is started on its nodes, the trainer joins it from here, and it is
    torn down afterwards; without, verl's trainer starts a one-node Ray of its own. Across the nodes of a
    launch spec the CLI uses launch_across_nodes instead (the trainer runs on the head).
    """

    if fingerprints:

        check_engine_fleet("verl", fingerprints)
    overrides = prepare(algorithm, cfg, out, data=not dry_run)
    log(_validated(overrides, out, cfg, algorithm))
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    if dry_run:
        log("launch: " + " ".join(cmd))
        return {"output_dir": str(out), "dry_run": True, "overrides": overrides}
    pf = cfg.preflight
    gate(pf.command, pf.hosts, pf.inventory, pf.timeout_s, skip_preflight, log=log, waive=waive)
    if importlib.util.find_spec("torch_npu"):  # an NPU node: the matrix's verl rows are for it
        check_this_node(cfg, local_stack(), {p: installed_version(p) for p in PINNED_PACKAGES}, log)
    ensure_tiny_model(cfg, out)
    env = None
    if cluster is not None and run is not None:

        ray_cluster.start(cluster, run, log=log)
        env = {**os.environ, "RAY_ADDRESS": cluster.address}
    log("launch: " + " ".join(cmd))
    try:
        rc = subprocess.call(cmd, env=env)
    finally:
        if cluster is not None and run is not None:
            ray_cluster.stop(cluster, run, log=log)
    if rc != 0:
        raise TrainingError(f"verl's trainer exited with {rc}",
                            hint=f"its log is above; the overrides are in {out / 'verl-overrides.txt'}")
    return {"output_dir": str(out), "engine": "verl"}


# ---------------------------------------------------------------------------------------------------
# Across the nodes of a launch spec: a Ray cluster, then verl's trainer as its driver on the head

#: the file of the run dir that records the Ray cluster's check (each node's hostname and NPUs)
RAY_CHECK_FILE = "ray-cluster.json"
#: what verl's trainer imports on every node besides Ray; the device kind adds torch_npu (NPU)
VERL_RUNTIME = ("verl", "vllm", "torch")
_RUNTIME_PROBE = """
import importlib.metadata as m, importlib.util as u, json
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
def package(name):
    found = version(name)
    if found is None and name == "megatron-core" and u.find_spec("megatron") and u.find_spec("megatron.core"):
        try:  # Megatron-LM from a checkout on PYTHONPATH, as verl's Ascend guide installs it
            from megatron.core.package_info import __version__ as found
        except Exception:
            found = None
    return found
print(json.dumps({"ray": version("ray") if u.find_spec("ray") else None,
                  "missing": [x for x in %r if u.find_spec(x) is None],
                  "packages": {x: package(x) for x in %r}}))
"""
#: what the engine gate compares with the matrix's pins on every node (engines.check_engine_versions)
PINNED_PACKAGES = ("verl", "vllm", "vllm-ascend", "megatron-core", "triton-ascend", "torchvision",
                   "transformers", "transferqueue", "megatron-bridge")


def _runtime(sessions: dict, cluster: Any, modules: tuple[str, ...]
             ) -> dict[str, tuple[str | None, list, dict[str, str | None]]]:
    """node -> (its Ray version, the modules of verl's runtime it lacks, the installed versions of the
    packages the matrix pins), read with the node's interpreter."""
    found = {}
    for node in cluster.nodes:
        code = _RUNTIME_PROBE % (modules, PINNED_PACKAGES)
        res = sessions[node.name].run(f"exec {shlex.quote(node.python)} -c {shlex.quote(code)}", 60,
                                      user=node.run_as)
        rc, out = res.rc, res.output
        try:
            data = json.loads(res.stdout.strip().splitlines()[-1])
            found[node.name] = (data["ray"], list(data["missing"]), dict(data["packages"]))
        except (ValueError, IndexError, KeyError, TypeError):
            raise TrainingError(f"{node.name}: cannot read what {node.python} has installed (exit {rc}): "
                                f"{out.strip()[-300:] or '(no output)'}",
                                hint=f"check that {node.python} runs on {node.name} (--python)") from None
    return found


def _engine_skip(cfg: Any) -> tuple[str, ...]:
    """The pinned packages a job of `cfg`'s strategy does not load (Megatron's under FSDP)."""
    return () if strategy_of(cfg) == "megatron" else ("megatron-core", "megatron-bridge")


def local_stack() -> dict[str, str | None]:
    """This interpreter's torch and torch_npu, and the CANN toolkit its environment points at
    (ASCEND_TOOLKIT_HOME or ASCEND_HOME_PATH, as set_env.sh sets them; either the version directory or the
    one above its `<arch>-linux`): the fingerprint check_engine_fleet reads. None where it is not read."""
    found: dict[str, str | None] = {"cann": None, "torch": installed_version("torch"),
                                    "torch_npu": installed_version("torch_npu")}
    home = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if home:
        name = "ascend_toolkit_install.info"
        infos = [Path(home) / name, *sorted(Path(home).glob(f"*/{name}"))]
        for info in infos:
            try:
                found["cann"] = parse_toolkit_install_info(info.read_text()).version
                break
            except (OSError, ParseError):
                continue
    return found


def check_this_node(cfg: Any, stack: dict[str, str | None], installed: dict[str, str | None],
                    log: Callable[[str], None]) -> None:
    """One node: verl's trainer runs in this interpreter, so this node's stack must be one verl supports and
    its engine packages the releases that row pins (what launch_across_nodes compares on every node);
    MatrixError naming what differs."""
    here = socket.gethostname()
    if stack.get("cann") is None:
        raise MatrixError(f"{here}: the CANN version is not read (no ascend_toolkit_install.info under "
                          "$ASCEND_TOOLKIT_HOME): the verl row this node needs cannot be chosen",
                          hint="source the toolkit's set_env.sh (e.g. /usr/local/Ascend/ascend-toolkit/"
                               "set_env.sh) in the shell that runs ascend-train")
    rows = check_engine_fleet("verl", {here: stack})
    check_engine_versions("verl", rows, {here: installed}, skip=_engine_skip(cfg))
    log(f"engine: {here} runs the releases verl's row {', '.join(rows[here])} pins")


def _versions(fingerprint: dict[str, str]) -> dict[str, str | None]:
    """A launch spec's fingerprint as check_engine_fleet reads it: "(not installed)" is no version."""
    return {k: None if v == "(not installed)" else v for k, v in fingerprint.items()}


def _refuse_without_ray(versions: dict[str, tuple], python: dict[str, str]) -> None:
    here = version("ray") if importlib.util.find_spec("ray") else None
    want = here or next((v for v, *_ in versions.values() if v), None)
    bad = [f"{n}: {'no ray in ' + python[n] if v is None else f'ray {v}, not {want}'}"
           for n, (v, *_) in versions.items() if v is None or v != want]
    if bad:
        raise ConfigError("the Ray cluster needs the same Ray on every node: " + "; ".join(bad),
                          hint=f"pip install 'ray=={want or '2.60.0'}' into the training venv of each node "
                               "named (the [verl] extra pins it)")


def _lint_rl_env(cfg: Any, cluster: Any) -> None:
    """The vLLM-Ascend RL rules (checks/rl_rules.yml) on the job's environment before anything starts:
    verl's rollout sleeps (its default), so NZ is set off on every node, and the config's extra_env (which
    reaches every node through Ray's runtime_env) must not turn expandable segments on or broadcast one
    VLLM_HOST_IP; ConfigError naming each violation and its source."""

    sleeps = rl_rules.sleeps_rollout("verl")
    nz = rl_rules.rl_env("", sleeps=sleeps)
    nz.pop("VLLM_HOST_IP")
    for k, v in nz.items():
        cluster.env.setdefault(k, v)
    common = {**cluster.env, **cfg.launch.hccl.extra_env}  # Ray's runtime_env wins over the raylet's
    problems = rl_rules.lint_env(common, {n.name: cluster.node_env(n) for n in cluster.nodes},
                                 {n.name: n.ip for n in cluster.nodes}, sleeps=sleeps)
    if problems:
        raise ConfigError("the job's environment breaks vLLM-Ascend's RL rules; nothing was started:\n  "
                          + "\n  ".join(problems),
                          hint="fix launch.hccl.extra_env (checks/rl_rules.yml gives each rule's source)")


def launch_across_nodes(algorithm: str, cfg: Any, out: Path, *, opts: Any, join_timeout_s: float = 120.0,
                        cluster_options: dict | None = None) -> dict:
    """`--engine verl` with --launch-spec or -i/--hosts: Ray on every node the spec (or the preflight)
    lets start, a Ray task on each node checked (hostname, NPUs), then verl's trainer as the cluster's
    driver on the head, its output streamed; Ray is stopped on every node afterwards, also on a failure
    and Ctrl-C, and a Ray process left anywhere is reported.

    Where a node lacks verl's runtime (vllm, torch_npu, verl: a machine without accelerators, such as the
    simulated cluster), the trainer is not started: the Ray cluster is brought up, checked and stopped,
    and TrainingError names what is missing where. `opts` is multinode.LaunchOptions; `cluster_options`
    are RayCluster's (num_cpus, object_store_bytes, port).
    """

    out = out.absolute()
    log = opts.log
    fleet = node_probe.resolve_fleet(cfg, opts)
    node_out = opts.node_output_dir or str(out)
    device = "cuda" if cfg.launch.device == "cuda" else "npu"
    modules = (*VERL_RUNTIME, "torch_npu") if device == "npu" else VERL_RUNTIME
    if not fleet.from_inventory and not opts.dry_run:
        node_probe.refuse_changed_versions(fleet.spec, fleet.hosts,
                                           {n: fleet.targets[n] for n in fleet.names}, opts)
    with contextlib.ExitStack() as stack:
        # A dry run connects only where it must: to read the NICs the spec does not give.
        need = not opts.dry_run or fleet.from_inventory or any(not fleet.hosts[n].ip for n in fleet.names)
        sessions = (stack.enter_context(open_sessions([fleet.targets[n] for n in fleet.names], opts.fanout))
                    if need else {})
        nonce = marker = None
        if not opts.dry_run:
            # hook (ops-launch, training/run_dir.py): writable as the job's user, with room, on every node
            # (a run already there is refused on the controller, training/cli.py)

            as_user = {n: u for n, u in fleet.users.items() if u and u != fleet.targets[n].user}
            run_dir.refuse_node_dirs({n: fleet.targets[n] for n in fleet.names}, opts.fanout, node_out,
                                     as_user, resume=True, min_free_gb=cfg.launch.min_output_free_gb)
            out.mkdir(parents=True, exist_ok=True)
            nonce = secrets.token_hex(8)
            marker = out / f".ascend-train-shared-{nonce}"
            marker.write_text(nonce)
            stack.callback(marker.unlink, missing_ok=True)
        probe_as = {n: u for n, u in fleet.users.items() if u and u != fleet.targets[n].user}
        facts = node_facts({n: fleet.targets[n] for n in sessions}, opts.fanout, {n: FactQuery(
            fleet.master, node_probe.required_paths(cfg, fleet.python[n], opts.set_env, None),
            f"{node_out}/{marker.name}" if marker else None, nonce) for n in sessions},
            probe_as) if sessions else {}
        hosts = fleet.hosts
        if fleet.from_inventory:
            spec = node_probe.spec_with_routes(fleet.report, {n: fleet.targets[n] for n in fleet.names},
                                               facts, fleet.master, fleet.port)
            hosts, master = spec.usable(), spec.master_addr
        else:
            spec, master = fleet.spec, opts.master_addr or fleet.master
        names = mn.node_rank_order(hosts, master)  # the master's host is the head
        if not opts.dry_run:
            node_probe.refuse_missing(facts, fleet.python)
            unshared = [n for n in names if not facts[n].sees_output]
            if unshared:
                raise ConfigError(f"verl needs the run dir on a filesystem every node shares: "
                                  f"{', '.join(unshared)} do not see {node_out}",
                                  hint="put --output-dir on the shared filesystem (mounted elsewhere on the "
                                       "nodes: --node-output-dir), as verl's data and checkpoints must be")
        # PORT PLAN HOOK (verl/Ray): Ray's ports and every role's HCCL ports, claimed after the probe

        run_id = f"verl-{algorithm}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        options = dict(cluster_options or {})
        ports, release = job_ports.claim(
            run_id, {n: hosts[n] for n in names}, facts, cfg, job_ports.roles_for("verl", algorithm, cfg),
            rendezvous_port=spec.master_port, pinned_rendezvous=False, ray=True, dry_run=opts.dry_run,
            log=log, sessions=sessions)
        stack.callback(release)
        if "port" not in options:
            options.update(port=ports.ray.gcs, ports=ports.ray)
        cluster = ray_cluster.cluster_from_spec(
            {n: hosts[n] for n in names}, python=fleet.python, set_env=opts.set_env,
            run_as={n: u for n, u in fleet.users.items() if u},
            login_users={n: (facts[n].login_user if n in facts else None) or fleet.targets[n].user
                         for n in names},
            **options)
        cluster.env.update(ports.env())
        _lint_rl_env(cfg, cluster)
        nproc = opts.nproc_per_node or min((len(n.devices) for n in cluster.nodes), default=0) \
            or cfg.launch.nproc_per_node
        job = cfg.model_copy(deep=True)
        job.launch.nnodes, job.launch.nproc_per_node = len(names), nproc
        overrides = prepare(algorithm, job, out, node_dir=node_out, data=not opts.dry_run)
        log(_validated(overrides, out, cfg, algorithm))
        # the trainer runs on the head node: this controller only composed and validated verl's config
        log(controller_note())
        head = cluster.head
        plan = mn.JobPlan(algorithm, run_id, out, head.ip, cluster.port, nproc, [], {
            n: f"{h.verdict}: {', '.join(h.failed_checks) or 'see the report'}"
            for n, h in spec.hosts.items() if n not in hosts}, spec.checked, opts.node_output_dir)
        env = {"RAY_ADDRESS": cluster.address, "PYTHONUNBUFFERED": "1", **cluster.node_env(head)}
        plan.hosts.append(mn.HostPlan(
            name=head.name, target=fleet.targets[head.name], node_rank=0, nic=head.nic, ip=head.ip,
            devices=list(head.devices), python=head.python, training_user=head.run_as, env=env,
            torchrun=[head.python, "-m", "verl.trainer.main_ppo", *overrides], bindings=[],
            set_env=opts.set_env, facts=facts.get(head.name)))
        if opts.dry_run:
            lines = [f"ray cluster: {len(cluster.nodes)} node(s), head {head.name} at {cluster.address}"]
            lines += [f"== {n.name}: {'head' if n is head else 'worker'}, NIC {n.nic or '-'} {n.ip}, "
                      f"{len(n.devices)} NPU(s)\n{cluster.start_command(n)}" for n in cluster.nodes]
            lines.append(f"== verl's trainer: the driver on {head.name}, RAY_ADDRESS={cluster.address}")
            lines.append(mn.remote_command(plan.hosts[0], plan).rstrip("\n"))
            sys.stdout.write("\n".join(lines) + "\n")
            return {"dry_run": True, "hosts": names}
        runtime = _runtime(sessions, cluster, modules)
        _refuse_without_ray(runtime, fleet.python)
        if not any(miss for _v, miss, _p in runtime.values()):
            # The trainer will start: the stack the preflight read on each node must be one verl supports
            # (a node lacking verl's runtime is named after the Ray check instead, and nothing trains), and
            # the engine packages each node runs must be the releases that row pins

            rows = check_engine_fleet("verl", {n: _versions(hosts[n].fingerprint) for n in names})
            check_engine_versions("verl", rows, {n: runtime[n][2] for n in names}, skip=_engine_skip(cfg))
        ensure_tiny_model(job, out)
        plan.log_dir.mkdir(parents=True, exist_ok=True)
        job_ports.write_job_spec(spec, {n: hosts[n] for n in names}, ports, plan.log_dir)
        run = ray_cluster.runner(sessions)
        ray_cluster.start(cluster, run, join_timeout_s=join_timeout_s, log=log)
        result = left = None
        try:
            nodes = ray_cluster.check(cluster, run)
            record = {"address": cluster.address, "nodes": nodes}
            (out / RAY_CHECK_FILE).write_text(json.dumps(record, indent=1) + "\n")
            for row in nodes:
                log(f"ray: {row['node']}: a task ran on {row['hostname']} ({row['ip']}) holding "
                    f"{len(row['npu_ids'])} NPU(s) {row['npu_ids']}")
            lacking = {n: miss for n, (_v, miss, _p) in runtime.items() if miss}
            if not lacking:
                result = run_job({head.name: mn.remote_command(plan.hosts[0], plan)},
                                 {head.name: sessions[head.name]}, plan.log_dir, echo=log)
        finally:
            left = ray_cluster.stop(cluster, run, log=log)
    leftover = ("; Ray processes LEFT on " + "; ".join(f"{n}: {', '.join(p)}" for n, p in left.items())
                if left else "")
    if result is None:
        what = "; ".join(f"{n} lacks {', '.join(m)}" for n, m in lacking.items())
        raise TrainingError(
            f"verl's trainer was not started: {what} (its interpreter {head.python}). The Ray cluster "
            f"came up on {len(nodes)} node(s), ran a task on each ({out / RAY_CHECK_FILE}) and was stopped"
            + leftover,
            hint=f"install verl's stack on every node (`ascend-matrix resolve --engine verl`; verl itself: "
                 f"{VERL_EXTRA_HINT.split('&& ')[-1]}); verl's trainer needs NPUs or GPUs (docs/verl.md)")
    if result.interrupted:
        log(f"ray: interrupted; stopped on every node{leftover}")
        raise KeyboardInterrupt
    if not result.ok:
        cause = root_cause(result.nodes)
        raise TrainingError(f"verl's trainer failed on {head.name}: "
                            f"{cause.lost or cause.error or f'exit code {cause.rc}'}" + leftover,
                            hint=f"its log: {plan.log_dir}/{head.name}.log; the overrides: "
                                 f"{out / 'verl-overrides.txt'}")
    if left:
        raise TrainingError(f"verl's trainer finished, but the teardown left Ray running{leftover}",
                            hint="stop it there: ray stop --force")
    return {"output_dir": str(out), "engine": "verl", "hosts": names, "run_id": run_id,
            "logs": str(plan.log_dir), "ray": cluster.address}


class RayLauncher:
    """The `verl-ray` launcher (training/launcher.py): a Ray cluster on the nodes, verl's trainer as its
    driver on the head (`launch_across_nodes`)."""

    name = "verl-ray"

    def launch(self, request: Any) -> Any:

        job = request.job
        return LaunchResult(launch_across_nodes(job.algo, job.cfg, job.output_dir, opts=request.options,
                                                join_timeout_s=request.join_timeout_s))
