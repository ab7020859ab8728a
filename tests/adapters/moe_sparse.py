"""A sparse mixture of experts, top-2, as Mixtral-style models dispatch it: each expert run on the tokens routed to it."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry

ENTRY = Entry("moe_sparse", "router + 4 experts (top-2), the tokens routed to each gathered with torch.where; "
                            "input [batch, seq, d]",
              {"tiny": dict(d=16, ffn=32, experts=4, top=2, skip_empty=True),
               "nobranch": dict(d=16, ffn=32, experts=4, top=2, skip_empty=False)},
              {"tiny": dict(batch=2, seq=8), "nobranch": dict(batch=2, seq=8)},
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
            w = w / w.sum(-1, keepdim=True)
            out = torch.zeros_like(h)
            for e, expert in enumerate(self.experts):
                tok, slot = torch.where(idx == e)  # how many tokens chose expert e: known only at run time
                if c["skip_empty"] and tok.numel() == 0:
                    continue
                out.index_add_(0, tok, expert(h[tok]) * w[tok, slot, None])
            return out.reshape(b, s, d)

    torch.manual_seed(0)
    return MoE().eval()


def inputs(size, batch, seq, rng):
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}
