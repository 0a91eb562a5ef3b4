"""Fig. 11: MFU versus GPU count, one panel per model; series ZeRO-1, ZeRO-3, ZeRO++, MiCS, Lins."""

from . import scaling


def mfu_percent(rows):
    mfu = rows["mfu"].to_numpy(dtype=float)
    # the CSV holds a fraction (0.52); a file that already holds percent is left as it is
    return mfu if (mfu[mfu == mfu] > 1.5).any() else 100.0 * mfu


def draw(data, out_dir, formats=("png", "pdf")):
    return scaling.draw_metric(data, out_dir, "fig11_mfu", mfu_percent, "MFU (%)",
                               "Fig. 11: MFU versus GPU count", formats)
