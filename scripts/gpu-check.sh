#!/usr/bin/env bash
# The GPU check: scripts/gpu_check.py, which this runs with the same arguments (OUTDIR [ARCHIVE]) and environment;
# its header documents the stages, their time budget, the outputs and the exit status (0 pass, 77 no CUDA device,
# 1 otherwise). exec keeps the process id, so a TERM or INT sent to this script reaches the check itself.
exec python3 "$(dirname "$0")/gpu_check.py" "$@"
