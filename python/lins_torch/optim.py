"""lins's optimizer as torch.optim.AdamW: decoupled weight decay on the matrices and the embedding (every parameter of
two or more dimensions), none on the RMSNorm weights; bias-corrected moments; lins's default hyper-parameters."""

from dataclasses import dataclass
from typing import Iterable, List, Tuple

import torch
from torch import nn


@dataclass(frozen=True)
class AdamWConfig:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1


def decays(name: str, param: torch.Tensor) -> bool:
    """Whether lins applies weight decay to a parameter: matrices and the embedding yes, norm weights no."""
    return param.dim() >= 2


def param_groups(named_params: Iterable[Tuple[str, torch.Tensor]], weight_decay: float,
                 decay_everything: bool = False) -> List[dict]:
    """torch.optim parameter groups; decay_everything (not lins's convention) exists to break it on purpose."""
    decay, no_decay = [], []
    for name, p in named_params:
        (decay if decay_everything or decays(name, p) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_adamw(model: nn.Module, config: AdamWConfig = AdamWConfig(), decay_everything: bool = False):
    groups = param_groups(model.named_parameters(), config.weight_decay, decay_everything)
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps)
