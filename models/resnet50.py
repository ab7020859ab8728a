"""ResNet-50: transformers' ResNetModel (pooled output) and its Flax NNX twin on the same weights."""
from __future__ import annotations

import numpy as np

from . import Entry
from ._nnx import BatchNorm2d, Conv2d, Scoped

ENTRY = Entry(
    "resnet50", "ResNet-50 (transformers ResNetModel, pooled output); input images [batch, 3, seq, seq]",
    {"tiny": dict(embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1]),
     "base": dict(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3]),
     "narrow": dict(embedding_size=4, hidden_sizes=[4, 8, 16, 32], depths=[3, 4, 6, 3])},
    {"tiny": dict(batch=2, seq=32), "base": dict(batch=2, seq=224),
     "narrow": dict(batch=2, seq=32)}, seq_meaning="image size",
    train_unsupported={"torch_xla": "torch_xla 2.9's batch-norm backward fails in eval mode (\"The size of "
                                    "mean should be compatible with feature count, but the size of offset "
                                    "factor is 0\")"})
# torchax trains it since the lock pins the released torchax (0.0.13: max-pool as reduce_window_max); torch_xla
# 2.9.0's bundled copy (0.0.6, the stack torchax-bundled) computes max-pool indices with a reduce_window JAX
# cannot differentiate ("Linearization failed to produce known values for all output primals": docs/capture.md)
SIZES = ENTRY.sizes


def config(size: str):
    from transformers import ResNetConfig

    return ResNetConfig(**SIZES[size], layer_type="bottleneck", hidden_act="relu")


def torch_model(size: str):
    from transformers import ResNetModel

    from ._torch import positional

    return positional(ResNetModel, config(size), lambda out: out.pooler_output)


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"pixel_values": rng.standard_normal((batch, 3, seq, seq), dtype=np.float32)}


class ConvLayer(Scoped):
    """ResNetConvLayer / ResNetShortCut: conv, batch norm, optional ReLU."""

    def __init__(self, w, prefix, scope, stride, relu):
        super().__init__(scope)
        k = w[f"{prefix}.convolution.weight"].shape[-1]
        self.convolution = Conv2d(w, f"{prefix}.convolution", "convolution", stride, k // 2)
        self.normalization = BatchNorm2d(w, f"{prefix}.normalization", "normalization")
        self.relu = relu

    def __call__(self, x):
        import jax

        with self.scoped():
            x = self.normalization(self.convolution(x))
            return jax.nn.relu(x) if self.relu else x


class Bottleneck(Scoped):
    def __init__(self, w, prefix, scope, stride):
        from flax import nnx

        super().__init__(scope)
        has_shortcut = f"{prefix}.shortcut.convolution.weight" in w
        self.shortcut = ConvLayer(w, f"{prefix}.shortcut", "shortcut", stride, False) if has_shortcut else None
        self.layer = nnx.List([ConvLayer(w, f"{prefix}.layer.0", "layer.0", 1, True),
                               ConvLayer(w, f"{prefix}.layer.1", "layer.1", stride, True),
                               ConvLayer(w, f"{prefix}.layer.2", "layer.2", 1, False)])

    def __call__(self, x):
        import jax

        with self.scoped():
            residual = x
            for conv in self.layer:
                x = conv(x)
            if self.shortcut is not None:  # after the main path, in transformers' order
                residual = self.shortcut(residual)
            return jax.nn.relu(x + residual)


class Stage(Scoped):
    def __init__(self, w, s, depth):
        from flax import nnx

        super().__init__(f"stages.{s}")
        stride = 1 if s == 0 else 2  # transformers' default: no downsampling in the first stage
        self.layers = nnx.List([Bottleneck(w, f"encoder.stages.{s}.layers.{i}", f"layers.{i}",
                                           stride if i == 0 else 1) for i in range(depth)])

    def __call__(self, x):
        with self.scoped():
            for layer in self.layers:
                x = layer(x)
            return x


class Encoder(Scoped):
    def __init__(self, w, depths):
        from flax import nnx

        super().__init__("encoder")
        self.stages = nnx.List([Stage(w, s, depth) for s, depth in enumerate(depths)])

    def __call__(self, x):
        with self.scoped():
            for stage in self.stages:
                x = stage(x)
            return x


class Embeddings(Scoped):
    """The stem: 7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool."""

    def __init__(self, w):
        super().__init__("embedder")
        self.embedder = ConvLayer(w, "embedder.embedder", "embedder", 2, True)

    def __call__(self, x):
        import jax
        import jax.numpy as jnp

        with self.scoped():
            x = self.embedder(x)
            with jax.named_scope("pooler"):
                return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 3, 3), (1, 1, 2, 2),
                                             ((0, 0), (0, 0), (1, 1), (1, 1)))


class ResNet(Scoped):
    def __init__(self, w, depths):
        super().__init__("")
        self.embedder = Embeddings(w)
        self.encoder = Encoder(w, depths)

    def __call__(self, pixel_values):
        import jax
        import jax.numpy as jnp

        x = self.encoder(self.embedder(pixel_values))
        with jax.named_scope("pooler"):
            return jnp.mean(x, axis=(2, 3), keepdims=True)


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return ResNet(weights, SIZES[size]["depths"])
