"""The shapes of lins's LLaMA-style models (the presets of `lins --model`) and the tensors they hold, named and
ordered as in lins (Meta's LLaMA checkpoint names, forward order)."""

from dataclasses import dataclass
from typing import Dict, List, Tuple

import lins_schema


@dataclass(frozen=True)
class ModelConfig:
    hidden: int
    layers: int
    heads: int
    ffn: int  # SwiGLU inner size
    vocab: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    init_std: float = 0.02  # matrices and the embedding; wo and w2 use init_std / sqrt(2 * layers)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


# The presets' shapes as the binary defines them (`lins schema`'s models); the numerics (norm_eps, rope_theta,
# init_std) are lins's defaults for every model (src/train/llama.h), not part of a preset.
PRESETS: Dict[str, ModelConfig] = {
    name: ModelConfig(hidden=m["hidden"], layers=m["layers"], heads=m["heads"], ffn=m["ffn"], vocab=m["vocab"])
    for name, m in lins_schema.MODELS.items()
}


def preset(name: str) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown model '{name}'; valid models: {', '.join(PRESETS)}")
    return PRESETS[name]


def tensor_shapes(config: ModelConfig) -> List[Tuple[str, Tuple[int, ...]]]:
    """(name, shape) of every parameter in lins's order; Linear weights are [out, in]."""
    h, f, v = config.hidden, config.ffn, config.vocab
    out = [("tok_embeddings.weight", (v, h))]
    for layer in range(config.layers):
        p = f"layers.{layer}."
        out += [
            (p + "attention_norm.weight", (h,)),
            (p + "attention.wq.weight", (h, h)),
            (p + "attention.wk.weight", (h, h)),
            (p + "attention.wv.weight", (h, h)),
            (p + "attention.wo.weight", (h, h)),
            (p + "ffn_norm.weight", (h,)),
            (p + "feed_forward.w1.weight", (f, h)),  # gate
            (p + "feed_forward.w3.weight", (f, h)),  # up
            (p + "feed_forward.w2.weight", (h, f)),  # down
        ]
    out += [("norm.weight", (h,)), ("output.weight", (v, h))]
    return out
