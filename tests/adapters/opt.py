"""A user's adapter for a model outside the catalogue: transformers' OPTModel and its Flax NNX twin."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry
from stackwars_ir.models._nnx import Embedding, LayerNorm, Linear, Scoped

ENTRY = Entry(
    "opt", "OPT decoder (transformers OPTModel: learned positions offset by 2, pre-norm, ReLU MLP fc1/fc2); "
           "input token ids [batch, seq]",
    {"tiny": dict(num_hidden_layers=2, hidden_size=64, ffn_dim=128, num_attention_heads=4, vocab_size=512,
                  max_position_embeddings=64, word_embed_proj_dim=64)},
    {"tiny": dict(batch=2, seq=16)},
    loss="lm",
    # OPT's layer calls its norms `self_attn_layer_norm` and `final_layer_norm`: words of the generic
    # table already (norm); fc1/fc2 are generic MLP words too. Nothing to add.
)
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import OPTConfig

    return OPTConfig(**SIZES[size], pad_token_id=1, attn_implementation="eager", dropout=0.0,
                     attention_dropout=0.0)


def torch_model(size: str):
    from transformers import OPTModel

    from stackwars_ir.models._torch import positional

    return positional(OPTModel, config(size), lambda out: out.last_hidden_state, use_cache=False)


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq > SIZES[size]["max_position_embeddings"]:
        raise ValueError(f"--seq {seq} exceeds OPT {size}'s {SIZES[size]['max_position_embeddings']} positions")
    return {"input_ids": rng.integers(2, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}


class Attention(Scoped):
    """OPTAttention: q scaled by 1/sqrt(head_dim) before the scores, causal."""

    def __init__(self, w, prefix, heads):
        super().__init__("self_attn")
        self.q_proj = Linear(w, f"{prefix}.q_proj", "q_proj")
        self.k_proj = Linear(w, f"{prefix}.k_proj", "k_proj")
        self.v_proj = Linear(w, f"{prefix}.v_proj", "v_proj")
        self.out_proj = Linear(w, f"{prefix}.out_proj", "out_proj")
        self.heads = heads

    def __call__(self, x):
        import jax
        import jax.numpy as jnp

        with self.scoped():
            b, t, d = x.shape
            hd = d // self.heads

            def split(y):
                return y.reshape(b, t, self.heads, hd).transpose(0, 2, 1, 3)

            q = split(self.q_proj(x) * hd ** -0.5)
            k, v = split(self.k_proj(x)), split(self.v_proj(x))
            scores = jnp.matmul(q, k.transpose(0, 1, 3, 2))
            mask = jnp.tril(jnp.ones((t, t), dtype=bool))
            scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
            ctx = jnp.matmul(jax.nn.softmax(scores, axis=-1), v).transpose(0, 2, 1, 3).reshape(b, t, d)
            return self.out_proj(ctx)


class Layer(Scoped):
    """OPTDecoderLayer, pre-norm; its MLP half runs on [batch * seq, d], as OPT's own reshape does."""

    def __init__(self, w, prefix, heads):
        super().__init__(prefix.removeprefix("decoder."))  # under the decoder's own scope
        self.self_attn_layer_norm = LayerNorm(w, f"{prefix}.self_attn_layer_norm", "self_attn_layer_norm", 1e-5)
        self.self_attn = Attention(w, f"{prefix}.self_attn", heads)
        self.final_layer_norm = LayerNorm(w, f"{prefix}.final_layer_norm", "final_layer_norm", 1e-5)
        self.fc1 = Linear(w, f"{prefix}.fc1", "fc1")
        self.fc2 = Linear(w, f"{prefix}.fc2", "fc2")

    def __call__(self, x):
        import jax
        import jax.numpy as jnp

        with self.scoped():
            x = x + self.self_attn(self.self_attn_layer_norm(x))
            shape = x.shape
            flat = x.reshape(-1, shape[-1])
            h = self.fc1(self.final_layer_norm(flat))
            with jax.named_scope("activation_fn"):  # OPTDecoderLayer.activation_fn, a module of its own
                h = jnp.maximum(h, 0.0)
            h = self.fc2(h)
            return (flat + h).reshape(shape)


class Decoder(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("decoder")
        self.embed_tokens = Embedding(w, "decoder.embed_tokens", "embed_tokens")
        self.embed_positions = Embedding(w, "decoder.embed_positions", "embed_positions")
        self.layers = nnx.List([Layer(w, f"decoder.layers.{i}", cfg["num_attention_heads"])
                                for i in range(cfg["num_hidden_layers"])])
        self.final_layer_norm = LayerNorm(w, "decoder.final_layer_norm", "final_layer_norm", 1e-5)

    def __call__(self, input_ids):
        import jax.numpy as jnp

        with self.scoped():
            positions = jnp.arange(input_ids.shape[1])[None, :] + 2  # OPT's learned positions are offset by 2
            x = self.embed_tokens(input_ids) + self.embed_positions(positions)
            for layer in self.layers:
                x = layer(x)
            return self.final_layer_norm(x)


class OPT(Scoped):
    def __init__(self, w, cfg):
        super().__init__("")
        self.decoder = Decoder(w, cfg)

    def __call__(self, input_ids):
        return self.decoder(input_ids)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return OPT(weights, SIZES[size])


LM_HEAD = "decoder.embed_tokens.weight"  # the tied token embedding, as OPTForCausalLM's
