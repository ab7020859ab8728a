"""GPT-Neo: transformers' GPTNeoModel (global and local attention, alternating) and its Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Embedding, LayerNorm, Linear, Scoped, gelu_tanh

ENTRY = Entry(
    "gpt_neo", "GPT-Neo decoder (transformers GPTNeoModel: global and local attention layers alternating); "
               "input token ids [batch, seq]; 1.3b: GPT-Neo 1.3B's configuration",
    {"tiny": dict(num_layers=2, hidden_size=64, num_heads=4, vocab_size=512, max_position_embeddings=128,
                  attention_types=[[["global", "local"], 1]], window_size=4),
     "1.3b": dict(num_layers=24, hidden_size=2048, num_heads=16, vocab_size=50257, max_position_embeddings=2048,
                  attention_types=[[["global", "local"], 12]], window_size=256)},
    {"tiny": dict(batch=2, seq=16), "1.3b": dict(batch=1, seq=128)}, loss="lm")
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import GPTNeoConfig

    return GPTNeoConfig(**SIZES[size], bos_token_id=0, eos_token_id=0, attn_implementation="eager")


def torch_model(size: str):
    from transformers import GPTNeoModel

    from ._torch import positional

    return positional(GPTNeoModel, config(size), lambda out: out.last_hidden_state, use_cache=False)


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq > SIZES[size]["max_position_embeddings"]:
        raise ValueError(f"--seq {seq} exceeds GPT-Neo {size}'s {SIZES[size]['max_position_embeddings']} positions")
    return {"input_ids": rng.integers(0, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}


class SelfAttention(Scoped):
    """GPTNeoSelfAttention: no 1/sqrt(d) scaling, scores in float32; a local layer sees only the last
    `window` positions (a sliding causal window)."""

    def __init__(self, w, prefix, heads, window):
        super().__init__("attention")
        self.q_proj = Linear(w, f"{prefix}.q_proj", "q_proj", bias=False)
        self.k_proj = Linear(w, f"{prefix}.k_proj", "k_proj", bias=False)
        self.v_proj = Linear(w, f"{prefix}.v_proj", "v_proj", bias=False)
        self.out_proj = Linear(w, f"{prefix}.out_proj", "out_proj")
        self.heads, self.window = heads, window

    def __call__(self, x):
        import jax
        import jax.numpy as jnp

        with self.scoped():
            b, t, d = x.shape
            hd = d // self.heads

            def split(y):
                return y.reshape(b, t, self.heads, hd).transpose(0, 2, 1, 3)

            q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
            scores = jnp.matmul(q.astype(jnp.float32), k.astype(jnp.float32).transpose(0, 1, 3, 2))
            i, j = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
            mask = j <= i if self.window is None else (j <= i) & (j > i - self.window)
            scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
            probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
            ctx = jnp.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, t, d)
            return self.out_proj(ctx)


class Attn(Scoped):
    def __init__(self, w, prefix, heads, window):
        super().__init__("attn")
        self.attention = SelfAttention(w, f"{prefix}.attention", heads, window)

    def __call__(self, x):
        with self.scoped():
            return self.attention(x)


class MLP(Scoped):
    def __init__(self, w, prefix):
        super().__init__("mlp")
        self.c_fc = Linear(w, f"{prefix}.c_fc", "c_fc")
        self.c_proj = Linear(w, f"{prefix}.c_proj", "c_proj")

    def __call__(self, x):
        with self.scoped():
            return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(Scoped):
    def __init__(self, w, prefix, cfg, window):
        super().__init__(prefix)
        eps = cfg["layer_norm_epsilon"]
        self.ln_1 = LayerNorm(w, f"{prefix}.ln_1", "ln_1", eps)
        self.attn = Attn(w, f"{prefix}.attn", cfg["num_heads"], window)
        self.ln_2 = LayerNorm(w, f"{prefix}.ln_2", "ln_2", eps)
        self.mlp = MLP(w, f"{prefix}.mlp")

    def __call__(self, x):
        with self.scoped():
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))


class GPTNeo(Scoped):
    def __init__(self, w, cfg, layer_types):
        from flax import nnx

        super().__init__("")
        self.wte = Embedding(w, "wte", "wte")
        self.wpe = Embedding(w, "wpe", "wpe")
        self.h = nnx.List([Block(w, f"h.{i}", cfg, cfg["window_size"] if kind == "local" else None)
                           for i, kind in enumerate(layer_types)])
        self.ln_f = LayerNorm(w, "ln_f", "ln_f", cfg["layer_norm_epsilon"])

    def __call__(self, input_ids):
        import jax.numpy as jnp

        positions = jnp.arange(input_ids.shape[1])[None, :]
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    cfg = config(size)
    return GPTNeo(weights, dict(SIZES[size], layer_norm_epsilon=cfg.layer_norm_epsilon), cfg.attention_layers)


# At the end of the file: the captures' locations carry this file's line numbers.
LM_HEAD = "wte.weight"  # the training loss's output projection: the tied token embedding, as GPTNeoForCausalLM's
