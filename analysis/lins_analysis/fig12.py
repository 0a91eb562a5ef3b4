"""Fig. 12: TGS (tokens per GPU per second) versus GPU count, one panel per model, the Fig. 11 series."""

from . import scaling


def draw(data, out_dir, formats=("png", "pdf")):
    return scaling.draw_metric(data, out_dir, "fig12_tgs", lambda r: r["tgs"].to_numpy(dtype=float),
                               "TGS (tokens / GPU / s)", "Fig. 12: TGS versus GPU count", formats)
