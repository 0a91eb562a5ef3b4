"""The real systems lins's engines stand for, run on lins's model, weights and data (python/lins_torch), writing
lins's step CSV, a JSON provenance file and a log of every collective they issue (docs/peers.md).

Runners (one process per rank, launched by torchrun, mpirun or srun):
    python -m lins_peers.fsdp2           PyTorch FSDP2: full, zero2 (no reshard), hpz (reshard to a node), hsdp
    python -m lins_peers.deepspeed_zero  DeepSpeed ZeRO-1/2/3, ZeRO++ hpZ (and MiCS on DeepSpeed 0.19.6)
    python -m lins_peers.ddp             PyTorch DistributedDataParallel
Tools:
    python -m lins_peers.compare         lines up two collective logs (lins's and a peer's) and reports differences

Modules: recorder (wraps torch.distributed's collectives), runner (the step loop, the files), workload (the model,
data and optimizer from lins_torch), options, launch, results, expectations (each peer's lins preset and the known
differences, with reasons).
"""
