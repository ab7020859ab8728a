"""The same mixture of experts dispatched densely, as exported MoE models are: every expert on every token, weighted by its gate (0 where not routed)."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry
from stackwars_ir.models._nnx import Linear, Scoped

ENTRY = Entry("moe_dense", "router + 4 experts (top-2), every expert run on every token and weighted by its gate; "
                           "input [batch, seq, d]",
              {"tiny": dict(d=16, ffn=32, experts=4, top=2)}, {"tiny": dict(batch=2, seq=8)},
              roles={"experts": "mlp", "router": "mlp"}, loss="mse")
SIZES = ENTRY.sizes


def torch_model(size):
    import torch

    c = SIZES[size]

    class Expert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(c["d"], c["ffn"])
            self.down = torch.nn.Linear(c["ffn"], c["d"])

        def forward(self, x):
            return self.down(torch.nn.functional.silu(self.up(x)))

    class MoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.router = torch.nn.Linear(c["d"], c["experts"], bias=False)
            self.experts = torch.nn.ModuleList(Expert() for _ in range(c["experts"]))

        def forward(self, x):
            b, s, d = x.shape
            h = x.reshape(-1, d)
            probs = torch.softmax(self.router(h), dim=-1)
            w, idx = torch.topk(probs, c["top"], dim=-1)
            gates = torch.zeros_like(probs).scatter(-1, idx, w / w.sum(-1, keepdim=True))  # [tokens, experts]
            out = sum(gates[:, e, None] * expert(h) for e, expert in enumerate(self.experts))
            return out.reshape(b, s, d)

    torch.manual_seed(0)
    return MoE().eval()


def inputs(size, batch, seq, rng):
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}


class Expert(Scoped):
    def __init__(self, w, prefix, scope):
        super().__init__(scope)
        self.up = Linear(w, f"{prefix}.up", "up")
        self.down = Linear(w, f"{prefix}.down", "down")

    def __call__(self, x):
        import jax

        with self.scoped():
            return self.down(jax.nn.silu(self.up(x)))


class MoE(Scoped):
    def __init__(self, w, c):
        super().__init__("")
        from flax import nnx

        self.top, self.n = c["top"], c["experts"]
        self.router = Linear(w, "router", "router", bias=False)
        self.experts = nnx.List([Expert(w, f"experts.{e}", f"experts.{e}") for e in range(self.n)])

    def __call__(self, x):
        import jax
        import jax.numpy as jnp

        b, s, d = x.shape
        h = x.reshape(-1, d)
        probs = jax.nn.softmax(self.router(h), axis=-1)
        w, idx = jax.lax.top_k(probs, self.top)
        w = w / w.sum(-1, keepdims=True)
        gates = (jax.nn.one_hot(idx, self.n, dtype=w.dtype) * w[..., None]).sum(-2)  # [tokens, experts]
        out = sum(gates[:, e, None] * expert(h) for e, expert in enumerate(self.experts))
        return out.reshape(b, s, d)


def jax_model(size, weights):
    return MoE(weights, SIZES[size])
