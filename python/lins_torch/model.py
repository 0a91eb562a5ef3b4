"""lins's LLaMA-style decoder as a plain PyTorch module, written the standard way (torch ops and autograd only) and
independently of lins's kernels, so it can check them and drive other frameworks (FSDP, DeepSpeed) on the same model.
Parameter names are lins's (Meta's LLaMA checkpoint names). Runs in any floating dtype; RMSNorm, RoPE and the
softmax compute in fp32 at least. Works with torch 1.13 and 2.x.

The conventions (docs/model-conventions.md): RMSNorm y = x / sqrt(mean(x^2) + eps) * w; RoPE rotates the
interleaved pairs (2i, 2i + 1) of each head by pos * theta^(-2i / head_dim); attention is causal with scores scaled
by 1 / sqrt(head_dim); the MLP is SwiGLU w2(silu(w1 x) * w3 x); the output projection is not tied to the embedding.
`rope_pairing` and `attention_scale` exist so a test can break a convention on purpose."""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


def _at_least_fp32(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.to(_at_least_fp32(x.dtype))
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


def rope_tables(seq: int, head_dim: int, theta: float, device=None):
    """cos and sin [seq, head_dim / 2] of pos * theta^(-2i / head_dim), in fp64."""
    i = torch.arange(head_dim // 2, dtype=torch.float64, device=device)
    inv_freq = theta ** (-2.0 * i / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64, device=device), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str = "interleaved") -> torch.Tensor:
    """Rotates x [batch, seq, heads, head_dim]. interleaved: pairs (2i, 2i + 1) (Meta's LLaMA, lins);
    half: pairs (i, i + head_dim / 2) (the Hugging Face layout; not lins's)."""
    dt = _at_least_fp32(x.dtype)
    xf = x.to(dt)
    c = cos.to(dt)[None, :, None, :]
    s = sin.to(dt)[None, :, None, :]
    if pairing == "interleaved":
        pairs = xf.reshape(*xf.shape[:-1], -1, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    elif pairing == "half":
        a, b = xf.chunk(2, dim=-1)
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    else:
        raise ValueError(f"unknown RoPE pairing '{pairing}'; valid: interleaved, half")
    return out.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, rope_pairing: str, scale: float, device=None, dtype=None):
        super().__init__()
        h = config.hidden
        self.heads, self.head_dim = config.heads, config.head_dim
        self.rope_pairing, self.scale = rope_pairing, scale
        kw = dict(bias=False, device=device, dtype=dtype)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(h, h, **kw) for _ in range(4))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.heads, self.head_dim)
        v = self.wv(x).view(b, s, self.heads, self.head_dim)
        q = apply_rope(q, cos, sin, self.rope_pairing).transpose(1, 2)  # [b, heads, s, head_dim]
        k = apply_rope(k, cos, sin, self.rope_pairing).transpose(1, 2)
        v = v.transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = F.softmax(scores.to(_at_least_fp32(scores.dtype)), dim=-1).to(v.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=False, device=device, dtype=dtype)
        # Registered in lins's tensor order (gate, up, down), so named_parameters() lists the tensors as lins does.
        self.w1 = nn.Linear(config.hidden, config.ffn, **kw)  # gate
        self.w3 = nn.Linear(config.hidden, config.ffn, **kw)  # up
        self.w2 = nn.Linear(config.ffn, config.hidden, **kw)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, config: ModelConfig, rope_pairing: str, scale: float, device=None, dtype=None):
        super().__init__()
        self.attention_norm = RMSNorm(config.hidden, config.norm_eps, device, dtype)
        self.attention = Attention(config, rope_pairing, scale, device, dtype)
        self.ffn_norm = RMSNorm(config.hidden, config.norm_eps, device, dtype)
        self.feed_forward = FeedForward(config, device, dtype)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class LlamaModel(nn.Module):
    """ids [batch, seq] -> logits [batch, seq, vocab]. Parameters are created uninitialised in meaning: load lins's
    initial weights with init.load_initial_weights."""

    def __init__(self, config: ModelConfig, rope_pairing: str = "interleaved",
                 attention_scale: Optional[float] = None, device=None, dtype=None):
        super().__init__()
        self.config = config
        scale = attention_scale if attention_scale is not None else 1.0 / math.sqrt(config.head_dim)
        self.tok_embeddings = nn.Embedding(config.vocab, config.hidden, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(config, rope_pairing, scale, device, dtype) for _ in range(config.layers))
        self.norm = RMSNorm(config.hidden, config.norm_eps, device, dtype)
        self.output = nn.Linear(config.hidden, config.vocab, bias=False, device=device, dtype=dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        cos, sin = rope_tables(ids.shape[1], self.config.head_dim, self.config.rope_theta, ids.device)
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def token_loss_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed token cross-entropy (lins divides by the global batch's token count: the step's loss is the mean over
    every token of every rank and micro-batch)."""
    flat = logits.reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat.to(_at_least_fp32(flat.dtype)), targets.reshape(-1), reduction="sum")
