"""Held-out accuracy: greedy completions of the evaluation prompts, judged by the numeric answer match.

Every rank runs it on the same rows (sharded weights need all ranks in the forward pass); rank 0 logs.
"""

from __future__ import annotations

from collections.abc import Sequence

from ascend_ready.training.rewards import answer_match


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    *,
    do_sample: bool,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_prompt_length: int | None = None,
):
    """Left-padded batch generation -> (prompt_ids, completion_ids, completion texts)."""
    import torch

    enc = tokenizer(
        list(prompts),
        return_tensors="pt",
        padding=True,
        truncation=max_prompt_length is not None,
        max_length=max_prompt_length,
        add_special_tokens=False,
    )
    enc = {k: v.to(model.device) for k, v in enc.items()}
    kwargs = {
        "do_sample": do_sample,
        "max_new_tokens": max_new_tokens,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if do_sample:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
    with torch.no_grad():
        out = model.generate(**enc, **kwargs)
    completion_ids = out[:, enc["input_ids"].shape[1] :]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    return enc, completion_ids, texts


def accuracy(model, tokenizer, rows: Sequence[dict], max_new_tokens: int, batch_size: int = 64) -> float:
    """Fraction of rows whose greedy completion carries the reference answer."""
    if not rows:
        return float("nan")
    was_training = model.training
    model.eval()
    correct = 0.0
    try:
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            prompts = [r["prompt"] for r in chunk]
            _, _, texts = generate(model, tokenizer, prompts, max_new_tokens, do_sample=False)
            correct += sum(answer_match(prompts, texts, answer=[r["answer"] for r in chunk]))
    finally:
        model.train(was_training)
    return correct / len(rows)
