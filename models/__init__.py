"""Model adapters: each builds a PyTorch model, its Flax NNX twin on the same weights, and inputs.

This file is the catalogue (plain data, no framework import, so `stackwars-ir models` is
instant). An adapter module (`gpt2.py`, ...) defines `torch_model(size)`,
`inputs(size, batch, seq, rng)` and `jax_model(size, weights)`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType


@dataclass(frozen=True)
class Entry:
    """What an adapter offers: its sizes (config values) and default input shape per size."""

    name: str
    description: str
    sizes: dict = field(repr=False)
    shapes: dict = field(repr=False)  # size -> {"batch": N, "seq": N}
    seq_meaning: str = "sequence length"
    unsupported: dict = field(default_factory=dict, repr=False)  # exporter -> why it cannot export this model
    # Training step's loss: "lm" (next-token cross-entropy through the tied embedding), "mse" (mean
    # squared error of the output against a seeded normal target), None (nothing to train).
    loss: str | None = "mse"
    train_unsupported: dict = field(default_factory=dict, repr=False)  # exporter -> why no training step


CATALOG = {
    "gpt2": Entry(
        "gpt2", "GPT-2 decoder (transformers GPT2Model); input token ids [batch, seq]",
        {"tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128),
         "base": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)},
        {"tiny": dict(batch=2, seq=16), "base": dict(batch=2, seq=64)}, loss="lm"),
    "bert": Entry(
        "bert", "BERT encoder (transformers BertModel, no pooler); input token ids [batch, seq]",
        {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256,
                      vocab_size=512, max_position_embeddings=128),
         "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                      vocab_size=30522, max_position_embeddings=512)},
        {"tiny": dict(batch=2, seq=16), "base": dict(batch=2, seq=64)}),
    "resnet50": Entry(
        "resnet50", "ResNet-50 (transformers ResNetModel, pooled output); input images [batch, 3, seq, seq]",
        {"tiny": dict(embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1]),
         "base": dict(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3])},
        {"tiny": dict(batch=2, seq=32), "base": dict(batch=2, seq=224)}, seq_meaning="image size",
        train_unsupported={"torch_xla": "torch_xla 2.9's batch-norm backward fails in eval mode (\"The size of "
                                        "mean should be compatible with feature count, but the size of offset "
                                        "factor is 0\")",
                           "torchax": "torchax 0.0.13 computes max-pool indices with a generic reduce_window over "
                                      "(indices, values), which JAX cannot differentiate (\"Linearization failed "
                                      "to produce known values for all output primals\")"}),
    "gemm": Entry(
        "gemm", "one matrix multiply x @ W ([batch*seq, d] x [d, d]), the study's GEMM",
        {"tiny": dict(d=64), "base": dict(d=1024)},
        {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128)}),
    "ffn": Entry(
        "ffn", "feed-forward block Linear-GELU-Linear on [batch, seq, d], the study's FFN",
        {"tiny": dict(d=64, hidden=256), "base": dict(d=768, hidden=3072)},
        {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128)}),
    "mha": Entry(
        "mha", "multi-head self-attention (q, k, v, out projections) on [batch, seq, d], the study's MHA",
        {"tiny": dict(d=64, heads=4), "base": dict(d=768, heads=12)},
        {"tiny": dict(batch=2, seq=16), "base": dict(batch=8, seq=128)}),
    "llama": Entry(
        "llama", "LLaMA decoder (transformers LlamaModel: RMSNorm, llama3 rotary, grouped-query attention, SwiGLU); "
                 "input token ids [batch, seq]; 8b: LLaMA-3.1-8B's configuration",
        {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=128, vocab_size=512, max_position_embeddings=128, rms_norm_eps=1e-5,
                      rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=32)),
         "8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                    intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                    rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=8192))},
        {"tiny": dict(batch=2, seq=16), "8b": dict(batch=1, seq=128)}, loss="lm"),
    "vit": Entry(
        "vit", "ViT encoder (transformers ViTModel, no pooler); input images [batch, 3, seq, seq]; base: ViT-B/16",
        {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                      image_size=32, patch_size=8),
         "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                      image_size=224, patch_size=16)},
        {"tiny": dict(batch=2, seq=32), "base": dict(batch=2, seq=224)}, seq_meaning="image size"),
    "gpt_neo": Entry(
        "gpt_neo", "GPT-Neo decoder (transformers GPTNeoModel: global and local attention layers alternating); "
                   "input token ids [batch, seq]; 1.3b: GPT-Neo 1.3B's configuration",
        {"tiny": dict(num_layers=2, hidden_size=64, num_heads=4, vocab_size=512, max_position_embeddings=128,
                      attention_types=[[["global", "local"], 1]], window_size=4),
         "1.3b": dict(num_layers=24, hidden_size=2048, num_heads=16, vocab_size=50257, max_position_embeddings=2048,
                      attention_types=[[["global", "local"], 12]], window_size=256)},
        {"tiny": dict(batch=2, seq=16), "1.3b": dict(batch=1, seq=128)}, loss="lm"),
    # Seed 002's basic workloads: small (tiny) and large (base) as that benchmark sized them.
    "elementwise": Entry(
        "elementwise", "element-wise chain sin(a * b + a) + b on two [batch, n] arrays (seed 002's add, multiply, sine)",
        {"tiny": {}, "base": {}},
        {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n", loss=None),
    "matmul": Entry(
        "matmul", "square matrix multiply A @ B, both [batch, n, n] inputs (seed 002's matmul)",
        {"tiny": {}, "base": {}},
        {"tiny": dict(batch=1, seq=100), "base": dict(batch=1, seq=2000)}, seq_meaning="matrix size n", loss=None),
    "matmul_skinny": Entry(
        "matmul_skinny", "tall-skinny multiply A @ B, A [batch, m, k], B [batch, k, 8] (memory-bound)",
        {"tiny": dict(k=64, n=8), "base": dict(k=1024, n=8)},
        {"tiny": dict(batch=1, seq=256), "base": dict(batch=1, seq=4096)}, seq_meaning="rows m", loss=None),
    "fft": Entry(
        "fft", "real FFT magnitude |rfft(x)| (orthonormal) of [batch, n] (seed 002's FFT)",
        {"tiny": {}, "base": {}},
        {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n",
        unsupported={"torch_xla": "torch_xla 2.9 cannot capture aten::_fft_r2c (\"ops not capturable by "
                                  "Pytorch/XLA\")"}, loss=None),
    "sort": Entry(
        "sort", "sort along the last axis of [batch, n] (seed 002's sort)",
        {"tiny": {}, "base": {}},
        {"tiny": dict(batch=1, seq=1000), "base": dict(batch=1, seq=1_000_000)}, seq_meaning="elements n", loss=None),
}
ADAPTERS = tuple(CATALOG)
TRAINABLE = tuple(n for n, e in CATALOG.items() if e.loss)
WORKLOADS = ("elementwise", "matmul", "matmul_skinny", "fft", "sort")
SIZE_NAMES = ("tiny", "base")  # most adapters'; an entry's own sizes are its `sizes` keys


def entry(name: str) -> Entry:
    from stackwars_ir.errors import StackwarsError

    if name not in CATALOG:
        import difflib

        close = difflib.get_close_matches(name, ADAPTERS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise StackwarsError(f"unknown model {name!r}", fix=f"{hint}choose one of: {', '.join(ADAPTERS)}")
    return CATALOG[name]


def exporters_for(name: str, exporters, step: str = "forward") -> tuple[tuple, dict]:
    """The exporters of `exporters` that can export model `name` (its training step, for "train"),
    and why the others cannot."""
    unsupported = {**entry(name).unsupported, **(entry(name).train_unsupported if step == "train" else {})}
    return tuple(e for e in exporters if e not in unsupported), \
        {e: unsupported[e] for e in exporters if e in unsupported}


def adapter(name: str) -> ModuleType:
    """The adapter module for `name` (imports jax and flax)."""
    entry(name)
    return importlib.import_module(f"{__name__}.{name}")
