"""The one configuration model of ascend-train: a pydantic tree with a docstring on every field.

Config files (YAML) are overrides of these defaults; `key.sub=value` command-line overrides go on top.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ascend_ready.errors import ConfigError

CONFIG_VERSION = 1
BUNDLED_CONFIGS = Path(__file__).resolve().parent / "configs"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


class LoraConfig(_Section):
    """Low-rank adapters through peft; the frozen base doubles as the reference model."""

    r: int = Field(16, ge=1)
    """Adapter rank."""
    alpha: int = Field(32, ge=1)
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    """Dropout on the adapter input."""
    target_modules: list[str] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    """Module names that get adapters (Qwen2/Qwen3 attention and MLP projections)."""


class TinyModelConfig(_Section):
    """Shape of the randomly initialised Qwen-architecture model built locally for tests and the demo."""

    architecture: Literal["qwen2", "qwen3"] = "qwen3"
    """Which Qwen modelling code to instantiate."""
    hidden_size: int = Field(64, ge=8)
    """Width of the residual stream."""
    num_layers: int = Field(2, ge=1)
    """Number of decoder layers."""
    num_heads: int = Field(4, ge=1)
    """Attention heads (key/value heads are the same number)."""
    intermediate_size: int = Field(128, ge=8)
    """Width of the MLP."""


class ModelConfig(_Section):
    """Which weights to train."""

    path: str | None = None
    """Local directory with a Hugging Face checkpoint (config.json, weights, tokenizer). Nothing is
    downloaded: hub ids are refused. Unset with `tiny` set: the tiny model is built under the output dir."""
    tiny: TinyModelConfig | None = None
    """Build a tiny random model and character tokenizer into `path` (or `<output>/tiny-model`) if absent."""
    lora: LoraConfig | None = None
    """Train LoRA adapters instead of all weights."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    reward_model_path: str | None = None
    """Local directory of a sequence-classification reward model (used by the `reward_model` reward)."""

    @model_validator(mode="after")
    def _needs_weights(self) -> ModelConfig:
        if self.path is None and self.tiny is None:
            raise ValueError("set model.path (a local model directory) or model.tiny")
        return self


class DataConfig(_Section):
    """Prompt sets with reference answers."""

    source: Literal["arithmetic", "jsonl", "gsm8k"] = "arithmetic"
    """`arithmetic`: the bundled synthetic task; `jsonl`: {"prompt", "answer"} lines (SFT also reads
    "completion", RM reads "chosen"/"rejected"); `gsm8k`: {"question", "answer": "... #### 42"} lines."""
    path: str | None = None
    """The JSONL file for `jsonl` and `gsm8k` sources."""
    num_examples: int = Field(2000, ge=0)
    """Synthetic task size (train + held-out); for files, an upper bound on lines read (0 = all)."""
    eval_size: int = Field(64, ge=0)
    """Number of examples held out for the accuracy evaluation (taken from the end of a seeded shuffle)."""
    max_operand: int = Field(9, ge=1)
    """Synthetic task: operands are drawn from [0, max_operand]."""
    operators: str = "+"
    """Synthetic task: the operators to draw from, any of `+-*`."""
    prompt_template: str = "{question}"
    """How a question becomes a prompt; `{question}` is replaced. Use it for instructions or chat text."""

    @model_validator(mode="after")
    def _file_sources_need_path(self) -> DataConfig:
        if self.source == "arithmetic" and self.num_examples < 2:
            raise ValueError("data.num_examples must be at least 2 for the arithmetic task")
        if self.source != "arithmetic" and not self.path:
            raise ValueError(f"data.path is required for source '{self.source}'")
        if set(self.operators) - set("+-*") or not self.operators:
            raise ValueError("data.operators must be a non-empty mix of + - *")
        return self


class RewardConfig(_Section):
    """How a completion is scored. Names: `answer_match`, `format`, `reward_model`, or `module:function`."""

    functions: list[str] = ["answer_match", "format"]
    """Reward functions, summed with `weights`. An import path `pkg.mod:fn` loads a user function that is
    called like TRL's: fn(prompts=..., completions=..., answer=..., **kwargs) -> list[float]."""
    weights: list[float] | None = None
    """One weight per function (default: all 1.0)."""

    @model_validator(mode="after")
    def _weights_match(self) -> RewardConfig:
        if not self.functions:
            raise ValueError("reward.functions must name at least one reward")
        if self.weights is not None and len(self.weights) != len(self.functions):
            raise ValueError(
                f"reward.weights has {len(self.weights)} entries for {len(self.functions)} functions"
            )
        return self


class GenerationSettings(_Section):
    """Sampling of completions during training (evaluation is greedy)."""

    max_prompt_length: int = Field(512, ge=1)
    """Prompts are left-truncated to this many tokens."""
    max_completion_length: int = Field(256, ge=1)
    """Completions stop at EOS or after this many tokens."""
    temperature: float = Field(1.0, gt=0.0)
    """Sampling temperature."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""


class GRPOSettings(_Section):
    """Group Relative Policy Optimisation (TRL's GRPOTrainer)."""

    num_generations: int = Field(8, ge=2)
    """Completions sampled per prompt; their rewards are normalised within the group."""
    beta: float = Field(0.0, ge=0.0)
    """KL coefficient to the reference model (0 = no reference model loaded, TRL's default)."""
    epsilon: float = Field(0.2, gt=0.0)
    """Clip range of the importance ratio."""
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    """How token losses are aggregated (TRL 1.16 default: dapo)."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Divide advantages by the group's (or batch's) reward std, or not (Dr. GRPO)."""
    num_iterations: int = Field(1, ge=1)
    """Optimisation passes per generated batch (mu in the paper)."""


class PPOSettings(_Section):
    """Proximal Policy Optimisation with a learned critic (implemented in training/ppo.py)."""

    kl_coef: float = Field(0.05, ge=0.0)
    """Per-token KL penalty to the frozen reference, subtracted from the reward."""
    kl_estimator: Literal["k1", "k3"] = "k1"
    """Per-token estimate of KL(policy || reference) behind that penalty and the `kl` metric, with
    r = pi_ref / pi (Schulman, "Approximating KL divergence"; TRL's `kl_estimator`): `k1` = -log r, unbiased
    but negative on some tokens; `k3` = (r - 1) - log r, unbiased, never negative, lower variance."""
    gamma: float = Field(1.0, ge=0.0, le=1.0)
    """Discount."""
    lam: float = Field(0.95, ge=0.0, le=1.0)
    """GAE lambda."""
    clip_range: float = Field(0.2, gt=0.0)
    """Clip range of the policy ratio."""
    clip_range_value: float = Field(0.2, gt=0.0)
    """Clip range of the value prediction around the rollout's value."""
    vf_coef: float = Field(0.1, ge=0.0)
    """Weight of the value loss in the joint actor-critic loss."""
    ppo_epochs: int = Field(4, ge=1)
    """Passes over each rollout batch."""
    num_minibatches: int = Field(2, ge=1)
    """Minibatches per pass; the rollout batch size must be divisible by it."""
    whiten_advantages: bool = True
    """Normalise advantages to zero mean, unit variance over the valid tokens of the batch."""
    missing_eos_penalty: float | None = 1.0
    """Subtracted from the score of completions that hit the length limit without EOS (None: off)."""
    critic: Literal["shared", "separate"] = "shared"
    """`shared`: value head on the policy's trunk (one forward for logits and values; TRL's classic PPO);
    `separate`: the critic gets its own copy of the backbone (no interference; twice the compute/memory)."""
    critic_learning_rate: float | None = None
    """Learning rate of the value head and critic backbone (default: optim.learning_rate)."""


class OptimConfig(_Section):
    """AdamW with warmup."""

    learning_rate: float = Field(1e-6, gt=0.0)
    """Peak learning rate."""
    weight_decay: float = Field(0.0, ge=0.0)
    """AdamW weight decay."""
    warmup_steps: int = Field(0, ge=0)
    """Linear warmup steps."""
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    """Schedule after warmup."""
    max_grad_norm: float = Field(1.0, gt=0.0)
    """Gradient clipping norm."""


class RolloutSettings(_Section):
    """--engine verl: the rollout engine (vLLM / vLLM-Ascend) beside the trainer, with its own parallelism."""

    tensor_parallel: int | None = Field(None, ge=1)
    """Tensor-parallel size of each rollout replica (unset: the smallest whose weights fit)."""
    expert_parallel: int = Field(1, ge=1)
    """Expert-parallel size of each replica (MoE): above 1 it is tensor_parallel x the replica's data
    parallel size, as vLLM's and verl's expert parallelism define it; the experts are split over it."""
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)
    """Share of each device's memory vLLM reserves for weights and KV cache (unset: what the plan leaves)."""
    max_num_seqs: int = Field(256, ge=1)
    """Sequences one replica schedules at once (vLLM's max_num_seqs); fewer fit: a throughput note."""


class DistributedConfig(_Section):
    """Sharding across ranks (the process group itself comes from the torchrun environment)."""

    zero_stage: Literal[0, 2, 3] = 0
    """0: plain data parallel. 2/3: DeepSpeed ZeRO for GRPO/SFT/RM (needs the `deepspeed` package);
    PPO takes 3 only, as PyTorch FSDP2 full sharding (the same partitioning, no extra package)."""
    offload: bool = False
    """Keep parameters and optimiser state in host memory (ZeRO-3 / FSDP2 offload; ignored on CPU)."""
    strategy: Literal["auto", "fsdp", "megatron"] = "auto"
    """--engine verl: verl's training strategy. `auto`: megatron when any model-parallel size below is above
    1, else fsdp (full sharding). `ascend-train --strategy` sets it."""
    tensor_parallel: int = Field(1, ge=1)
    """--engine verl, megatron: tensor-parallel size of the actor, reference and critic."""
    pipeline_parallel: int = Field(1, ge=1)
    """--engine verl, megatron: pipeline-parallel stages."""
    expert_parallel: int = Field(1, ge=1)
    """--engine verl, megatron: expert-parallel size (MoE models; the experts are split over it)."""
    expert_tensor_parallel: int | None = Field(None, ge=1)
    """--engine verl, megatron: expert tensor-parallel size; unset, Megatron's default (the tensor-parallel
    size: megatron-core TransformerConfig.expert_tensor_parallel_size None -> tensor_model_parallel_size),
    which published A3 recipes leave. Experts are split over expert x expert-tensor x pipeline parallel,
    which must divide the devices."""
    context_parallel: int = Field(1, ge=1)
    """--engine verl, megatron: context-parallel size (each sequence split over it)."""
    sequence_parallel: int = Field(1, ge=1)
    """--engine verl, fsdp: Ulysses sequence-parallel size (each sequence's activations split over it)."""
    optimizer_on_host: bool = False
    """--engine verl: Adam states live in host memory and the optimiser step runs on the CPU (Megatron's
    optimizer_cpu_offload, MindSpeed's swap_optimizer): device memory for much more host RAM."""


class HcclConfig(_Section):
    """HCCL settings exported before the workers start (see REFERENCE §3.7 for the ranges)."""

    connect_timeout: int = Field(1800, ge=120, le=7200)
    """HCCL_CONNECT_TIMEOUT, seconds (RL jobs that build many groups need far more than the 120 default)."""
    exec_timeout: int = Field(3600, ge=0)
    """HCCL_EXEC_TIMEOUT, seconds (0 = wait forever); rollouts stall collectives for minutes."""
    socket_ifname: str | None = None
    """HCCL_SOCKET_IFNAME; unset: the NIC with this node's route to launch.master_addr (for a loopback
    master, the first up interface that is not loopback, a container network or a bridge)."""
    if_ip: str | None = None
    """HCCL_IF_IP (wins over socket_ifname)."""
    extra_env: dict[str, str] = {}
    """Any further environment variables for the workers (e.g. HCCL_BUFFSIZE)."""


class LaunchConfig(_Section):
    """How workers are started; torchrun is used when more than one process is asked for."""

    nnodes: int = Field(1, ge=1)
    """Number of nodes."""
    nproc_per_node: int = Field(1, ge=1)
    """Processes (devices) per node."""
    node_rank: int = Field(0, ge=0)
    """Rank of this node."""
    master_addr: str = "127.0.0.1"
    """Address of node 0."""
    master_port: int = Field(29500, ge=1, le=65535)
    """Rendezvous port on node 0."""
    device: Literal["auto", "npu", "cuda", "cpu"] = "auto"
    """Accelerator: auto picks npu, then cuda, then cpu."""
    hccl: HcclConfig = HcclConfig()
    """HCCL environment defaults."""
    min_output_free_gb: float = Field(1.0, ge=0)
    """Free space (GB, as os.disk_free counts them) the output directory's file system must have on every
    node before a multi-node launch starts; raise it to the size of the checkpoints you keep."""
    rendezvous_timeout_s: int = Field(300, ge=10)
    """Seconds torchrun's rendezvous waits for every node (torchrun --rdzv-conf timeout=): a node that
    cannot reach the master ends the job with a timeout instead of a wait without end."""


class PreflightConfig(_Section):
    """The ascend-check gate that must pass before training starts."""

    hosts: list[str] = []
    """Nodes to check (empty and no inventory: the local node)."""
    inventory: str | None = None
    """Ansible inventory file passed to ascend-check as -i."""
    command: str | None = None
    """Path of the ascend-check executable (default: next to the running Python)."""
    timeout_s: int = Field(900, ge=1)
    """Give up on the preflight after this long."""


class TrainConfig(_Section):
    """A whole training run. Every algorithm reads the sections it needs and ignores the others."""

    version: Literal[1] = CONFIG_VERSION
    """Config schema version."""
    seed: int = 0
    """Seed for data order, sampling and initialisation."""
    max_steps: int = Field(100, ge=1)
    """Optimiser steps to train for (PPO: one step = one rollout batch)."""
    batch_size: int = Field(8, ge=1)
    """Per-device batch: GRPO completions, PPO prompts, SFT/RM examples."""
    gradient_accumulation_steps: int = Field(1, ge=1)
    """Micro-batches accumulated per optimiser step (GRPO/SFT/RM)."""
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    """auto: bf16 where the device supports it, else fp32."""
    logging_steps: int = Field(1, ge=1)
    """Write metrics every N steps."""
    eval_every: int = Field(0, ge=0)
    """Evaluate held-out accuracy every N steps (0: only at the start and end)."""
    sniff_every: int = Field(0, ge=0)
    """Every N steps, time a short matmul and all-reduce on every rank and name a straggler rank and its host
    (training/sniff.py; 0: off; `--sniff-every N`)."""
    eval_max_examples: int = Field(64, ge=0)
    """Cap on held-out examples per evaluation."""
    save_every: int = Field(50, ge=1)
    """Checkpoint every N steps; a killed run loses at most this many."""
    keep_checkpoints: int = Field(2, ge=1)
    """Older checkpoints beyond this many are deleted."""
    max_length: int = Field(512, ge=8)
    """SFT/RM: sequences are truncated to this many tokens."""
    model: ModelConfig = Field(description="The model to train: a local directory or the tiny random model.")
    data: DataConfig = DataConfig()
    """Prompts and answers."""
    reward: RewardConfig = RewardConfig()
    """Reward functions (GRPO, PPO)."""
    generation: GenerationSettings = GenerationSettings()
    """Sampling settings (GRPO, PPO)."""
    grpo: GRPOSettings = GRPOSettings()
    """GRPO settings."""
    ppo: PPOSettings = PPOSettings()
    """PPO settings."""
    optim: OptimConfig = OptimConfig()
    """Optimiser."""
    rollout: RolloutSettings = RolloutSettings()
    """--engine verl: the rollout engine's parallelism and memory."""
    distributed: DistributedConfig = DistributedConfig()
    """Sharding."""
    launch: LaunchConfig = LaunchConfig()
    """Process launch and HCCL environment."""
    preflight: PreflightConfig = PreflightConfig()
    """The ascend-check gate."""


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"override {dotted}: '{key}' is not a section",
                              hint="set a field of the section instead, e.g. model.tiny.hidden_size=64 "
                              "(ascend-train schema)")
        node = child
    node[keys[-1]] = value


def parse_overrides(items: list[str] | tuple[str, ...]) -> list[tuple[str, Any]]:
    """`key.sub=value` strings -> (key, YAML-parsed value) pairs."""
    pairs = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value", hint="e.g. max_steps=20 grpo.beta=0.01")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({_first_line(exc)})",
                hint="write lists whole and quote them for the shell, e.g. 'reward.weights=[1.0, 0.5]'",
            ) from None
        pairs.append((key.strip(), value))
    return pairs


def _first_line(exc: yaml.YAMLError) -> str:
    """PyYAML's message without its multi-line source excerpt: 'expected ... (line 1, column 6)'."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return str(exc).splitlines()[0]


def resolve_config_path(name: str | os.PathLike) -> Path:
    """A file path, or the stem of a bundled config (`tiny`, `grpo-qwen2.5-7b-a2`, ...)."""
    path = Path(name)
    if path.is_file():
        return path
    bundled = BUNDLED_CONFIGS / f"{name}.yaml"
    if bundled.is_file():
        return bundled
    names = ", ".join(sorted(p.stem for p in BUNDLED_CONFIGS.glob("*.yaml")))
    raise ConfigError(f"config file not found: {name}", hint=f"give a YAML path or a bundled config: {names}")


def format_validation_error(exc: ValidationError) -> str:
    from ascend_ready.errors import validation_lines

    return "\n".join(validation_lines(exc, TrainConfig))


def load_config(path: str | os.PathLike | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a YAML config (a file or bundled name), apply overrides, validate. Raises ConfigError."""
    tree: dict[str, Any] = {}
    if path is not None:
        file = resolve_config_path(path)
        try:
            tree = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML: {_first_line(exc)}",
                              hint="fix the file; `ascend-train schema` lists every field") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{file}: not a YAML text file (byte {exc.start} is not UTF-8)",
                              hint="give a YAML config file or a bundled name such as tiny") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config {file}: {exc.strerror or exc}",
                              hint="give a readable YAML file or a bundled name such as tiny") from None
        if not isinstance(tree, dict):
            raise ConfigError(f"{file}: the top level must be a mapping",
                              hint="write the config as a YAML mapping of fields "
                              "(ascend-train schema lists them)")
    for key, value in parse_overrides(overrides):
        _set_dotted(tree, key, value)
    try:
        return TrainConfig.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(
            "invalid training config:\n" + format_validation_error(exc),
            hint="see `ascend-train schema` for every field",
        ) from exc


def dump_config(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
