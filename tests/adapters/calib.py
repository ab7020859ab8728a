"""A model that calibrates a scale from data while it is built (reads .item())."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry

ENTRY = Entry("calib", "a linear layer whose output scale is calibrated at build time; input [batch, seq, d]",
              {"tiny": dict(d=8)}, {"tiny": dict(batch=2, seq=4)}, roles={"lin": "mlp"})
SIZES = ENTRY.sizes


def torch_model(size):
    import torch

    d = SIZES[size]["d"]

    class Calibrated(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(d, d)
            probe = self.lin(torch.ones(4, d))
            self.scale = 1.0 / max(probe.abs().max().item(), 1e-3)   # calibration: a Python float

        def forward(self, x):
            return self.lin(x) * self.scale

    torch.manual_seed(0)
    return Calibrated().eval()


def inputs(size, batch, seq, rng):
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}
