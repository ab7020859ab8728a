"""A user's MLP-Mixer: each layer has two MLPs of the same class, named `token_mix` and `channel_mix`."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry
from stackwars_ir.models._nnx import LayerNorm, Linear, Scoped, gelu_erf

ENTRY = Entry(
    "mixer", "MLP-Mixer on patch embeddings [batch, tokens, channels]: per layer a token-mixing and a "
             "channel-mixing MLP (fc1, GELU, fc2), each after a LayerNorm; mean over tokens, a linear head",
    {"tiny": dict(tokens=8, channels=16, layers=2, classes=10)}, {"tiny": dict(batch=2, seq=8)},
    seq_meaning="tokens (patches)")
SIZES = ENTRY.sizes


def torch_model(size: str):
    import torch
    from torch import nn

    cfg = SIZES[size]
    t, c = cfg["tokens"], cfg["channels"]

    class Mlp(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class MixerLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.token_mix = nn.LayerNorm(c), Mlp(t)
            self.norm2, self.channel_mix = nn.LayerNorm(c), Mlp(c)

        def forward(self, x):
            x = x + self.token_mix(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.channel_mix(self.norm2(x))

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(MixerLayer() for _ in range(cfg["layers"]))
            self.norm, self.head = nn.LayerNorm(c), nn.Linear(c, cfg["classes"])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x).mean(dim=1))

    torch.manual_seed(0)
    return Mixer().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if seq != SIZES[size]["tokens"]:
        raise ValueError(f"--seq {seq}: this Mixer mixes exactly {SIZES[size]['tokens']} tokens")
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["channels"]), dtype=np.float32)}


class Act(Scoped):
    def __call__(self, x):
        with self.scoped():
            return gelu_erf(x)


class Mlp(Scoped):
    def __init__(self, w, prefix, scope):
        super().__init__(scope)
        self.fc1 = Linear(w, f"{prefix}.fc1", "fc1")
        self.act = Act("act")
        self.fc2 = Linear(w, f"{prefix}.fc2", "fc2")

    def __call__(self, x):
        with self.scoped():
            return self.fc2(self.act(self.fc1(x)))


class MixerLayer(Scoped):
    def __init__(self, w, prefix):
        super().__init__(prefix)
        self.norm1 = LayerNorm(w, f"{prefix}.norm1", "norm1", 1e-5)
        self.token_mix = Mlp(w, f"{prefix}.token_mix", "token_mix")
        self.norm2 = LayerNorm(w, f"{prefix}.norm2", "norm2", 1e-5)
        self.channel_mix = Mlp(w, f"{prefix}.channel_mix", "channel_mix")

    def __call__(self, x):
        with self.scoped():
            x = x + self.token_mix(self.norm1(x).transpose(0, 2, 1)).transpose(0, 2, 1)
            return x + self.channel_mix(self.norm2(x))


class Mixer(Scoped):
    def __init__(self, w, cfg):
        from flax import nnx

        super().__init__("")
        self.layers = nnx.List([MixerLayer(w, f"layers.{i}") for i in range(cfg["layers"])])
        self.norm = LayerNorm(w, "norm", "norm", 1e-5)
        self.head = Linear(w, "head", "head")

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(axis=1))


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Mixer(weights, SIZES[size])
