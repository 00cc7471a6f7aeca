"""The report as a picture: one panel for reads, one for writes; per array, zarrfs beside
TensorStore, zarr-python and tmpfs (MB/s), zarrfs's ratio to TensorStore written above its
bar (green: target met, red: missed). tmpfs bars taller than the panel are cut, with their
value written in them, so that the gap between zarrfs and TensorStore stays visible."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .arrays import Config
from .common import T_COLD, T_S3, T_WRITE
from .context import Bench

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# (label, colour) of the bars of each group, in order; then the keys of each panel.
SERIES = [("zarrfs", "#1f77b4"), ("TensorStore", "#ff7f0e"), ("zarr-python", "#2ca02c"), ("tmpfs", "#b0b0b0")]
READ_KEYS = ("zfs_cold", "ts_read", "zarr_read", "tmpfs_dd")
S3_KEYS = ("s3_zfs", "s3_ts", "s3_zarr", None)
WRITE_KEYS = ("zfs_write", "ts_write", "zarr_write", "tmpfs_write")

Group = tuple[str, list[float | None], float]  # label, MB/s per series, zarrfs's target


def groups_of(b: Bench, keys: tuple[str | None, ...], target: float, configs: list[Config],
              prefix: str = "") -> list[Group]:
    out = []
    for c in configs:
        values = [b.res.mbps(c, k) if k else None for k in keys]
        if any(v is not None for v in values):
            out.append((prefix + c.name, values, target))
    return out


def draw_panel(ax: Axes, groups: list[Group], title: str) -> None:
    import numpy as np

    n = len(SERIES)
    width = 0.8 / n
    x = np.arange(len(groups))
    # The scale fits everything but the tmpfs bars (the machine's copy limit).
    tallest = max([v for _, vs, _ in groups for v in vs[: n - 1] if v] or [1.0])
    top = tallest * 1.25
    for k, (label, colour) in enumerate(SERIES):
        xs = x + (k - (n - 1) / 2) * width
        heights = [min(vs[k] or 0.0, top) for _, vs, _ in groups]
        bars = ax.bar(xs, heights, width, label=label, color=colour, edgecolor="white", linewidth=0.5)
        for bar, xi, (_, vs, _) in zip(bars, xs, groups, strict=True):
            v = vs[k]
            if v is not None and v > top:  # cut: hatched, its value written in it
                bar.set_hatch("//")
                ax.text(xi, top * 0.97, f"{v:,.0f}", rotation=90, ha="center", va="top", fontsize=7,
                        bbox={"facecolor": colour, "edgecolor": "none", "pad": 1})
    for xi, (_, vs, target) in zip(x + (0 - (n - 1) / 2) * width, groups, strict=True):
        zfs, ts = vs[0], vs[1]
        if zfs is not None and ts:
            ratio = zfs / ts
            ax.text(xi, min(zfs, top) + top * 0.01, f"{ratio:.2f}x", ha="center", va="bottom",
                     fontsize=7, color="#2a7d2a" if ratio >= target else "#c62828", fontweight="bold")
    ax.set_xticks(x, [g[0] for g in groups], rotation=15, ha="right", fontsize=8)
    ax.set_ylim(0, top * 1.08)
    ax.set_ylabel("MB/s (uncompressed)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def plot(b: Bench, out: Path) -> Path | None:
    """Write the PNG to `out`; None when there is nothing to draw (e.g. --only-group)."""
    reads = groups_of(b, READ_KEYS, T_COLD, b.configs)
    if b.s3_config is not None:
        reads += groups_of(b, S3_KEYS, T_S3, [b.s3_config], prefix="S3: ")
    writes = groups_of(b, WRITE_KEYS, T_WRITE, b.configs)
    panels = [
        (reads, f"Reads, cold, whole array (zarrfs: dd bs=1M of data; ratio to TensorStore, target "
                f">= {T_COLD:.1f}x)"),
        (writes, f"Writes, whole array (zarrfs: dd conv=notrunc,fsync into data; ratio to TensorStore, "
                 f"target >= {T_WRITE:.1f}x)"),
    ]
    panels = [p for p in panels if p[0]]
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = max(9.0, 1.25 * max(len(g) for g, _ in panels) + 2)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 4.2 * len(panels)), squeeze=False)
    for ax, (groups, title) in zip(axes[:, 0], panels, strict=True):
        draw_panel(ax, groups, title)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    labels[-1] += " (hatched: cut, value written in the bar)"
    fig.suptitle(f"zarrfs benchmark: {b.args.size >> 20} MiB arrays, medians of {b.args.repeat} runs "
                 f"({b.args.write_repeat} for writes), MB/s", y=0.99, fontsize=11)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.965), ncol=len(SERIES),
               frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.945))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
