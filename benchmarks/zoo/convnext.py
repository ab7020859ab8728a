"""ConvNextModel (transformers), tiny, random weights: one architecture of the zoo (docs/findings-zoo.md), PyTorch routes only."""
from stackwars_ir.models import Entry

ENTRY = Entry(
    "convnext", "ConvNextModel: a convolutional network: depthwise 7x7, LayerNorm, inverted MLP; input images [batch, 3, size, size]",
    {"tiny": dict(image_size=32, num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)},
    {"tiny": dict(batch=2, seq=32)}, seq_meaning="image size")
SIZES = ENTRY.sizes


def torch_model(size):
    from stackwars_ir.models._hf import auto_model

    return auto_model("convnext", SIZES[size], pick="pooler_output")


def inputs(size, batch, seq, rng):
    from stackwars_ir.models._hf import pixels

    return pixels(SIZES[size], batch, seq, rng)
