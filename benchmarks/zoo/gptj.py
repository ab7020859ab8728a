"""GPTJModel (transformers), tiny, random weights: one architecture of the zoo (docs/findings-zoo.md), PyTorch routes only."""
from stackwars_ir.models import Entry

ENTRY = Entry(
    "gptj", "GPTJModel: rotary on part of each head, attention and MLP in parallel; input token ids [batch, seq]",
    {"tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=512, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, rotary_dim=8)},
    {"tiny": dict(batch=2, seq=16)})
SIZES = ENTRY.sizes


def torch_model(size):
    from stackwars_ir.models._hf import auto_model

    return auto_model("gptj", SIZES[size])


def inputs(size, batch, seq, rng):
    from stackwars_ir.models._hf import token_ids

    return token_ids(SIZES[size], batch, seq, rng)
