"""DistilBertModel (transformers), tiny, random weights: one architecture of the zoo (docs/findings-zoo.md), PyTorch routes only."""
from stackwars_ir.models import Entry

ENTRY = Entry(
    "distilbert", "DistilBertModel: BERT's encoder, 6 layers' worth in 2, no token types; input token ids [batch, seq]",
    {"tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=512, max_position_embeddings=64, pad_token_id=0, dim=64, n_layers=2, n_heads=4, hidden_dim=128)},
    {"tiny": dict(batch=2, seq=16)})
SIZES = ENTRY.sizes


def torch_model(size):
    from stackwars_ir.models._hf import auto_model

    return auto_model("distilbert", SIZES[size])


def inputs(size, batch, seq, rng):
    from stackwars_ir.models._hf import token_ids

    return token_ids(SIZES[size], batch, seq, rng)
