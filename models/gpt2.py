"""GPT-2: transformers' GPT2Model and its Flax NNX twin on the same weights."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Conv1D, Embedding, LayerNorm, Scoped, attention, dropout, gelu_tanh, run_layers

ENTRY = Entry(
    "gpt2", "GPT-2 decoder (transformers GPT2Model); input token ids [batch, seq]",
    {"tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128),
     "base": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
     "narrow": dict(n_layer=12, n_embd=24, n_head=12, vocab_size=64, n_positions=64)},
    {"tiny": dict(batch=2, seq=16), "base": dict(batch=2, seq=64),
     "narrow": dict(batch=1, seq=4)}, loss="lm", layers="h",
    # Conv1D weights are [in, out]: c_attn (q|k|v fused) and c_fc split on their outputs, c_proj on its inputs.
    tensor_parallel={"attn.c_attn.weight": 1, "attn.c_attn.bias": 0, "attn.c_proj.weight": 0,
                     "mlp.c_fc.weight": 1, "mlp.c_fc.bias": 0, "mlp.c_proj.weight": 0})
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import GPT2Config

    return GPT2Config(**SIZES[size], bos_token_id=0, eos_token_id=0, attn_implementation="eager")


def torch_model(size: str):
    from transformers import GPT2Model

    from ._torch import positional

    return positional(GPT2Model, config(size), lambda out: out.last_hidden_state, use_cache=False)


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq > SIZES[size]["n_positions"]:
        raise ValueError(f"--seq {seq} exceeds GPT-2 {size}'s {SIZES[size]['n_positions']} positions")
    return {"input_ids": rng.integers(0, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}


class Attention(Scoped):
    def __init__(self, w, prefix, heads, cfg):
        super().__init__("attn")
        self.c_attn = Conv1D(w, f"{prefix}.c_attn", "c_attn")
        self.c_proj = Conv1D(w, f"{prefix}.c_proj", "c_proj")
        self.heads = heads
        self.rates = (cfg.get("attn_pdrop", 0.0), cfg.get("resid_pdrop", 0.0))  # attn_dropout, resid_dropout (none: 0)

    def __call__(self, x):
        with self.scoped():
            q, k, v = _split3(self.c_attn(x))
            ctx = attention(q, k, v, self.heads, causal=True, dropout_rate=self.rates[0], dropout_scope="attn_dropout")
            return dropout(self.c_proj(ctx), self.rates[1], "resid_dropout")


def _split3(x):
    d = x.shape[-1] // 3
    return x[..., :d], x[..., d:2 * d], x[..., 2 * d:]


class MLP(Scoped):
    def __init__(self, w, prefix, cfg):
        super().__init__("mlp")
        self.c_fc = Conv1D(w, f"{prefix}.c_fc", "c_fc")
        self.c_proj = Conv1D(w, f"{prefix}.c_proj", "c_proj")
        self.rate = cfg.get("resid_pdrop", 0.0)

    def __call__(self, x):
        with self.scoped():
            return dropout(self.c_proj(gelu_tanh(self.c_fc(x))), self.rate, "dropout")


class Block(Scoped):
    def __init__(self, w, prefix, cfg):
        super().__init__(prefix)
        eps = cfg["layer_norm_epsilon"]
        self.ln_1 = LayerNorm(w, f"{prefix}.ln_1", "ln_1", eps)
        self.attn = Attention(w, f"{prefix}.attn", cfg["n_head"], cfg)
        self.ln_2 = LayerNorm(w, f"{prefix}.ln_2", "ln_2", eps)
        self.mlp = MLP(w, f"{prefix}.mlp", cfg)

    def __call__(self, x):
        with self.scoped():
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))


class GPT2(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("")
        self.wte = Embedding(w, "wte", "wte")
        self.wpe = Embedding(w, "wpe", "wpe")
        self.h = nnx.List([Block(w, f"h.{i}", cfg) for i in range(cfg["n_layer"])])
        self.ln_f = LayerNorm(w, "ln_f", "ln_f", cfg["layer_norm_epsilon"])
        self.rate = cfg.get("embd_pdrop", 0.0)

    def __call__(self, input_ids):
        import jax.numpy as jnp

        positions = jnp.arange(input_ids.shape[1])[None, :]
        x = dropout(self.wte(input_ids) + self.wpe(positions), self.rate, "drop")
        x = run_layers(self.h, x)
        return self.ln_f(x)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    c = config(size)
    cfg = dict(SIZES[size], layer_norm_epsilon=c.layer_norm_epsilon, attn_pdrop=c.attn_pdrop,
               resid_pdrop=c.resid_pdrop, embd_pdrop=c.embd_pdrop)
    return GPT2(weights, cfg)


# At the end of the file: the captures' locations carry this file's line numbers.
LM_HEAD = "wte.weight"  # the training loss's output projection: the tied token embedding, as GPT2LMHeadModel's
