"""lins's training step on PyTorch DistributedDataParallel, the real system behind lins's ddp preset.

    ddp    DistributedDataParallel(bucket_cap_mb=25, its default); micro-batches before the last run under no_sync(),
           so gradients are all-reduced once per step, bucket by bucket, during the last backward

bf16: fp32 parameters (the master weights; AdamW runs on them), the forward under torch.autocast(bf16), and the
gradients all-reduced in bf16 through DDP's bf16_compress_hook (the bytes lins's bf16 ddp moves); fp32: DDP's
allreduce_hook, the same all-reduce as DDP's built-in one but issued through torch.distributed, where the collective
recorder sees it.

    torchrun --nproc-per-node 4 -m lins_peers.ddp --model tiny --gpus-per-node 2
"""

import contextlib
import sys
from typing import Dict

import torch

from . import workload as wl
from .runner import Peer, run

STRATEGIES: Dict[str, str] = {"ddp": "DistributedDataParallel, all-reduce once per step (lins ddp)"}


def system_name() -> str:
    return f"torch-ddp-{torch.__version__.split('+')[0]}"


class DdpPeer(Peer):
    def __init__(self, strategy: str, w: wl.Workload, device, precision: str):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel

        self.system, self.strategy, self.preset = system_name(), strategy, "ddp"
        self.w, self.device = w, device
        self.bf16 = precision == "bf16"
        model = wl.build_model(w, device)
        self.model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        # A Python comm hook in both precisions: DDP's built-in all-reduce is issued from C++, out of the collective
        # recorder's sight; allreduce_hook issues the same all-reduce per bucket through torch.distributed.
        hook = default_hooks.bf16_compress_hook if self.bf16 else default_hooks.allreduce_hook
        self.model.register_comm_hook(None, hook)
        self.optimizer = wl.adamw(wl.param_groups(model.named_parameters(), w.adamw), w.adamw)
        self._sync_ctx = None

    def forward(self, ids, targets, micro_batch, last):
        # no_sync() must cover the forward too: DDP decides in forward whether the backward reduces.
        self._sync_ctx = contextlib.nullcontext() if last else self.model.no_sync()
        self._sync_ctx.__enter__()
        amp = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with amp:
            return wl.loss_sum(self.model, ids, targets)

    def backward(self, loss_sum, micro_batch, last):
        try:
            (loss_sum / (self.w.micro_batch_tokens * self.w.micro_batches)).backward()
        finally:
            self._sync_ctx.__exit__(None, None, None)

    def optimizer_step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def close(self):
        # DDP's reducer holds the process group: free it before the group is destroyed at the end of the run
        del self.model, self.optimizer

    def config(self):
        return {"bucket_cap_mb": 25, "comm_hook": "bf16_compress_hook" if self.bf16 else "allreduce_hook",
                "autocast": "bf16" if self.bf16 else None, "gradient_sync": "last micro-batch (no_sync before)"}


def main(argv=None) -> int:
    from .options import parser

    args = parser("ddp", STRATEGIES, "ddp").parse_args(argv)
    builders = {"ddp": lambda w, d, p: DdpPeer("ddp", w, d, p)}
    return run(system_name(), "ddp", args, builders, lambda b: "nccl" if b == "gpu" else "gloo")


if __name__ == "__main__":
    sys.exit(main())
