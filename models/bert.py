"""BERT: transformers' BertModel (no pooler) and its Flax NNX twin on the same weights."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Embedding, LayerNorm, Linear, Scoped, attention, dropout, gelu_erf, run_layers

ENTRY = Entry(
    "bert", "BERT encoder (transformers BertModel, no pooler); input token ids [batch, seq]",
    {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256,
                  vocab_size=512, max_position_embeddings=128),
     "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                  vocab_size=30522, max_position_embeddings=512),
     "narrow": dict(num_hidden_layers=12, hidden_size=24, num_attention_heads=12, intermediate_size=48,
                    vocab_size=64, max_position_embeddings=64)},
    {"tiny": dict(batch=2, seq=16), "base": dict(batch=2, seq=64), "narrow": dict(batch=1, seq=4)},
    roles={"output": "mlp"},  # transformers' layer.N.output: the MLP's second half
    layers="encoder.layer")
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import BertConfig

    return BertConfig(**SIZES[size], attn_implementation="eager")


def torch_model(size: str):
    from transformers import BertModel

    from ._torch import positional

    return positional(BertModel, config(size), lambda out: out.last_hidden_state,
                      init={"add_pooling_layer": False})


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq > SIZES[size]["max_position_embeddings"]:
        raise ValueError(f"--seq {seq} exceeds BERT {size}'s {SIZES[size]['max_position_embeddings']} positions")
    return {"input_ids": rng.integers(0, SIZES[size]["vocab_size"], (batch, seq), dtype=np.int64)}


class Embeddings(Scoped):
    def __init__(self, w, eps, rate):
        super().__init__("embeddings")
        self.rate = rate
        self.word_embeddings = Embedding(w, "embeddings.word_embeddings", "word_embeddings")
        self.position_embeddings = Embedding(w, "embeddings.position_embeddings", "position_embeddings")
        self.token_type_embeddings = Embedding(w, "embeddings.token_type_embeddings", "token_type_embeddings")
        self.LayerNorm = LayerNorm(w, "embeddings.LayerNorm", "LayerNorm", eps)

    def __call__(self, ids):
        import jax.numpy as jnp

        with self.scoped():
            positions = jnp.arange(ids.shape[1])[None, :]
            x = self.word_embeddings(ids) + self.token_type_embeddings(jnp.zeros_like(ids))
            return dropout(self.LayerNorm(x + self.position_embeddings(positions)), self.rate, "dropout")


class SelfAttention(Scoped):
    def __init__(self, w, prefix, heads, rate):
        super().__init__("self")
        self.rate = rate
        self.query = Linear(w, f"{prefix}.query", "query")
        self.key = Linear(w, f"{prefix}.key", "key")
        self.value = Linear(w, f"{prefix}.value", "value")
        self.heads = heads

    def __call__(self, x):
        with self.scoped():
            return attention(self.query(x), self.key(x), self.value(x), self.heads, causal=False,
                             dropout_rate=self.rate)


class DenseNorm(Scoped):
    """BertSelfOutput / BertOutput: LayerNorm(dense(x) + residual)."""

    def __init__(self, w, prefix, scope, eps, rate):
        super().__init__(scope)
        self.rate = rate
        self.dense = Linear(w, f"{prefix}.dense", "dense")
        self.LayerNorm = LayerNorm(w, f"{prefix}.LayerNorm", "LayerNorm", eps)

    def __call__(self, x, residual):
        with self.scoped():
            return self.LayerNorm(dropout(self.dense(x), self.rate, "dropout") + residual)


class Attention(Scoped):
    def __init__(self, w, prefix, heads, eps, rates):
        super().__init__("attention")
        self.self = SelfAttention(w, f"{prefix}.self", heads, rates[0])
        self.output = DenseNorm(w, f"{prefix}.output", "output", eps, rates[1])

    def __call__(self, x):
        with self.scoped():
            return self.output(self.self(x), x)


class Intermediate(Scoped):
    def __init__(self, w, prefix):
        super().__init__("intermediate")
        self.dense = Linear(w, f"{prefix}.dense", "dense")

    def __call__(self, x):
        with self.scoped():
            return gelu_erf(self.dense(x))


class Layer(Scoped):
    def __init__(self, w, i, heads, eps, rates):
        prefix = f"encoder.layer.{i}"
        super().__init__(f"layer.{i}")
        self.attention = Attention(w, f"{prefix}.attention", heads, eps, rates)
        self.intermediate = Intermediate(w, f"{prefix}.intermediate")
        self.output = DenseNorm(w, f"{prefix}.output", "output", eps, rates[1])

    def __call__(self, x):
        with self.scoped():
            x = self.attention(x)
            return self.output(self.intermediate(x), x)


class Encoder(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("encoder")
        rates = (cfg["attention_probs_dropout_prob"], cfg["hidden_dropout_prob"])
        self.layer = nnx.List([Layer(w, i, cfg["num_attention_heads"], cfg["layer_norm_eps"], rates)
                               for i in range(cfg["num_hidden_layers"])])

    def __call__(self, x):
        with self.scoped():
            x = run_layers(self.layer, x)
            return x


class Bert(Scoped):
    def __init__(self, w, cfg):
        super().__init__("")
        self.embeddings = Embeddings(w, cfg["layer_norm_eps"], cfg["hidden_dropout_prob"])
        self.encoder = Encoder(w, cfg)

    def __call__(self, input_ids):
        return self.encoder(self.embeddings(input_ids))


def jax_model(size: str, weights: dict[str, np.ndarray]):
    c = config(size)
    return Bert(weights, dict(SIZES[size], layer_norm_eps=c.layer_norm_eps, hidden_dropout_prob=c.hidden_dropout_prob,
                              attention_probs_dropout_prob=c.attention_probs_dropout_prob))
