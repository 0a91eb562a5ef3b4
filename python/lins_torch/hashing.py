"""splitmix64, the counter-based hash at the root of every seeded stream in lins (initial weights, synthetic data),
and the FNV-1a string hash that gives each tensor its own stream; in exact 64-bit unsigned arithmetic."""

import numpy as np

MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """splitmix64's finaliser on one Python integer (taken modulo 2^64)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def splitmix64_array(x: np.ndarray) -> np.ndarray:
    """splitmix64 on a uint64 array; numpy's unsigned arithmetic wraps modulo 2^64 as C++'s does."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def tensor_stream_seed(name: str, seed: int) -> int:
    """The stream of tensor `name`: FNV-1a over its full name, started from the run's seed."""
    h = 1469598103934665603 ^ ((seed * 0x9E3779B97F4A7C15) & MASK64)
    for c in name.encode():
        h ^= c
        h = (h * 1099511628211) & MASK64
    return h
