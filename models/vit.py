"""ViT: transformers' ViTModel (patch embedding, class token, pre-norm encoder) and its Flax NNX twin."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import Conv2d, LayerNorm, Linear, Scoped, attention, gelu_erf, param, run_layers

ENTRY = Entry(
    "vit", "ViT encoder (transformers ViTModel, no pooler); input images [batch, 3, seq, seq]; base: ViT-B/16",
    {"tiny": dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
                  image_size=32, patch_size=8),
     "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                  image_size=224, patch_size=16)},
    {"tiny": dict(batch=2, seq=32), "base": dict(batch=2, seq=224)}, seq_meaning="image size",
    roles={"output": "mlp"},  # transformers' layer.N.output: the MLP's second half
    layers="layers")
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import ViTConfig

    return ViTConfig(**SIZES[size], attn_implementation="eager")


def torch_model(size: str):
    from transformers import ViTModel

    from ._torch import positional

    return positional(ViTModel, config(size), lambda out: out.last_hidden_state, init={"add_pooling_layer": False})


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq != SIZES[size]["image_size"]:
        raise ValueError(f"--seq {seq}: ViT {size} takes {SIZES[size]['image_size']}x{SIZES[size]['image_size']} "
                         "images (its position embeddings are sized for them)")
    return {"pixel_values": rng.standard_normal((batch, 3, seq, seq)).astype(np.float32)}


class Projection(Conv2d):
    """torch.nn.Conv2d with its bias."""

    def __init__(self, w, prefix, scope, stride):
        super().__init__(w, prefix, scope, stride=stride, padding=0)
        self.bias = param(w, f"{prefix}.bias")

    def __call__(self, x):
        y = super().__call__(x)
        with self.scoped():
            return y + self.bias[...].reshape(1, -1, 1, 1)


class PatchEmbeddings(Scoped):
    """A PxP convolution with stride P, then the patches as a sequence: [B, 3, H, W] -> [B, N, D]."""

    def __init__(self, w, patch):
        super().__init__("patch_embeddings")
        self.projection = Projection(w, "embeddings.patch_embeddings.projection", "projection", stride=patch)

    def __call__(self, x):
        with self.scoped():
            y = self.projection(x)
            b, d = y.shape[:2]
            return y.reshape(b, d, -1).transpose(0, 2, 1)


class Embeddings(Scoped):
    """Patches, the class token in front, plus learned position embeddings."""

    def __init__(self, w, patch):
        super().__init__("embeddings")
        self.patch_embeddings = PatchEmbeddings(w, patch)
        self.cls_token = param(w, "embeddings.cls_token")
        self.position_embeddings = param(w, "embeddings.position_embeddings")

    def __call__(self, x):
        import jax.numpy as jnp

        with self.scoped():
            patches = self.patch_embeddings(x)
            cls = jnp.broadcast_to(self.cls_token[...], (patches.shape[0], 1, patches.shape[2]))
            return jnp.concatenate([cls, patches], axis=1) + self.position_embeddings[...]


class Attention(Scoped):
    def __init__(self, w, prefix, heads):
        super().__init__("attention")
        self.q_proj = Linear(w, f"{prefix}.q_proj", "q_proj")
        self.k_proj = Linear(w, f"{prefix}.k_proj", "k_proj")
        self.v_proj = Linear(w, f"{prefix}.v_proj", "v_proj")
        self.o_proj = Linear(w, f"{prefix}.o_proj", "o_proj")
        self.heads = heads

    def __call__(self, x):
        with self.scoped():
            return self.o_proj(attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.heads, causal=False))


class MLP(Scoped):
    def __init__(self, w, prefix):
        super().__init__("mlp")
        self.fc1 = Linear(w, f"{prefix}.fc1", "fc1")
        self.fc2 = Linear(w, f"{prefix}.fc2", "fc2")

    def __call__(self, x):
        with self.scoped():
            return self.fc2(gelu_erf(self.fc1(x)))


class Layer(Scoped):
    def __init__(self, w, prefix, cfg):
        super().__init__(prefix)
        eps = cfg["layer_norm_eps"]
        self.layernorm_before = LayerNorm(w, f"{prefix}.layernorm_before", "layernorm_before", eps)
        self.attention = Attention(w, f"{prefix}.attention", cfg["num_attention_heads"])
        self.layernorm_after = LayerNorm(w, f"{prefix}.layernorm_after", "layernorm_after", eps)
        self.mlp = MLP(w, f"{prefix}.mlp")

    def __call__(self, x):
        with self.scoped():
            x = x + self.attention(self.layernorm_before(x))
            return x + self.mlp(self.layernorm_after(x))


class ViT(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("")
        self.embeddings = Embeddings(w, cfg["patch_size"])
        self.layers = nnx.List([Layer(w, f"layers.{i}", cfg) for i in range(cfg["num_hidden_layers"])])
        self.layernorm = LayerNorm(w, "layernorm", "layernorm", cfg["layer_norm_eps"])

    def __call__(self, pixel_values):
        x = run_layers(self.layers, self.embeddings(pixel_values))
        return self.layernorm(x)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return ViT(weights, dict(SIZES[size], layer_norm_eps=config(size).layer_norm_eps))
