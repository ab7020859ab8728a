"""A user's adapter, outside the repository: two residual layers whose sublayer is called `mix`."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry
from stackwars_ir.models._nnx import Linear, Scoped

ENTRY = Entry(
    "toy_mixer", "two residual layers x + mix(x), mix = Linear-tanh-Linear (up, down); input [batch, seq, d]",
    {"tiny": dict(d=16, layers=2)}, {"tiny": dict(batch=2, seq=4)},
    roles={"mix": "mlp"})  # a word the differ's generic table does not know
SIZES = ENTRY.sizes


def torch_model(size: str):
    import torch

    d, n = SIZES[size]["d"], SIZES[size]["layers"]

    class Mix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

        def forward(self, x):
            return self.down(torch.tanh(self.up(x)))

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = Mix()

        def forward(self, x):
            return x + self.mix(x)

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(Layer() for _ in range(n))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    return Toy().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}


class Mix(Scoped):
    def __init__(self, w, prefix):
        super().__init__("mix")
        self.up = Linear(w, f"{prefix}.mix.up", "up")
        self.down = Linear(w, f"{prefix}.mix.down", "down")

    def __call__(self, x):
        import jax.numpy as jnp

        with self.scoped():
            return self.down(jnp.tanh(self.up(x)))


class Layer(Scoped):
    def __init__(self, w, prefix):
        super().__init__(prefix)
        self.mix = Mix(w, prefix)

    def __call__(self, x):
        with self.scoped():
            return x + self.mix(x)


class Toy(Scoped):
    def __init__(self, w, n):
        super().__init__("")
        from flax import nnx

        self.layers = nnx.List([Layer(w, f"layers.{i}") for i in range(n)])

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def jax_model(size: str, weights: dict[str, np.ndarray]):
    return Toy(weights, SIZES[size]["layers"])
