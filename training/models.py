"""Model and tokenizer loading from local directories; the tiny random Qwen model of the tests and demo.

Nothing here touches a model hub: paths must be directories on disk.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from ascend_ready.errors import ConfigError
from ascend_ready.runtime import Runtime, barrier, require
from ascend_ready.training.config import LoraConfig, TinyModelConfig, TrainConfig

# The tiny task only needs arithmetic; a 21-token vocabulary lets a random model find the format quickly.
TINY_CHARS = list("0123456789+-*=?.: ")
PAD, EOS, UNK = "<|endoftext|>", "<|im_end|>", "<unk>"


def build_tiny_tokenizer():
    """A character-level fast tokenizer that decodes back to the exact text (Fuse, not space-joined)."""
    tokenizers = require("tokenizers")
    transformers = require("transformers")
    vocab = {tok: i for i, tok in enumerate([PAD, EOS, UNK, *TINY_CHARS])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    tok.decoder = tokenizers.decoders.Fuse()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK, padding_side="left",
        # what a causal LM takes: transformers before 4.56 also returns token_type_ids by default, which
        # generate() refuses (the training sets of torch 2.0/2.1 hold 4.51 and 4.55)
        model_input_names=["input_ids", "attention_mask"],
    )


def build_tiny_model(directory: str | Path, shape: TinyModelConfig | None = None, seed: int = 0) -> Path:
    """Write a randomly initialised Qwen2/Qwen3 model and its tokenizer to `directory`; return it."""
    torch = require("torch")
    transformers = require("transformers")
    shape = shape or TinyModelConfig()
    tokenizer = build_tiny_tokenizer()
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_heads,
        intermediate_size=shape.intermediate_size,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    if shape.architecture == "qwen3":
        config = transformers.Qwen3Config(head_dim=shape.hidden_size // shape.num_heads, **common)
    else:
        config = transformers.Qwen2Config(**common)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config)
    set_generation_ids(model, tokenizer)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def set_generation_ids(model, tokenizer) -> None:
    """A model without a hub generation config would warn and guess; pin pad/eos from the tokenizer."""
    gen = model.generation_config
    gen.pad_token_id = tokenizer.pad_token_id
    gen.eos_token_id = tokenizer.eos_token_id
    gen.bos_token_id = getattr(tokenizer, "bos_token_id", None)
    model.config.pad_token_id = tokenizer.pad_token_id


def model_dir(cfg: TrainConfig, output_dir: Path, rt: Runtime | None = None) -> Path:
    """The local model directory for this run, building the tiny model first when the config asks for it."""
    if cfg.model.tiny is not None:
        target = Path(cfg.model.path) if cfg.model.path else output_dir / "tiny-model"
        if not (target / "config.json").is_file() and (rt is None or rt.is_main):
            build_tiny_model(target, cfg.model.tiny, seed=cfg.seed)
        if rt is not None:
            barrier(rt)
        return target
    return local_dir(cfg.model.path, "model.path")


def local_dir(path: str | None, field: str) -> Path:
    if not path:
        raise ConfigError(f"{field} is not set")
    p = Path(path).expanduser()
    if not (p / "config.json").is_file():
        raise ConfigError(
            f"{field}: {path} is not a local model directory (no config.json)",
            hint="download the weights beforehand (e.g. `huggingface-cli download` on a "
            "machine with access) and give the directory; nothing is fetched at run time",
        )
    return p


def load_tokenizer(path: Path):
    transformers = require("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    tok.padding_side = "left"  # decoder-only generation continues from the right edge
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def dtype_kwargs(dtype) -> dict:
    """`from_pretrained`'s dtype keyword for the installed transformers: `dtype` from 4.56 (which renamed
    it), `torch_dtype` before (the training sets of torch 2.0/2.1 hold 4.51 and 4.55; provision/
    training_sets.yml). The one place a caller of transformers' loading adapts to its version."""
    transformers = require("transformers")

    key = "dtype" if Version(transformers.__version__).release >= (4, 56) else "torch_dtype"
    return {key: dtype}


def torch_dtype(rt: Runtime):
    import torch

    return torch.bfloat16 if rt.bf16 else torch.float32


def load_causal_lm(path: Path, rt: Runtime, tokenizer=None, gradient_checkpointing: bool = False):
    transformers = require("transformers")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), **dtype_kwargs(torch_dtype(rt)))
    if tokenizer is not None:
        set_generation_ids(model, tokenizer)
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return model


def peft_config(lora: LoraConfig | None, task_type: str = "CAUSAL_LM"):
    if lora is None:
        return None
    peft = require("peft")
    return peft.LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type=task_type,
    )
