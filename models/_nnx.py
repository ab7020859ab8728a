"""Flax NNX layers that hold PyTorch-named, PyTorch-laid-out weights and run under their module path."""
from __future__ import annotations

import contextlib
import math
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def param(weights: Mapping[str, np.ndarray], name: str) -> nnx.Param:
    """The PyTorch tensor `name` as an NNX parameter (float tensors stay float32)."""
    return nnx.Param(jnp.asarray(weights[name]))


def join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class Scoped(nnx.Module):
    """A module whose ops carry its PyTorch attribute name as a JAX named scope.

    Scopes nest, so an op inside `h.3` -> `attn` -> `c_attn` is located at
    `jit(forward)/h.3/attn/c_attn/...`, which the parser normalizes to the PyTorch
    module path `h.3.attn.c_attn`.
    """

    def __init__(self, scope: str):
        self.scope = scope

    def scoped(self):
        return jax.named_scope(self.scope) if self.scope else contextlib.nullcontext()


class Linear(Scoped):
    """torch.nn.Linear: weight [out, in], y = x @ W.T + b."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str, bias: bool = True):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.bias = param(w, join(prefix, "bias")) if bias else None

    def __call__(self, x):
        with self.scoped():
            y = jnp.matmul(x, self.weight[...].T)
            return y + self.bias[...] if self.bias is not None else y


class Conv1D(Scoped):
    """transformers' GPT-2 Conv1D: weight [in, out], y = x @ W + b."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.bias = param(w, join(prefix, "bias"))

    def __call__(self, x):
        with self.scoped():
            return jnp.matmul(x, self.weight[...]) + self.bias[...]


class Embedding(Scoped):
    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))

    def __call__(self, ids):
        with self.scoped():
            return jnp.take(self.weight[...], ids, axis=0)


class LayerNorm(Scoped):
    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str, eps: float):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.bias = param(w, join(prefix, "bias"))
        self.eps = eps

    def __call__(self, x):
        with self.scoped():
            mean = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
            return (x - mean) * jax.lax.rsqrt(var + self.eps) * self.weight[...] + self.bias[...]


class Conv2d(Scoped):
    """torch.nn.Conv2d in NCHW with OIHW weights, no bias."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str, stride: int, padding: int):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.stride = stride
        self.padding = padding

    def __call__(self, x):
        with self.scoped():
            p = self.padding
            return jax.lax.conv_general_dilated(
                x, self.weight[...], (self.stride, self.stride), ((p, p), (p, p)),
                dimension_numbers=("NCHW", "OIHW", "NCHW"))


class BatchNorm2d(Scoped):
    """torch.nn.BatchNorm2d on NCHW: by its running statistics (inference mode), or inside training() by
    the batch's, updating the running ones as torch's train mode does (momentum 0.1, variance unbiased)."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str, eps: float = 1e-5):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.bias = param(w, join(prefix, "bias"))
        self.running_mean = param(w, join(prefix, "running_mean"))
        self.running_var = param(w, join(prefix, "running_var"))
        self.eps = eps

    def __call__(self, x):
        with self.scoped():
            shape = (1, -1, 1, 1)
            if _TRAIN["on"]:
                return self.batch_statistics(x, shape)
            scale = self.weight[...] * jax.lax.rsqrt(self.running_var[...] + self.eps)
            shift = self.bias[...] - self.running_mean[...] * scale
            return x * scale.reshape(shape) + shift.reshape(shape)

    def batch_statistics(self, x, shape):
        mean = jnp.mean(x, axis=(0, 2, 3))
        var = jnp.mean(jnp.square(x - mean.reshape(shape)), axis=(0, 2, 3))
        n = x.size // x.shape[1]
        m = BATCH_NORM_MOMENTUM
        self.running_mean[...] = (1.0 - m) * self.running_mean[...] + m * mean
        self.running_var[...] = (1.0 - m) * self.running_var[...] + m * var * (n / (n - 1))
        scale = self.weight[...] * jax.lax.rsqrt(var + self.eps)
        return x * scale.reshape(shape) + (self.bias[...] - mean * scale).reshape(shape)


def gelu_tanh(x):
    """transformers' gelu_new / gelu_pytorch_tanh."""
    return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return jax.nn.gelu(x, approximate=False)


def attention(q, k, v, heads: int, causal: bool, dropout_rate: float = 0.0, dropout_scope: str = "dropout"):
    """Multi-head scaled dot-product attention on [B, T, D] projections, as transformers' eager path
    (inside training(), the probabilities dropped out at `dropout_rate` under `dropout_scope`)."""
    b, t, d = q.shape
    hd = d // heads

    def split(x):
        return x.reshape(b, t, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(q), split(k), split(v)
    scores = jnp.matmul(q, k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))
    if causal:
        mask = jnp.tril(jnp.ones((t, t), dtype=bool))
        scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    probs = dropout(jax.nn.softmax(scores, axis=-1), dropout_rate, dropout_scope)
    ctx = jnp.matmul(probs, v)
    return ctx.transpose(0, 2, 1, 3).reshape(b, t, d)


# How run_layers runs a model's layers: set by the capture (`--scan-layers`, `--remat`) around the
# trace, read while tracing. A process-wide value, not a context variable: jax.jit traces on the
# lowering thread (capture/lowering.py), which a context variable would not reach.
_LAYERS = {"scan": False, "remat": False, "record": None}


@contextlib.contextmanager
def layers_as(scan: bool = False, remat: bool = False):
    """While inside, run_layers scans the layers (`scan`) and/or rematerializes each (`remat`);
    yields the record whose `used` counts the run_layers calls traced (0: the twin has none)."""
    saved, record = dict(_LAYERS), {"used": 0}
    _LAYERS.update(scan=scan, remat=remat, record=record)
    try:
        yield record
    finally:
        _LAYERS.update(saved)


def run_layers(layers, x, *args):
    """`x = layer(x, *args)` for each layer in turn: unrolled (the default), or as the capture asks.

    Scanned: jax.lax.scan over the layers' parameters stacked inside the function (the arguments stay
    one per PyTorch tensor, as torch_xla's scan_layers stacks them too), the body being the first
    layer under the scope of the list (`layers`, not `layers.0`), as MaxText's `nn.scan` names its
    decoder. Rematerialized: jax.checkpoint around each layer (around the scan's body when scanned),
    so the backward recomputes the layer's forward ops instead of keeping its activations.
    """
    if not (_LAYERS["scan"] or _LAYERS["remat"]):
        for layer in layers:
            x = layer(x, *args)
        return x
    _LAYERS["record"]["used"] += 1
    if not _LAYERS["scan"]:
        for layer in layers:
            graphdef, state = nnx.split(layer)
            x = jax.checkpoint(lambda s, h, *a, g=graphdef: nnx.merge(g, s)(h, *a))(state, x, *args)
        return x
    graphdef, _ = nnx.split(layers[0])
    scope = layers[0].scope.rsplit(".", 1)[0]
    with jax.named_scope(scope):  # the stacking belongs to the list, as the loop does
        stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[nnx.split(layer)[1] for layer in layers])

    def body(h, state):
        layer = nnx.merge(graphdef, state)
        layer.scope = scope
        return layer(h, *args), None

    x, _ = jax.lax.scan(jax.checkpoint(body) if _LAYERS["remat"] else body, x, stacked)
    return x


class RMSNorm(Scoped):
    """torch.nn.RMSNorm / transformers' LlamaRMSNorm over the last axis: x * rsqrt(mean(x^2) + eps) * weight,
    computed in float32 and cast back to x's dtype; weight [D] read from `prefix.weight`."""

    def __init__(self, w: Mapping[str, np.ndarray], prefix: str, scope: str, eps: float):
        super().__init__(scope)
        self.weight = param(w, join(prefix, "weight"))
        self.eps = eps

    def __call__(self, x):
        with self.scoped():
            h = x.astype(jnp.float32)
            h = h * jax.lax.rsqrt(jnp.mean(jnp.square(h), axis=-1, keepdims=True) + self.eps)
            return self.weight[...] * h.astype(x.dtype)


# Train mode, as PyTorch's: set by training() around a trace, read while tracing (process-wide, as _LAYERS).
# At the end of the file, so the captures' locations above keep their lines.
_TRAIN = {"on": False, "key": None, "record": None}
BATCH_NORM_MOMENTUM = 0.1  # torch.nn.BatchNorm2d's default


@contextlib.contextmanager
def training(key=None):
    """While inside (tracing), the twins run as their PyTorch models in train mode: dropout() zeroes each
    element with its rate and scales the rest by 1/(1 - rate), drawing from `key` (a JAX PRNG key, folded
    with the call's index; None: no dropout drawn), and BatchNorm2d normalizes by the batch's statistics
    and updates its running ones. Yields the record whose `drawn` counts the dropout calls traced."""
    saved, record = dict(_TRAIN), {"drawn": 0}
    _TRAIN.update(on=True, key=key, record=record)
    try:
        yield record
    finally:
        _TRAIN.update(saved)


def dropout(x, rate: float, scope: str):
    """torch.nn.Dropout(rate) under the named scope `scope` inside training(); x itself outside it."""
    if not _TRAIN["on"] or _TRAIN["key"] is None or not rate:
        return x
    with jax.named_scope(scope):
        key = jax.random.fold_in(_TRAIN["key"], _TRAIN["record"]["drawn"])
        _TRAIN["record"]["drawn"] += 1
        keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
        return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))
