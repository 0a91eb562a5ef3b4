"""Where this process sits in the job, whoever launched it: torchrun (RANK, WORLD_SIZE, LOCAL_RANK), Open MPI's mpirun
(OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_*) or Slurm's srun (SLURM_*); and the process group over it."""

import os
import socket
from dataclasses import dataclass
from typing import Optional

_SOURCES = [
    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
]


@dataclass(frozen=True)
class Place:
    rank: int
    world: int
    local_rank: int
    launcher: str  # the variables it was read from


def place_from_env(env=None) -> Place:
    env = os.environ if env is None else env
    for rank, world, local in _SOURCES:
        if rank in env and world in env:
            return Place(int(env[rank]), int(env[world]), int(env.get(local, "0")), rank.split("_")[0].lower())
    return Place(0, 1, 0, "none")


def init_distributed(backend: str, place: Place, timeout_s: float = 600.0):
    """Joins the default process group (env:// rendezvous). MASTER_ADDR defaults to this host for one-node jobs; a job
    over several hosts launched by mpirun or srun must set MASTER_ADDR (jobs/peers.sbatch does)."""
    import datetime

    import torch.distributed as dist

    os.environ["RANK"] = str(place.rank)
    os.environ["WORLD_SIZE"] = str(place.world)
    os.environ["LOCAL_RANK"] = str(place.local_rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=place.rank, world_size=place.world,
                                timeout=datetime.timedelta(seconds=timeout_s))
    return dist


def device_for(backend: str, place: Place):
    import torch

    if backend == "gpu":
        if not torch.cuda.is_available():
            raise SystemExit("lins_peers: --backend gpu but torch sees no CUDA device")
        torch.cuda.set_device(place.local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def host_name() -> str:
    return socket.gethostname()


def local_devices() -> Optional[int]:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else None
