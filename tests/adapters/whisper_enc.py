"""A user's adapter for transformers' Whisper encoder, PyTorch only: two convolutions before the layers."""
from __future__ import annotations

import numpy as np

from stackwars_ir.models import Entry

ENTRY = Entry("whisper_enc", "Whisper encoder; input log-mel features [batch, mels, frames]",
              {"tiny": dict(num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=4,
                            encoder_ffn_dim=64, max_source_positions=16)}, {"tiny": dict(batch=2, seq=32)})
SIZES = ENTRY.sizes


def torch_model(size: str):
    import torch
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = WhisperEncoder(WhisperConfig(**SIZES[size]))

        def forward(self, x):
            return self.encoder(x).last_hidden_state

    torch.manual_seed(0)
    return Enc().eval()


def inputs(size: str, batch: int, seq: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((batch, SIZES[size]["num_mel_bins"], seq), dtype=np.float32)}
