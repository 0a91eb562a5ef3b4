"""The peers' Python that scripts/install-peers.sh makes, for the peers tests: under $LINS_PEERS_VENV, else the
user's cache (${XDG_CACHE_HOME:-~/.cache}/lins/peers-venv)."""

import os
from pathlib import Path


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
