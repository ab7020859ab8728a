"""transformers models built from a model type and a tiny config, for adapters of PyTorch-only architectures (the zoo)."""
from __future__ import annotations

import numpy as np


def auto_model(model_type: str, config: dict, pick: str = "last_hidden_state"):
    """transformers' base model of `model_type` (AutoModel) on `config`, random weights seeded, eager
    attention, no dropout, its forward taking one positional tensor and returning `pick` of its output.
    A model that offers a pooler has none unless `pick` is its output: weights the output never reads
    (a training step would hold them constant, as AdamW does a parameter without a gradient)."""
    import inspect

    import torch
    from transformers import AutoConfig, AutoModel

    from ._torch import positional

    cfg = AutoConfig.for_model(model_type, **config, attn_implementation="eager")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                 "resid_pdrop", "embd_pdrop", "attn_pdrop", "hidden_dropout", "activation_dropout"):
        if hasattr(cfg, name) and isinstance(getattr(cfg, name), float):
            setattr(cfg, name, 0.0)
    torch.manual_seed(0)
    cls = type(AutoModel.from_config(cfg))
    torch.manual_seed(0)
    fixed = {"use_cache": False} if getattr(cfg, "use_cache", None) is not None else {}
    init = {"add_pooling_layer": pick == "pooler_output"} \
        if "add_pooling_layer" in inspect.signature(cls.__init__).parameters else {}
    return positional(cls, cfg, lambda out: getattr(out, pick), init, **fixed)


def token_ids(config: dict, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Token ids [batch, seq] in [3, vocab_size) (0-2 are the configs' special tokens)."""
    limit = config.get("max_position_embeddings")
    if limit is not None and seq > limit:
        raise ValueError(f"--seq {seq} exceeds this configuration's {limit} positions")
    return {"input_ids": rng.integers(3, config["vocab_size"], (batch, seq), dtype=np.int64)}


def pixels(config: dict, batch: int, size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Images [batch, channels, size, size], standard normal."""
    return {"pixel_values": rng.standard_normal((batch, config.get("num_channels", 3), size, size), dtype=np.float32)}
