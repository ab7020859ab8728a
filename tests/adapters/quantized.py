"""A linear layer behind int8 quantize/dequantize pairs, as PT2E quantization leaves a model (quantized_decomposed ops)."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry

ENTRY = Entry("quantized", "int8 fake-quantized activations (scale 0.05) into a linear layer; input [batch, seq, d]",
              {"tiny": dict(d=8)}, {"tiny": dict(batch=2, seq=4)}, roles={"lin": "mlp"})
SIZES = ENTRY.sizes


def torch_model(size):
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401 (registers torch.ops.quantized_decomposed)

    d = SIZES[size]["d"]

    class QDQLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(d, d)

        def forward(self, x):
            q = torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.05, 0, -128, 127, torch.int8)
            x = torch.ops.quantized_decomposed.dequantize_per_tensor(q, 0.05, 0, -128, 127, torch.int8)
            return self.lin(x)

    torch.manual_seed(0)
    return QDQLinear().eval()


def inputs(size, batch, seq, rng):
    return {"x": rng.standard_normal((batch, seq, SIZES[size]["d"]), dtype=np.float32)}
