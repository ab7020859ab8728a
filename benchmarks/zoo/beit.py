"""BeitModel (transformers), tiny, random weights: one architecture of the zoo (docs/findings-zoo.md), PyTorch routes only."""
from stackwars_ir.models import Entry

ENTRY = Entry(
    "beit", "BeitModel: ViT with relative position bias and layer scale; input images [batch, 3, size, size]",
    {"tiny": dict(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)},
    {"tiny": dict(batch=2, seq=32)}, seq_meaning="image size")
SIZES = ENTRY.sizes


def torch_model(size):
    from stackwars_ir.models._hf import auto_model

    return auto_model("beit", SIZES[size])


def inputs(size, batch, seq, rng):
    from stackwars_ir.models._hf import pixels

    return pixels(SIZES[size], batch, seq, rng)
