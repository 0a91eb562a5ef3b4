"""The synthetic token task of lins, token for token: every sequence starts at a seeded random token and continues by
next = (a * prev + c) mod V. Sequence g of step s depends only on (seed, s, g); rank r's micro-batch j of M, with b
sequences each, holds the global sequences (r * M + j) * b + i."""

import math
from typing import Tuple

import numpy as np

from .hashing import MASK64, splitmix64


def task_multiplier(seed: int, vocab: int) -> int:
    """a: the first a >= 2 coprime to V at or after a seeded start (a permutation that is not a plain shift)."""
    if vocab <= 2:
        return 1
    a = 2 + splitmix64(seed ^ 0xA11CE) % (vocab - 1)
    while math.gcd(a % vocab, vocab) != 1 or a % vocab < 2:
        a += 1
    return a % vocab


def task_increment(seed: int, vocab: int) -> int:
    """c, in [1, V]."""
    return 1 + splitmix64(seed ^ 0xC0FFEE) % vocab


def sequence(seed: int, vocab: int, seq: int, step: int, g: int) -> Tuple[np.ndarray, np.ndarray]:
    """ids[seq] and targets[seq] of global sequence g at step `step` (targets[t] = ids[t + 1] of seq + 1 tokens)."""
    a, c = task_multiplier(seed, vocab), task_increment(seed, vocab)
    x = splitmix64(splitmix64(seed) ^ splitmix64((step * 0x100000001B3 + g) & MASK64)) % vocab
    ids = np.empty(seq, dtype=np.int64)
    targets = np.empty(seq, dtype=np.int64)
    for t in range(seq):
        ids[t] = x
        x = (a * x + c) % vocab
        targets[t] = x
    return ids, targets


def global_sequence(rank: int, micro_batch: int, micro_batches: int, micro_batch_size: int, i: int) -> int:
    return (rank * micro_batches + micro_batch) * micro_batch_size + i


def micro_batch_tokens(seed: int, vocab: int, seq: int, step: int, rank: int, micro_batch: int, micro_batches: int,
                       micro_batch_size: int) -> Tuple[np.ndarray, np.ndarray]:
    """The micro-batch's ids and targets, [micro_batch_size, seq] int64 each (lins flattens them sequence-major)."""
    ids = np.empty((micro_batch_size, seq), dtype=np.int64)
    targets = np.empty((micro_batch_size, seq), dtype=np.int64)
    for i in range(micro_batch_size):
        g = global_sequence(rank, micro_batch, micro_batches, micro_batch_size, i)
        ids[i], targets[i] = sequence(seed, vocab, seq, step, g)
    return ids, targets
