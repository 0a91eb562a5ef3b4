"""The peers' Python that scripts/install-peers.sh makes, for the peers tests: under $LINS_PEERS_VENV, else the
user's cache (${XDG_CACHE_HOME:-~/.cache}/lins/peers-venv); the environment the tests run it in; and their torchrun
command line."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def peers_python():
    """The path of the peers' Python; it may not exist (check with found())."""
    venv = os.environ.get("LINS_PEERS_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lins", "peers-venv")
    return os.path.join(venv, "bin", "python")


def found(python):
    """True when `python` exists; else says the test is skipped and why (the caller returns 77)."""
    if Path(python).exists():
        return True
    print(f"skipped: no peers' Python at {python} (run scripts/install-peers.sh)")
    return False


def peers_env(**more):
    """This environment -- its PYTHONPATH, which ctest sets to the checkout's packages, included -- with one
    BLAS/OpenMP thread per rank, no bytecode written into the tree, and `more`."""
    return dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", **more)


def torchrun(python, ranks, port, log_dir):
    """The head of a torchrun command line: `ranks` ranks on this host, rendezvous on `port`, torchrun's own logs in
    `log_dir` (left to itself, torchrun makes a folder per launch in the temporary directory and never removes it)."""
    return [python, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks), "--master-port", str(port),
            "--log-dir", str(log_dir)]
