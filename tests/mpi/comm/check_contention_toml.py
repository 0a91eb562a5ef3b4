#!/usr/bin/env python3
"""Checks a file written by `lins comm --contention`: it parses as TOML, its [contention] table has every key the
network files' parser reads, each value in a sane range, and its comment header says how it was measured."""
import sys
import tomllib

path, expect_source = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
table = tomllib.loads(text)["contention"]
keys = ["source", "kappa_gemm_intra", "kappa_gemm_inter", "kappa_memory_intra", "kappa_memory_inter",
        "kappa_combine", "lambda_intra", "lambda_inter", "links_shared", "eta"]
errors = [f"missing key {k}" for k in keys if k not in table]
errors += [f"unexpected key {k}" for k in table if k not in keys]
if not errors:
    for k in keys:
        if k.startswith(("kappa_", "lambda_")) and k != "kappa_combine":
            # Clamped to [0, 100], what a network file accepts: 2 ranks per core on a busy machine can starve a
            # rank's progress thread, so a slowdown at the ceiling is possible here.
            if not (isinstance(table[k], (int, float)) and 0 <= table[k] <= 100):
                errors.append(f"{k} = {table[k]!r} is outside [0, 100]")
    if table["kappa_combine"] not in ("sum", "max"):
        errors.append(f"kappa_combine = {table['kappa_combine']!r}")
    if not isinstance(table["links_shared"], bool):
        errors.append(f"links_shared = {table['links_shared']!r} is not a boolean")
    if not (0 < table["eta"] <= 1):
        errors.append(f"eta = {table['eta']} is outside (0, 1]")
    if table["source"] != expect_source:
        errors.append(f"source = {table['source']!r}, expected {expect_source!r}")
for part in ["# lins comm --contention:", " ranks = ", "commit ", "backend ", "fitted: "]:
    if part not in text:
        errors.append(f"the header lacks {part!r}")
for e in errors:
    print(f"{path}: {e}")
sys.exit(1 if errors else 0)
