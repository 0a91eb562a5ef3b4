"""Fig. 13: peak memory per GPU versus GPU count, one panel per model, the Fig. 11 series.

Measured rows use the allocator's high-water mark; projected rows (or rows without it) the memory model's total."""

from . import scaling

GIB = 2.0 ** 30


def peak_gib(rows):
    peak = rows["peak_mem_bytes"].where(rows["peak_mem_bytes"] > 0, rows["model_mem_bytes"])
    return peak.to_numpy(dtype=float) / GIB


def draw(data, out_dir, formats=("png", "pdf")):
    return scaling.draw_metric(data, out_dir, "fig13_memory", peak_gib, "Peak memory per GPU (GiB)",
                               "Fig. 13: peak memory per GPU", formats)
