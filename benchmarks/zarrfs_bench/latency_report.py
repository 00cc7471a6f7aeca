"""The latency section as markdown (a table a delay, with ratios and request counts) and as
a picture (a panel a round trip: per layout zarrfs beside TensorStore and zarr-python)."""

from __future__ import annotations

from pathlib import Path

from .latency import AZURE, TOOLS, Figures

TARGET_TS = 0.8  # zarrfs / TensorStore (1.0x is the aim)
TARGET_ZARR = 1.0  # zarrfs / zarr-python
COLOURS = {"zarrfs": "#1f77b4", "TensorStore": "#ff7f0e", "zarr-python": "#2ca02c", AZURE: "#9467bd"}


def ratio(a: float | None, b: float | None, target: float) -> str:
    if a is None or not b:
        return "-"
    return f"{a / b:.2f}x {'ok' if a / b >= target else 'MISS'}"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def render(figures: Figures, delays: list[float], size: int, repeat: int) -> str:
    lines = [
        "# zarrfs: remote reads under latency", "",
        f"uint16 zstd-1, {size >> 20} MiB; plain: 512x512 chunks (512 KiB); sharded: 2048x2048 "
        "shards (8 MiB) of 256x256 inner chunks (128 KiB). A moto S3 server on 127.0.0.1 behind "
        "a proxy delaying each direction by half the round trip (tests/helpers/netproxy.py). Cold whole "
        f"reads, medians of {repeat}: TensorStore (s3 kvstore, no cache pool), zarr-python "
        "(fsspec/s3fs), zarrfs (`dd bs=1M` of `data` on a fresh mount). Requests: what each "
        f"sent to the server (the proxy counts them). Targets: zarrfs >= {TARGET_TS:.1f}x "
        f"TensorStore, >= {TARGET_ZARR:.1f}x zarr-python. zarrfs daemon: its CPU seconds during the "
        "dd (all threads) and its peak RSS. zarrfs on Azure (`--azure`): the same `dd` of the same "
        "arrays on Azurite (an `az://` mount) behind the same proxy; its requests after the S3 ones.",
        "",
        "| round trip | layout | TensorStore MB/s | zarr-python MB/s | zarrfs MB/s | zarrfs / TensorStore "
        "| zarrfs / zarr-python | requests TS / zarr-python / zarrfs / Azure | zarrfs daemon CPU / peak RSS "
        "| zarrfs on Azure MB/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for delay in delays:
        for layout in ("plain", "sharded"):
            mbps = {tool: figures.mbps(delay, layout, tool) for tool in TOOLS}
            if not any(mbps.values()):
                continue  # (a layout left out)
            gets = " / ".join(str(figures.gets(delay, layout, tool) or "-")
                              for tool in ("TensorStore", "zarr-python", "zarrfs", AZURE))
            ts, zarr = mbps["TensorStore"], mbps["zarr-python"]
            usage = figures.daemon_usage(delay, layout)
            daemon = "-" if usage is None else f"{usage[0]:.2f} s / {usage[1] >> 20} MiB"
            lines.append(
                f"| {2000 * delay:.0f} ms | {layout} | {fmt(ts)} | {fmt(zarr)} "
                f"| {fmt(mbps['zarrfs'])} | {ratio(mbps['zarrfs'], mbps['TensorStore'], TARGET_TS)} "
                f"| {ratio(mbps['zarrfs'], mbps['zarr-python'], TARGET_ZARR)} | {gets} | {daemon} "
                f"| {fmt(mbps[AZURE])} |")
    if figures.errors:
        lines += ["", "Errors:", *(f"- {e}" for e in figures.errors)]
    return "\n".join(lines)


def plot(figures: Figures, delays: list[float], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(delays), figsize=(5.5 * len(delays), 4.2), squeeze=False)
    layouts = ("plain", "sharded")
    width = 0.8 / len(TOOLS)
    for ax, delay in zip(axes[0], delays, strict=True):
        x = np.arange(len(layouts))
        tallest = 1.0
        for k, tool in enumerate(TOOLS):
            values = [figures.mbps(delay, layout, tool) or 0.0 for layout in layouts]
            tallest = max(tallest, *values)
            ax.bar(x + (k - (len(TOOLS) - 1) / 2) * width, values, width, label=tool, color=COLOURS[tool])
        for xi, layout in zip(x, layouts, strict=True):
            zfs, ts = figures.mbps(delay, layout, "zarrfs"), figures.mbps(delay, layout, "TensorStore")
            if zfs is not None and ts:
                good = zfs / ts >= TARGET_TS
                ax.text(xi - (len(TOOLS) - 1) / 2 * width, zfs + tallest * 0.01, f"{zfs / ts:.2f}x",
                        ha="center", va="bottom", fontsize=8, fontweight="bold",
                        color="#2a7d2a" if good else "#c62828")
            gets = figures.gets(delay, layout, "zarrfs"), figures.gets(delay, layout, "TensorStore")
            ax.text(xi, -tallest * 0.12, f"requests zarrfs {gets[0]}, TS {gets[1]}", ha="center",
                    fontsize=7)
        ax.set_xticks(x, list(layouts))
        ax.set_ylim(0, tallest * 1.15)
        ax.set_ylabel("MB/s (uncompressed)")
        ax.set_title(f"S3 (moto), Azure (Azurite) at {2000 * delay:.0f} ms round trip", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0, 0].legend(fontsize=8, frameon=False)
    fig.suptitle("Cold whole-array reads from S3 and Azure under latency (ratio: zarrfs / TensorStore)",
                 fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
