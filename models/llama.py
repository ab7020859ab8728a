"""LLaMA: transformers' LlamaModel (RMSNorm, llama3 rotary, grouped-query attention, SwiGLU) and its Flax NNX twin."""
from __future__ import annotations

import math

import numpy as np

from . import Entry
from ._nnx import Embedding, Linear, RMSNorm, Scoped, param, run_layers

ENTRY = Entry(
    "llama", "LLaMA decoder (transformers LlamaModel: RMSNorm, llama3 rotary, grouped-query attention, SwiGLU); "
             "input token ids [batch, seq]; 1b: LLaMA-3.2-1B's configuration, 8b: LLaMA-3.1-8B's",
    {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=128, vocab_size=512, max_position_embeddings=128, rms_norm_eps=1e-5,
                  rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=32)),
     "1b": dict(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32, num_key_value_heads=8,
                intermediate_size=8192, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=8192)),
     "8b": dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, rms_norm_eps=1e-5,
                rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=8192))},
    {"tiny": dict(batch=2, seq=16), "1b": dict(batch=1, seq=128), "8b": dict(batch=1, seq=128)}, loss="lm", layers="layers",
    tensor_parallel={"q_proj.weight": 0, "k_proj.weight": 0, "v_proj.weight": 0, "o_proj.weight": 1,
                     "gate_proj.weight": 0, "up_proj.weight": 0, "down_proj.weight": 1})
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import LlamaConfig

    return LlamaConfig(**SIZES[size], attn_implementation="eager", bos_token_id=0, eos_token_id=0)


def torch_model(size: str):
    from transformers import LlamaModel

    from ._torch import positional

    return positional(LlamaModel, config(size), lambda out: out.last_hidden_state, use_cache=False)


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq > SIZES[size]["max_position_embeddings"]:
        raise ValueError(f"--seq {seq} exceeds LLaMA {size}'s {SIZES[size]['max_position_embeddings']} positions")
    return {"input_ids": rng.integers(0, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}


def _rotate_half(x):
    import jax.numpy as jnp

    half = x.shape[-1] // 2
    return jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)


class Attention(Scoped):
    def __init__(self, w, prefix, cfg):
        super().__init__("self_attn")
        self.q_proj = Linear(w, f"{prefix}.q_proj", "q_proj", bias=False)
        self.k_proj = Linear(w, f"{prefix}.k_proj", "k_proj", bias=False)
        self.v_proj = Linear(w, f"{prefix}.v_proj", "v_proj", bias=False)
        self.o_proj = Linear(w, f"{prefix}.o_proj", "o_proj", bias=False)
        self.heads, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]

    def __call__(self, x, cos, sin):
        import jax
        import jax.numpy as jnp

        with self.scoped():
            b, t, d = x.shape
            hd = d // self.heads

            def heads(y, n):
                return y.reshape(b, t, n, hd).transpose(0, 2, 1, 3)

            q = heads(self.q_proj(x), self.heads)
            k = heads(self.k_proj(x), self.kv_heads)
            v = heads(self.v_proj(x), self.kv_heads)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            rep = self.heads // self.kv_heads  # grouped-query attention: each KV head serves `rep` query heads
            k, v = jnp.repeat(k, rep, axis=1), jnp.repeat(v, rep, axis=1)
            scores = jnp.matmul(q, k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
            probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(q.dtype)
            ctx = jnp.matmul(probs, v).transpose(0, 2, 1, 3).reshape(b, t, d)
            return self.o_proj(ctx)


class MLP(Scoped):
    def __init__(self, w, prefix):
        super().__init__("mlp")
        self.gate_proj = Linear(w, f"{prefix}.gate_proj", "gate_proj", bias=False)
        self.up_proj = Linear(w, f"{prefix}.up_proj", "up_proj", bias=False)
        self.down_proj = Linear(w, f"{prefix}.down_proj", "down_proj", bias=False)

    def __call__(self, x):
        import jax

        with self.scoped():
            return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class Layer(Scoped):
    def __init__(self, w, prefix, cfg):
        super().__init__(prefix)
        eps = cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(w, f"{prefix}.input_layernorm", "input_layernorm", eps)
        self.self_attn = Attention(w, f"{prefix}.self_attn", cfg)
        self.post_attention_layernorm = RMSNorm(w, f"{prefix}.post_attention_layernorm", "post_attention_layernorm", eps)
        self.mlp = MLP(w, f"{prefix}.mlp")

    def __call__(self, x, cos, sin):
        with self.scoped():
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))


class Rotary(Scoped):
    """LlamaRotaryEmbedding: cos and sin of positions x inv_freq (llama3-scaled, a buffer), computed once."""

    def __init__(self, w):
        super().__init__("rotary_emb")
        self.inv_freq = param(w, "rotary_emb.inv_freq")

    def __call__(self, t, dtype):
        import jax.numpy as jnp

        with self.scoped():
            freqs = jnp.arange(t, dtype=jnp.float32)[None, :, None] * self.inv_freq[...].astype(jnp.float32)
            emb = jnp.concatenate([freqs, freqs], axis=-1)
            return jnp.cos(emb).astype(dtype)[:, None], jnp.sin(emb).astype(dtype)[:, None]


class Llama(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("")
        self.embed_tokens = Embedding(w, "embed_tokens", "embed_tokens")
        self.rotary_emb = Rotary(w)
        self.layers = nnx.List([Layer(w, f"layers.{i}", cfg) for i in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(w, "norm", "norm", cfg["rms_norm_eps"])

    def __call__(self, input_ids):
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(input_ids.shape[1], x.dtype)
        x = run_layers(self.layers, x, cos, sin)
        return self.norm(x)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    cfg = config(size)
    return Llama(weights, dict(SIZES[size], rms_norm_eps=cfg.rms_norm_eps))


# At the end of the file: the captures' locations carry this file's line numbers.
LM_HEAD = "embed_tokens.weight"  # the training loss's output projection: the token embedding, tied (as LLaMA-3.2 1B)
