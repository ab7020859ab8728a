"""The basic operations as small PyTorch modules: the study's GEMM, FFN, MHA and seed 002's workloads."""
from __future__ import annotations

import math

import torch
from torch import nn


class Gemm(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d) / math.sqrt(d))

    def forward(self, x):
        return x @ self.weight


class FFN(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class MHA(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads

        def split(y):
            return y.view(b, t, self.heads, hd).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)
        return self.out_proj((probs @ v).transpose(1, 2).reshape(b, t, d))


class Elementwise(nn.Module):
    def forward(self, a, b):
        return torch.sin(a * b + a) + b


class Matmul(nn.Module):
    def forward(self, a, b):
        return a @ b


class FFTMagnitude(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x, norm="ortho").abs()


class Sort(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values
