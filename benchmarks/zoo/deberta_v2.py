"""DebertaV2Model (transformers), tiny, random weights: one architecture of the zoo (docs/findings-zoo.md), PyTorch routes only."""
from stackwars_ir.models import Entry

ENTRY = Entry(
    "deberta_v2", "DebertaV2Model: disentangled relative-position attention; input token ids [batch, seq]",
    {"tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=512, max_position_embeddings=64, pad_token_id=0)},
    {"tiny": dict(batch=2, seq=16)})
SIZES = ENTRY.sizes


def torch_model(size):
    from stackwars_ir.models._hf import auto_model

    return auto_model("deberta-v2", SIZES[size])


def inputs(size, batch, seq, rng):
    from stackwars_ir.models._hf import token_ids

    return token_ids(SIZES[size], batch, seq, rng)
