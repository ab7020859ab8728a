"""Regenerates two-blocks.mlir: TorchTPU's raw debug-info StableHLO of a two-block model, its frames marked by module_frames.

Run with the TorchTPU stack's Python (docs/stacks.md), from the project root:
    TPU_LIBRARY_PATH=$(ls ~/.cache/stackwars-ir/stacks/torch-tpu/env/lib/python3.*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so) \
    ~/.cache/stackwars-ir/stacks/torch-tpu/env/bin/python tests/data/torch_tpu/make_fixture.py tests/data/torch_tpu/two-blocks.mlir
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402  (TorchTPU autoloads here, on the plugin TPU_LIBRARY_PATH names)

from stackwars_ir.capture import torchtpu_route as tt  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def main(out: str) -> None:
    tt.tpu_device()
    from torch_tpu._internal.export import export as tpu_export

    torch.manual_seed(0)
    ep = torch.export.export(Net().eval(), (torch.randn(2, 8),))
    with tt.module_frames(tpu_export.EagerLikeFxInterpreter):
        text = tpu_export.exported_to_mlir(ep).serialize_text(enable_debug_info=True)
    # No path of this machine: site-packages and the project's root cut off.
    text = text.replace(sys.prefix + f"/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages/", "")
    text = text.replace(str(ROOT) + "/", "")
    Path(out).write_text(text)


if __name__ == "__main__":
    main(sys.argv[1])
