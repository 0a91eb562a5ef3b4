"""The training task every peer runs, taken from lins_torch so it is lins's own: the LLaMA shapes of `lins --model`,
lins's initial weights, lins's synthetic tokens per (step, rank, micro-batch), lins's loss normalisation (the mean
over every token of the step) and lins's AdamW (decay on matrices and the embedding, not on norm weights)."""

import math
from dataclasses import dataclass
from typing import Iterator, List, Tuple

import torch
from torch import nn

import lins_torch
from lins_torch import AdamWConfig


@dataclass(frozen=True)
class Workload:
    model_name: str
    config: "lins_torch.ModelConfig"
    seq: int
    micro_batch_size: int
    micro_batches: int
    world: int
    gpus_per_node: int
    seed: int
    adamw: AdamWConfig
    attention: str = "reference"  # "reference": lins_torch's; "sdpa": scaled_dot_product_attention
    recompute: bool = False
    exact_init: bool = True  # False: lins_torch's fast initialiser (numpy's log and cos; see its normal_stream)

    @property
    def nodes(self) -> int:
        return self.world // self.gpus_per_node

    @property
    def micro_batch_tokens(self) -> int:
        return self.micro_batch_size * self.seq

    @property
    def global_tokens(self) -> int:
        return self.world * self.micro_batches * self.micro_batch_tokens

    def params(self) -> int:
        return sum(math.prod(shape) for _, shape in lins_torch.tensor_shapes(self.config))


def build_model(w: Workload, device, dtype=torch.float32) -> nn.Module:
    """lins's model with lins's initial weights (rounded to dtype), on device, with the workload's attention kernel
    and recomputation."""
    model = lins_torch.LlamaModel(w.config, device=device, dtype=torch.float32)
    lins_torch.load_initial_weights(model, w.config, w.seed, w.exact_init)
    configure(model, w)
    return model.to(dtype=dtype)


def _sdpa_forward(self, x, cos, sin):
    """lins_torch's Attention.forward with the score, mask, softmax and value product in one
    torch.nn.functional.scaled_dot_product_attention (FlashAttention or memory-efficient kernels on a GPU): the
    same causal attention with the same 1/sqrt(head_dim) scale, without materialising the [seq, seq] scores."""
    from lins_torch.model import apply_rope

    b, s, h = x.shape
    q = self.wq(x).view(b, s, self.heads, self.head_dim)
    k = self.wk(x).view(b, s, self.heads, self.head_dim)
    v = self.wv(x).view(b, s, self.heads, self.head_dim)
    q = apply_rope(q, cos, sin, self.rope_pairing).transpose(1, 2)
    k = apply_rope(k, cos, sin, self.rope_pairing).transpose(1, 2)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True, scale=self.scale)
    return self.wo(out.transpose(1, 2).reshape(b, s, h))


def _recomputed(block_forward):
    from torch.utils.checkpoint import checkpoint

    def forward(x, cos, sin):
        return checkpoint(block_forward, x, cos, sin, use_reentrant=False)

    return forward


def configure(model: nn.Module, w: Workload) -> None:
    """attention "sdpa": every layer's attention through scaled_dot_product_attention; recompute: every transformer
    layer's activations recomputed in backward (torch.utils.checkpoint), as lins step --recompute."""
    import types

    for layer in model.layers:
        if w.attention == "sdpa":
            layer.attention.forward = types.MethodType(_sdpa_forward, layer.attention)
        if w.recompute:
            layer.forward = _recomputed(layer.forward)


def batch(w: Workload, step: int, rank: int, micro_batch: int, device) -> Tuple[torch.Tensor, torch.Tensor]:
    """ids and targets [micro_batch_size, seq] of micro-batch `micro_batch` of `rank` at step `step` (warm-up steps
    count, as in lins)."""
    ids, targets = lins_torch.micro_batch_tokens(w.seed, w.config.vocab, w.seq, step, rank, micro_batch,
                                                 w.micro_batches, w.micro_batch_size)
    return torch.from_numpy(ids).to(device), torch.from_numpy(targets).to(device)


def loss_sum(model: nn.Module, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed token cross-entropy of one micro-batch (fp32)."""
    return lins_torch.token_loss_sum(model(ids), targets)


def param_groups(named: Iterator[Tuple[str, torch.Tensor]], adamw: AdamWConfig) -> List[dict]:
    return lins_torch.param_groups(named, adamw.weight_decay)


def adamw(params, adamw_config: AdamWConfig) -> torch.optim.Optimizer:
    """torch.optim.AdamW with lins's hyper-parameters on parameter groups (weight decay set per group)."""
    c = adamw_config
    return torch.optim.AdamW(params, lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps, weight_decay=c.weight_decay)


# The lins module each parameter belongs to (embed, layers.i.attn, layers.i.mlp, head): the unit lins gathers and
# reduces, and the unit a peer shards as one group where the system allows.
def lins_modules(model: nn.Module) -> List[Tuple[str, List[nn.Module]]]:
    out = [("embed", [model.tok_embeddings])]
    for i, layer in enumerate(model.layers):
        out.append((f"layers.{i}.attn", [layer.attention_norm, layer.attention]))
        out.append((f"layers.{i}.mlp", [layer.ffn_norm, layer.feed_forward]))
    out.append(("head", [model.norm, model.output]))
    return out
