"""lins's LLaMA-style model in PyTorch: the module (model), lins's initial weights bit for bit (init), its synthetic
data token for token (data), its AdamW (optim) and the model shapes (config)."""

from .config import PRESETS, ModelConfig, preset, tensor_shapes
from .data import micro_batch_tokens
from .init import initial_weights, load_initial_weights
from .model import LlamaModel, token_loss_sum
from .optim import AdamWConfig, make_adamw, param_groups

__all__ = [
    "PRESETS", "ModelConfig", "preset", "tensor_shapes", "micro_batch_tokens", "initial_weights",
    "load_initial_weights", "LlamaModel", "token_loss_sum", "AdamWConfig", "make_adamw", "param_groups",
]
