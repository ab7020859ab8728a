"""Writes the StableHLO bytecode of a small stack of four identical pre-LN blocks run on torch_xla's lazy tensors, the layers unrolled or under torch_xla's scan_layers: `python tests/torch_xla_scan.py scan|unroll OUT.mlirbc [mlp]` (mlp: blocks without attention's softmax)."""
from __future__ import annotations

import os
import sys


def main(mode: str, out: str, kind: str = "attention") -> None:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch.nn as nn
    import torch_xla
    import torch_xla.core.xla_model as xm
    from torch_xla.experimental.scan_layers import scan_layers

    class Block(nn.Module):
        def __init__(self, d: int = 16):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), nn.Linear(d, d), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            h = self.attn(self.ln_1(x))
            x = x + (torch.softmax(h @ h.transpose(-1, -2), -1) @ h if kind == "attention" else h)
            return x + self.mlp(self.ln_2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(4)])

        def forward(self, x):
            if mode == "scan":
                return scan_layers(self.blocks, x)
            for b in self.blocks:
                x = b(x)
            return x

    torch.manual_seed(0)
    model = Model().to(torch_xla.device())
    with torch.no_grad():
        out_tensor = model(torch.randn(2, 8, 16).to(torch_xla.device()))
    with open(out, "wb") as f:
        f.write(xm.get_stablehlo_bytecode([out_tensor]))


if __name__ == "__main__":
    main(*sys.argv[1:4])
