"""lins's training step on DeepSpeed ZeRO (deepspeed.initialize around lins's model and lins's torch AdamW).

    zero1  stage 1: optimizer states partitioned (lins zero1)
    zero2  stage 2: gradients and optimizer states partitioned (lins zero2)
    zero3  stage 3: parameters too (lins zero3)
    zeropp stage 3 with ZeRO++ hpZ (zero_hpz_partition_size = R, ranks per node): a secondary copy of the
           parameters sharded inside the node serves the backward gather (lins zeropp)

    mics   MiCS (stage 3 with mics_shard_size = R): parameters, gradients and optimizer states sharded inside a
           node and replicated across nodes, the model built under deepspeed.zero.MiCS_Init (lins mics)

MiCS left DeepSpeed in 0.19.7: `mics` needs DeepSpeed 0.19.6 or older (docs/peers.md); on later versions FSDP2's
HSDP (lins_peers.fsdp2, strategy hsdp) stands in for it.

ZeRO-3 settings (--zero3 comparison, the default): DeepSpeed keeps small parameters resident
(stage3_param_persistence_threshold), keeps gathered parameters that will be reused soon (stage3_max_reuse_distance)
and prefetches ahead of the trace (stage3_prefetch_bucket_size, stage3_max_live_parameters); on a small model
these remove the backward all-gather entirely. For the comparison all four are 0, so every module's parameters
are gathered before its forward and again before its backward, as ZeRO-3 is described and as lins runs it.
--zero3 default keeps DeepSpeed's own defaults.

--overlap-comm on|off sets DeepSpeed's overlap_comm (default: DeepSpeed's own, off for stages 1 and 2 and on for
stage 3); the rows are then named <strategy>-overlap_comm-<on|off> and pair with lins's --ds-overlap-comm.

bf16: {"bf16": {"enabled": true}}: bf16 parameters and gradients (so bf16 collectives), fp32 master partitions and
moments inside DeepSpeed's ZeRO optimizer (which runs the torch AdamW on them). Gradient clipping off.

    torchrun --nproc-per-node 4 -m lins_peers.deepspeed_zero --model tiny --gpus-per-node 2
"""

import os
import sys
from typing import Dict

import torch

from . import workload as wl
from .runner import Peer, run

STRATEGIES: Dict[str, str] = {
    "zero1": "ZeRO stage 1 (lins zero1)",
    "zero2": "ZeRO stage 2 (lins zero2)",
    "zero3": "ZeRO stage 3 (lins zero3)",
    "zeropp": "ZeRO stage 3 + ZeRO++ hpZ, secondary partition = ranks per node (lins zeropp)",
    "mics": "MiCS, mics_shard_size = ranks per node (lins mics; DeepSpeed 0.19.6 or older)",
}
PRESETS = {"zero1": "zero1", "zero2": "zero2", "zero3": "zero3", "zeropp": "zeropp", "mics": "mics"}

# Every module gathered for forward and again for backward, no prefetch (see the module's help).
ZERO3_COMPARISON = {
    "stage3_param_persistence_threshold": 0,
    "stage3_max_reuse_distance": 0,
    "stage3_prefetch_bucket_size": 0,
    "stage3_max_live_parameters": 0,
}


def system_name() -> str:
    # From the installed metadata: deepspeed itself is imported only after the collective recorder is in place.
    from importlib.metadata import version

    return f"deepspeed-{version('deepspeed')}"


def ds_config(strategy: str, w: wl.Workload, precision: str, zero3: str,
              overlap_comm: str = "default") -> Dict[str, object]:
    stage = {"zero1": 1, "zero2": 2, "zero3": 3, "zeropp": 3, "mics": 3}[strategy]
    zero: Dict[str, object] = {"stage": stage}
    if overlap_comm != "default":
        zero["overlap_comm"] = overlap_comm == "on"
    if stage == 3 and zero3 == "comparison":
        zero.update(ZERO3_COMPARISON)
    if strategy == "mics":
        if w.nodes < 2:
            raise SystemExit("deepspeed mics needs at least 2 nodes (ranks / --gpus-per-node)")
        zero["mics_shard_size"] = w.gpus_per_node
        zero["mics_hierarchical_params_gather"] = False
    if strategy == "zeropp":
        if not 1 < w.gpus_per_node < w.world:
            raise SystemExit("deepspeed zeropp needs 1 < --gpus-per-node < ranks (hpZ partitions inside a node)")
        zero["zero_hpz_partition_size"] = w.gpus_per_node
    return {
        "train_micro_batch_size_per_gpu": w.micro_batch_size,
        "gradient_accumulation_steps": w.micro_batches,
        "train_batch_size": w.micro_batch_size * w.micro_batches * w.world,
        "bf16": {"enabled": precision == "bf16"},
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "gradient_clipping": 0.0,
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


class DeepSpeedPeer(Peer):
    def __init__(self, strategy: str, w: wl.Workload, device, precision: str, zero3: str,
                 overlap_comm: str = "default"):
        import deepspeed

        self.system, self.strategy, self.preset = system_name(), strategy, PRESETS[strategy]
        if zero3 != "comparison" and strategy in ("zero3", "zeropp", "mics"):
            self.strategy = f"{strategy}-defaults"
        if overlap_comm != "default":
            self.strategy += f"-overlap_comm-{overlap_comm}"
        self.w = w
        self.cfg = ds_config(strategy, w, precision, zero3, overlap_comm)
        if strategy == "mics":
            model = self._mics_model(w, device)
        else:
            model = wl.build_model(w, device)
        optimizer = wl.adamw(wl.param_groups(model.named_parameters(), w.adamw), w.adamw)
        self.engine, self.optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=self.cfg,
                                                                 dist_init_required=False)

    def _mics_model(self, w: wl.Workload, device):
        """lins's model built partitioned over the MiCS groups, then given lins's initial weights."""
        import deepspeed
        import lins_torch

        if not hasattr(deepspeed.zero, "MiCS_Init"):
            raise SystemExit(f"deepspeed {deepspeed.__version__} has no MiCS (removed in 0.19.7): install "
                             "deepspeed==0.19.6 for the mics strategy, or run lins_peers.fsdp2 --strategies hsdp")
        deepspeed.init_distributed(dist_backend=torch.distributed.get_backend())  # MiCS_Init reads the world size
        with deepspeed.zero.MiCS_Init(config_dict_or_path=self.cfg, dtype=torch.float32):
            model = lins_torch.LlamaModel(w.config, device=device)
        with deepspeed.zero.GatheredParameters(list(model.parameters()), modifier_rank=0):
            lins_torch.load_initial_weights(model, w.config, w.seed)
        return model

    def forward(self, ids, targets, micro_batch, last):
        return wl.loss_sum(self.engine, ids, targets)

    def backward(self, loss_sum, micro_batch, last):
        # DeepSpeed divides by the gradient accumulation steps and averages over the data-parallel ranks.
        self.engine.backward(loss_sum / self.w.micro_batch_tokens)
        if not last:
            self.engine.step()  # counts the micro-step; the optimizer runs at the accumulation boundary

    def optimizer_step(self):
        self.engine.step()

    def config(self):
        return self.cfg

    def close(self):
        if hasattr(self.engine, "destroy"):
            self.engine.destroy()


def main(argv=None) -> int:
    from .options import parser

    p = parser("deepspeed_zero", STRATEGIES, "zero1,zero2,zero3,zeropp")
    p.epilog += "\n(mics is not in the default list: it needs deepspeed 0.19.6 or older)"
    p.add_argument("--zero3", choices=["comparison", "default"], default="comparison",
                   help="ZeRO-3 settings: comparison (gather every module in forward and backward, no prefetch) "
                        "or default (DeepSpeed's own thresholds); default strategies are named <stage>-defaults")
    p.add_argument("--overlap-comm", choices=["default", "on", "off"], default="default",
                   help="DeepSpeed's overlap_comm: default (its own: off for stages 1 and 2, on for stage 3), on or "
                        "off; given, strategies are named <strategy>-overlap_comm-<on|off> (lins step "
                        "--ds-overlap-comm)")
    args = p.parse_args(argv)
    if args.backend == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    builders = {s: (lambda w, d, pr, s=s: DeepSpeedPeer(s, w, d, pr, args.zero3, args.overlap_comm))
                for s in STRATEGIES}
    return run(system_name(), "deepspeed", args, builders, lambda b: "nccl" if b == "gpu" else "gloo")


if __name__ == "__main__":
    sys.exit(main())
