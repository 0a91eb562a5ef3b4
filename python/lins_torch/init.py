"""lins's initial weights, bit for bit, reimplemented in numpy: norm weights are one; every other element is
std * N(0, 1) by Box-Muller from one splitmix64 hash of (the tensor's stream, the element's index), so a value
depends only on (seed, tensor name, index). std is init_std, or init_std / sqrt(2 * layers) for the matrices that
write into the residual stream (attention.wo, feed_forward.w2). The arithmetic is lins's: double precision, glibc's
log and cos (through Python's math module, which calls the C library, so the rounding is the same), one rounding to
fp32 at the end."""

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Dict

import numpy as np

from .config import ModelConfig, tensor_shapes
from .hashing import splitmix64_array, tensor_stream_seed


def _residual_out(name: str) -> bool:
    return name.endswith("attention.wo.weight") or name.endswith("feed_forward.w2.weight")


def init_std(config: ModelConfig, name: str) -> float:
    """The fp32 standard deviation lins draws tensor `name` with (as a Python float, exactly)."""
    std = float(np.float32(config.init_std))
    if _residual_out(name):
        std = float(np.float32(std / math.sqrt(2.0 * config.layers)))
    return std


def normal_stream(stream_seed: int, first: int, n: int, std: float, exact: bool = True) -> np.ndarray:
    """Elements [first, first + n) of the fp32 stream `stream_seed` scaled by std. exact=False takes numpy's vectorised
    log and cos instead of the C library's one element at a time: the same stream to within an ulp of the double
    before the fp32 rounding (so an element may differ from lins's in its last bit), about a hundred times faster;
    for throughput runs at real model sizes, where the exact path takes minutes."""
    idx = np.arange(first, first + n, dtype=np.uint64)
    h = splitmix64_array(np.uint64(stream_seed) ^ splitmix64_array(idx))
    u1 = ((h >> np.uint64(32)) & np.uint64(0xFFFFFFFF)).astype(np.float64)
    u1 = (u1 + 1.0) / 4294967297.0  # (0, 1)
    u2 = (h & np.uint64(0xFFFFFFFF)).astype(np.float64) / 4294967296.0  # [0, 1)
    if not exact:
        return (std * np.sqrt(-2.0 * np.log(u1)) * np.cos((2.0 * math.pi) * u2)).astype(np.float32)
    log_u1 = np.fromiter(map(math.log, u1.tolist()), dtype=np.float64, count=n)
    cos_u2 = np.fromiter(map(math.cos, ((2.0 * math.pi) * u2).tolist()), dtype=np.float64, count=n)
    return (std * np.sqrt(-2.0 * log_u1) * cos_u2).astype(np.float32)


_FAST_CHUNK = 1 << 22  # elements per piece of the fast path, drawn on every core at once


def initial_weights(config: ModelConfig, seed: int = 1, exact: bool = True) -> Dict[str, np.ndarray]:
    """Every parameter's initial fp32 value, by lins's name, in lins's order (exact: see normal_stream; the fast path
    draws pieces of every tensor on all cores, since numpy's arithmetic runs outside Python's lock)."""
    out = {}
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1) if not exact else None
    pending = []
    for name, shape in tensor_shapes(config):
        n = int(np.prod(shape))
        if len(shape) == 1:
            out[name] = np.ones(shape, dtype=np.float32)  # RMSNorm weights start at one
        elif pool is None:
            out[name] = normal_stream(tensor_stream_seed(name, seed), 0, n, init_std(config, name)).reshape(shape)
        else:
            stream, std = tensor_stream_seed(name, seed), init_std(config, name)
            parts = [pool.submit(normal_stream, stream, first, min(_FAST_CHUNK, n - first), std, False)
                     for first in range(0, n, _FAST_CHUNK)]
            pending.append((name, shape, parts))
    for name, shape, parts in pending:
        out[name] = np.concatenate([p.result() for p in parts]).reshape(shape)
    if pool is not None:
        pool.shutdown()
    return {name: out[name] for name, _ in tensor_shapes(config)}  # lins's order


def load_initial_weights(module, config: ModelConfig, seed: int = 1, exact: bool = True) -> None:
    """Copies lins's initial weights into a module whose parameter names are lins's (model.LlamaModel)."""
    import torch

    weights = initial_weights(config, seed, exact)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(weights[name]).to(p.dtype))
