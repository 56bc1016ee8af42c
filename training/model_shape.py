"""A decoder's size from its Hugging Face `config.json`: parameters per component (dense, MoE, LoRA), the KV
cache per token and activations per layer, the inputs of the memory model (formulas: memory_costs)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascend_ready.errors import ConfigError

__all__ = ["ModelShape", "load_model_shape"]


@dataclass(frozen=True)
class ModelShape:
    """The config.json values that decide a decoder's size."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    moe_layers: int = 0
    attention_bias: bool = False
    qk_norm: bool = False
    gated_mlp: bool = True

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any], name: str = "model") -> ModelShape:
        """Read a Hugging Face `config.json` (dense Qwen2/Qwen3/Llama, MoE Qwen3-MoE/Qwen2-MoE/Mixtral)."""
        try:
            h = int(cfg["hidden_size"])
            layers = int(cfg["num_hidden_layers"])
            heads = int(cfg["num_attention_heads"])
            vocab = int(cfg["vocab_size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{name}: config.json lacks {exc}",
                              hint="give the model's own config.json (hidden_size, num_hidden_layers, ...)"
                              ) from None
        model_type = str(cfg.get("model_type", ""))
        experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
                      or 0)
        moe_layers = 0
        if experts:
            step = int(cfg.get("decoder_sparse_step") or 1)
            dense_only = set(cfg.get("mlp_only_layers") or [])
            first_dense = int(cfg.get("first_k_dense_replace") or 0)
            moe_layers = sum(1 for i in range(layers)
                             if i not in dense_only and i >= first_dense and (i + 1) % step == 0)
        return cls(
            name=name,
            hidden_size=h,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(cfg.get("head_dim") or h // heads),
            intermediate_size=int(cfg.get("intermediate_size") or 4 * h),
            vocab_size=vocab,
            # PretrainedConfig's default is True; Qwen/Llama config.json files always state it.
            tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            num_experts=experts,
            experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
            moe_intermediate_size=int(cfg.get("moe_intermediate_size") or
                                      (cfg.get("intermediate_size") if experts else 0) or 0),
            shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
            moe_layers=moe_layers,
            attention_bias=bool(cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
            qk_norm=model_type.startswith("qwen3"),
            gated_mlp=str(cfg.get("hidden_act", "silu")) in ("silu", "swiglu", "gelu_pytorch_tanh"),
        )

    # sizes -----------------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    def attention_params(self) -> int:
        h = self.hidden_size
        n = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        if self.attention_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            n += 2 * self.head_dim
        return n + 2 * h  # the two RMSNorms of the layer

    def _mlp(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * width

    def dense_mlp_params(self) -> int:
        return self._mlp(self.intermediate_size)

    def expert_params_per_layer(self) -> int:
        """All routed experts of one MoE layer."""
        return self.num_experts * self._mlp(self.moe_intermediate_size)

    def moe_shared_params_per_layer(self) -> int:
        """What a MoE layer holds besides its routed experts: the router and a shared expert."""
        n = self.hidden_size * self.num_experts
        if self.shared_expert_intermediate_size:
            n += self._mlp(self.shared_expert_intermediate_size) + self.hidden_size
        return n

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2) + self.hidden_size

    def expert_params(self) -> int:
        """Weights that expert parallelism splits (every routed expert of every MoE layer)."""
        return self.moe_layers * self.expert_params_per_layer()

    def dense_params(self) -> int:
        """Everything else: attention, dense MLPs, routers, shared experts, embeddings."""
        dense_layers = self.num_layers - self.moe_layers
        return (self.num_layers * self.attention_params() + dense_layers * self.dense_mlp_params()
                + self.moe_layers * self.moe_shared_params_per_layer() + self.embedding_params())

    def total_params(self) -> int:
        return self.dense_params() + self.expert_params()

    def active_params(self) -> int:
        """Parameters one token passes through (k of E experts)."""
        if not self.is_moe:
            return self.total_params()
        per_expert = self._mlp(self.moe_intermediate_size)
        return self.dense_params() + self.moe_layers * self.experts_per_token * per_expert

    def largest_layer_params(self) -> int:
        moe = self.attention_params() + self.moe_shared_params_per_layer() + self.expert_params_per_layer()
        dense = self.attention_params() + self.dense_mlp_params()
        return max(moe if self.is_moe else 0, dense if self.num_layers > self.moe_layers else 0)

    def lora_params(self, rank: int) -> int:
        """Adapters on q,k,v,o and every MLP projection (dense, shared and routed experts)."""
        h, r = self.hidden_size, rank
        attn = r * ((h + self.q_dim) * 2 + (h + self.kv_dim) * 2)
        mlp_proj = 3 if self.gated_mlp else 2

        def mlp(width: int) -> int:
            return mlp_proj * r * (h + width)

        per_moe = self.num_experts * mlp(self.moe_intermediate_size) + (
            mlp(self.shared_expert_intermediate_size) if self.shared_expert_intermediate_size else 0)
        dense_layers = self.num_layers - self.moe_layers
        return (self.num_layers * attn + dense_layers * mlp(self.intermediate_size)
                + self.moe_layers * per_moe)

    def kv_bytes_per_token(self, dtype_bytes: int = 2, tp: int = 1) -> int:
        """KV cache per token on one device of a tensor-parallel group of `tp` (vLLM)."""
        return 2 * self.num_layers * math.ceil(self.num_kv_heads / tp) * self.head_dim * dtype_bytes

    def activation_bytes_per_layer(self, seq: int, batch: int, *, tp: int = 1, flash: bool = True,
                                   dtype_bytes: int = 2) -> float:
        """Korthikanti et al. eq. 2/5, term by term (see the module docstring); 16-bit for dtype_bytes=2."""
        s, b, h, a = seq, batch, self.hidden_size, self.num_heads
        scale = dtype_bytes / 2  # the paper's byte counts assume 16-bit activations
        attention = (2 * h + 2 * (self.q_dim + self.kv_dim) + 2 * self.kv_dim + 2 * self.q_dim + h) * s * b
        scores = 0 if flash else 5 * a * s * s * b
        if self.is_moe:
            width = self.experts_per_token * self.moe_intermediate_size + self.shared_expert_intermediate_size
        else:
            width = self.intermediate_size
        mlp = (2 * h + (8 if self.gated_mlp else 4) * width + h) * s * b
        norms = 4 * s * b * h
        return scale * (attention + scores + mlp + norms) / tp


def load_model_shape(path: str | Path) -> ModelShape:
    """A ModelShape from a model directory (its config.json) or a config.json file."""
    p = Path(path)
    file = p / "config.json" if p.is_dir() else p
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}", hint="give a model directory with a config.json"
                          ) from None
    return ModelShape.from_hf_config(data, name=p.name if p.is_dir() else p.stem.removesuffix(".config"))
