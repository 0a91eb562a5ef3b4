"""lins's training step on PyTorch FSDP2 (`fully_shard`): one FSDP parameter group per lins module (the embedding,
each layer's attention and MLP, the head), so FSDP gathers and reduces the same units lins does.

    full   reshard_after_forward=True: parameters gathered for forward and again for backward, gradients
           reduce-scattered (ZeRO-3; lins's fsdp)
    zero2  reshard_after_forward=False: parameters gathered once per micro-batch and kept for backward (FSDP's
           SHARD_GRAD_OP; lins's fsdp:noreshard)
    hpz    reshard_after_forward=R (ranks per node): after forward each rank keeps a shard over its node, so the
           backward gather stays inside the node (ZeRO++ hpZ-like; lins's fsdp:R)
    hsdp   a 2-D mesh (nodes x R): sharded inside a node, replicated across nodes; gradients reduce-scattered inside
           the node, then all-reduced across nodes (HSDP, which stands in for MiCS; lins's hsdp)

The head group (final norm and output) keeps reshard_after_forward=False in every strategy, as torchtitan does:
backward needs it at once.

bf16: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16): fp32 sharded parameters are the master weights
(AdamW runs on them), gathers and reduce-scatters move bf16. Gradients of every micro-batch are reduce-scattered
(FSDP's default: no set_requires_gradient_sync(False)) and accumulated in the fp32 sharded gradient.

    torchrun --nproc-per-node 4 -m lins_peers.fsdp2 --model tiny --gpus-per-node 2
"""

import sys
from typing import Dict

import torch

from . import workload as wl
from .runner import Peer, run

STRATEGIES: Dict[str, str] = {
    "full": "fully_shard, reshard after forward (ZeRO-3; lins fsdp)",
    "zero2": "fully_shard, reshard_after_forward=False (ZeRO-2-like; lins fsdp:noreshard)",
    "hpz": "fully_shard, reshard_after_forward=R: backward gather inside a node (hpZ-like; lins fsdp:R)",
    "hsdp": "fully_shard on a nodes x R mesh: shard in a node, replicate across (HSDP / MiCS; lins hsdp)",
}
PRESETS = {"full": "fsdp", "zero2": "fsdp:noreshard", "hpz": "fsdp:R", "hsdp": "hsdp"}  # R: ranks per node


def system_name() -> str:
    return f"fsdp2-{torch.__version__.split('+')[0]}"


class Fsdp2Peer(Peer):
    def __init__(self, strategy: str, w: wl.Workload, device, precision: str):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self.system, self.strategy = system_name(), strategy
        self.preset = PRESETS[strategy].replace(":R", f":{w.gpus_per_node}")
        self.w = w
        r, n = w.gpus_per_node, w.nodes
        if strategy == "hsdp":
            if n < 2:
                raise SystemExit("fsdp2 hsdp needs at least 2 nodes (ranks / --gpus-per-node)")
            mesh = init_device_mesh(device.type, (n, r), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh(device.type, (w.world,), mesh_dim_names=("shard",))
        if strategy == "hpz" and not 1 < r < w.world:
            raise SystemExit("fsdp2 hpz needs 1 < --gpus-per-node < ranks (FSDP reshards to that many ranks)")
        reshard = {"full": True, "zero2": False, "hpz": r, "hsdp": True}[strategy]
        bf16 = precision == "bf16"
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16) if bf16 else \
            MixedPrecisionPolicy()
        self.model = wl.build_model(w, device)
        self.groups = []
        for name, modules in wl.lins_modules(self.model):
            # The head (final norm and output) is not resharded after forward: backward needs it at once (FSDP2's
            # own advice, and what torchtitan does).
            fully_shard(modules if len(modules) > 1 else modules[0], mesh=mesh,
                        reshard_after_forward=False if name == "head" else reshard, mp_policy=mp)
            self.groups.append(name)
        fully_shard(self.model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
        self.optimizer = wl.adamw(wl.param_groups(self.model.named_parameters(), w.adamw), w.adamw)
        self.settings = {"mesh": list(mesh.shape), "mesh_dim_names": list(mesh.mesh_dim_names or ()),
                         "reshard_after_forward": reshard, "head_reshard_after_forward": False,
                         "groups": self.groups,
                         "mp_policy": {"param_dtype": str(mp.param_dtype), "reduce_dtype": str(mp.reduce_dtype)},
                         "gradient_sync": "every micro-batch"}

    def forward(self, ids, targets, micro_batch, last):
        return wl.loss_sum(self.model, ids, targets)

    def backward(self, loss_sum, micro_batch, last):
        # FSDP averages gradients over the ranks; the rest of lins's 1 / (global tokens) is here.
        (loss_sum / (self.w.micro_batch_tokens * self.w.micro_batches)).backward()

    def optimizer_step(self):
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def config(self):
        return self.settings


def main(argv=None) -> int:
    from .options import parser

    args = parser("fsdp2", STRATEGIES, "full,zero2,hpz,hsdp").parse_args(argv)
    builders = {s: (lambda w, d, p, s=s: Fsdp2Peer(s, w, d, p)) for s in STRATEGIES}
    return run(system_name(), "fsdp2", args, builders, lambda b: "nccl" if b == "gpu" else "gloo")


if __name__ == "__main__":
    sys.exit(main())
