"""The report's tables, one function a section (in the order of SECTIONS)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .arrays import Config
from .common import (
    MB,
    T_COLD,
    T_GROUP_LS,
    T_GROUP_MOUNT,
    T_MEMMAP,
    T_RAND,
    T_RECHECK,
    T_S3,
    T_WARM,
    T_WRITE,
    T_WRITE_AIM,
    fmt_size,
    median,
)
from .groups import GROUP_RUNS

if TYPE_CHECKING:
    from .context import Bench
    from .report import Report


@dataclass
class Target:
    key: str
    figure: str
    target: str
    higher_is_better: bool = True


def targets(b: Bench) -> list[Target]:
    """The rows of the summary: the issue's targets, then the ones kept from before."""
    return [
        Target("cold", "cold `dd bs=1M` of `data`, each array", f">= {T_COLD:.1f}x TensorStore's read"),
        Target("memmap", "`np.memmap` sum over `data`, cold", f">= {T_MEMMAP:.1f}x TensorStore's read"),
        Target(
            "write",
            "whole-array write, `dd conv=notrunc,fsync`",
            f">= {T_WRITE:.1f}x TensorStore's write ({T_WRITE_AIM:.1f}x is the aim)",
        ),
        Target("s3", "cold `dd` of an array on S3", f">= {T_S3:.1f}x TensorStore's `s3` kvstore"),
        Target(
            "rss",
            "daemon peak RSS, every mount",
            f"<= cache + 100 MiB = {fmt_size(b.rss_target)}",
            higher_is_better=False,
        ),
        Target("group_mount", "group of 10,000 arrays: mount", f"< {T_GROUP_MOUNT:g} s", False),
        Target("group_ls", "group of 10,000 arrays: `ls`", f"< {T_GROUP_LS:g} s", False),
        Target("warm", "warm re-read (page cache), dd", f">= {T_WARM:.1f}x tmpfs dd"),
        Target("rand", "random 4 KiB preads after a full pass", f">= {T_RAND:,}/s"),
        Target("recheck", "cold dd, recheck=open (default)", f">= {T_RECHECK:.2f}x recheck=never"),
        Target("shard", "store bytes for one inner chunk", "its shard's index + that chunk", False),
    ]


def arrays(r: Report) -> None:
    if r.a.only_group:
        return
    r.section("Arrays")
    rows = []
    for c in r.b.configs:
        chunk = fmt_size(c.chunks[0] * c.chunks[1] * np.dtype(c.dtype).itemsize)
        rows.append([
            c.name, f"{c.shape[0]}x{c.shape[1]}", f"{c.chunks[0]}x{c.chunks[1]} ({chunk})",
            f"{c.shards[0]}x{c.shards[1]}" if c.shards else "-", fmt_size(c.nbytes),
            fmt_size(c.stored), f"{c.nbytes / max(1, c.stored):.2f}x",
        ])
    r.table(["array", "shape", "chunks", "shards", "size", "stored", "ratio"], rows)


@dataclass
class Col:
    """A column of a table with a row per array: the median of `key` (seconds: as MB/s; a
    rate: as it is; rss: the highest), with its ratio to the column `ref`, judged against
    `target` as the summary row `check` (the summary names it by `label` and the array)."""

    header: str
    key: str
    ref: str | None = None
    target: float | None = None
    check: str = ""
    kind: str = "mbps"  # "mbps", "rate" (an absolute target) or "rss" (judged as "rss")
    label: str = ""


def config_table(r: Report, configs: list[Config], cols: list[Col], what: str = "") -> None:
    rows = []
    for c in configs:
        figures = {
            col.key: r.res.mbps(c, col.key) if col.kind == "mbps" else median(r.res.values(c, col.key))
            for col in cols
            if col.kind != "rss"
        }
        row = [c.name]
        for col in cols:
            name = f"{what}{col.label}{c.name}"
            v, ref = figures.get(col.key), figures.get(col.ref) if col.ref else None
            if col.kind == "rss":
                row.append(r.rss(r.res.peak(c, col.key), name))
            elif col.kind == "rate" and col.target is not None:
                row.append(r.cell_abs(v, ref, col.target, col.check, name))
            else:
                row.append(r.cell(v, ref, col.target, col.check, name))
        rows.append(row)
    r.table(["array"] + [col.header for col in cols], rows)


def per_array(
    title: str, text: str, cols: list[Col], skip: str = "only_group", s3: bool = False
) -> Callable[[Report], None]:
    """A section with a row per array (the S3 array alone with `s3`), left out when the
    option `skip` is set."""

    def section(r: Report) -> None:
        configs = ([r.b.s3_config] if r.b.s3_config else []) if s3 else r.b.configs
        if getattr(r.a, skip) or not configs:
            return
        r.section(title, text)
        config_table(r, configs, cols, "S3 " if s3 else "")

    return section


reads = per_array(
    "Reads: whole array, cold (MB/s; ratio to TensorStore)",
    f"Targets: zarrfs cold dd >= {T_COLD:.1f}x TensorStore, zarrfs memmap sum >= {T_MEMMAP:.1f}x "
    "TensorStore, daemon peak RSS (over the mounts of this array: dd, memmap, recheck=never) "
    "<= cache + 100 MiB. Every zarrfs figure is on a fresh mount. tmpfs: the raw bytes on "
    "/dev/shm, the machine's limit (memmap sum: what numpy's sum alone costs).",
    [
        Col("TensorStore", "ts_read"),
        Col("zarr-python", "zarr_read", "ts_read"),
        Col("tmpfs dd", "tmpfs_dd", "ts_read"),
        Col("zarrfs cold dd", "zfs_cold", "ts_read", T_COLD, "cold"),
        Col("tmpfs memmap sum", "tmpfs_memmap", "ts_read"),
        Col("zarrfs memmap sum", "zfs_memmap", "ts_read", T_MEMMAP, "memmap"),
        Col("daemon peak RSS", "zfs_rss", kind="rss", label="reads "),
    ],
)
rereads = per_array(
    "Re-reads: warm dd (page cache) and random 4 KiB preads",
    f"On the mount of the cold dd, after it. Targets: warm dd >= {T_WARM:.1f}x tmpfs dd; "
    f"random 4 KiB >= {T_RAND:,}/s (ratio to the same preads of the raw file on tmpfs).",
    [
        Col("tmpfs dd", "tmpfs_dd"),
        Col("zarrfs warm dd", "zfs_warm", "tmpfs_dd", T_WARM, "warm"),
        Col("tmpfs random 4 KiB/s", "tmpfs_rand", kind="rate"),
        Col("zarrfs random 4 KiB/s", "zfs_rand", "tmpfs_rand", T_RAND, "rand", kind="rate"),
    ],
)
recheck = per_array(
    "Close-to-open: what `recheck=open` (the default) costs a cold read",
    f"Target: cold dd with recheck=open >= {T_RECHECK:.2f}x the same with recheck=never.",
    [
        Col("zarrfs cold dd, recheck=never", "zfs_cold_never"),
        Col("zarrfs cold dd, recheck=open", "zfs_cold", "zfs_cold_never", T_RECHECK, "recheck"),
    ],
)
writes = per_array(
    "Writes (MB/s; whole array of other values into a fresh copy; ratio to TensorStore)",
    f"Target: zarrfs `dd conv=notrunc,fsync` >= {T_WRITE:.1f}x TensorStore ({T_WRITE_AIM:.1f}x is "
    "the aim); TensorStore's file driver fsyncs too, zarr-python does not; tmpfs: dd of the raw "
    "bytes over a file on /dev/shm. \"incl. unmount\" adds the unmount until the daemon has "
    "exited. Daemon peak RSS (sharded writes included) <= cache + 100 MiB.",
    [
        Col("TensorStore write", "ts_write"),
        Col("zarr-python write", "zarr_write", "ts_write"),
        Col("tmpfs dd write", "tmpfs_write", "ts_write"),
        Col("zarrfs dd write+fsync", "zfs_write", "ts_write", T_WRITE, "write"),
        Col("zarrfs incl. unmount", "zfs_write_close", "ts_write"),
        Col("daemon peak RSS", "zfs_write_rss", kind="rss", label="write "),
    ],
    skip="skip_writes",
)
s3 = per_array(
    "S3 (MB/s; the whole array from a local moto S3 server; ratio to TensorStore)",
    "The array's files uploaded to a moto server on 127.0.0.1 (the test suite's, in a child "
    "process). TensorStore: the `s3` kvstore with that endpoint, no cache pool; zarr-python: "
    "fsspec/s3fs with `endpoint_url`; zarrfs: cold `dd bs=1M` of `data` on a fresh "
    f"`zarrfs mount s3://... -o endpoint_url=...` each run. Targets: zarrfs >= {T_S3:.1f}x "
    "TensorStore, daemon peak RSS <= cache + 100 MiB.",
    [
        Col("TensorStore s3", "s3_ts"),
        Col("zarr-python s3", "s3_zarr", "s3_ts"),
        Col("zarrfs cold dd", "s3_zfs", "s3_ts", T_S3, "s3"),
        Col("daemon peak RSS", "s3_rss", kind="rss"),
    ],
    skip="skip_s3",
    s3=True,
)


def memory(r: Report) -> None:
    mem = r.res.memory
    if not mem:
        return
    r.section(f"Memory (streaming {fmt_size(mem['bytes'])} with `-o {mem['opts']}`)")
    r.table(
        ["array", "stored", "dd MB/s", "daemon peak RSS (VmHWM)",
         "the mount's processes' peak PSS (decoding processes too)", "target"],
        [[f"uint16/zstd/sharded {fmt_size(mem['bytes'])}", fmt_size(mem["stored"]),
          f"{mem['bytes'] / mem['seconds'] / MB:,.0f}", r.rss(mem["hwm"], "streaming the big array"),
          r.rss(mem.get("pss"), "all of the mount's processes streaming the big array"),
          f"<= {fmt_size(r.b.rss_target)}"]],
    )


def small_chunks(r: Report) -> None:
    if not r.res.small:
        return
    r.section(
        "Small chunks (MB/s; cold dd against TensorStore's read; no target)",
        "What each chunk costs: the same values in chunks of 4 KiB and 64 KiB, zstd-1, each zarrfs "
        "run on a fresh mount. The arrays above have chunks of 512 KiB and 1 MiB; real data often "
        "comes in smaller ones.",
    )
    rows = []
    for name, f in r.res.small.items():
        ts_t, zfs_t = median(f["ts"]), median(f["zfs"])
        ts_mbps = f["nbytes"] / ts_t / MB if ts_t else None
        zfs_mbps = f["nbytes"] / zfs_t / MB if zfs_t else None
        ratio = f" ({zfs_mbps / ts_mbps:.2f}x)" if zfs_mbps and ts_mbps else ""
        rows.append([
            name, fmt_size(f["chunk"]), fmt_size(f["stored"]),
            "n/a" if ts_mbps is None else f"{ts_mbps:,.0f}",
            "n/a" if zfs_mbps is None else f"{zfs_mbps:,.0f}{ratio}",
            r.rss(max(f["rss"]) if f["rss"] else None, f"small chunks {name}"),
        ])
    r.table(["array", "chunk", "stored", "TensorStore", "zarrfs cold dd", "daemon peak RSS"], rows)


def sharding(r: Report) -> None:
    sh = r.res.shard
    if not sh:
        return
    r.section(
        "Sharding: store bytes to read one inner chunk",
        f"A 4 KiB page of `data` inside one {sh['chunk']} inner chunk "
        f"({fmt_size(sh['chunk_bytes'])} raw) of the first shard "
        f"({fmt_size(sh['shard_bytes'])} raw, {fmt_size(sh['shard_stored'])} stored, "
        f"index {fmt_size(sh['index_nbytes'])}), read with POSIX_FADV_RANDOM. Bytes = "
        "the daemon's `rchar` (/proc/<pid>/io) across the read, which also counts the "
        "few hundred bytes of FUSE requests read from /dev/fuse. Target: index + that "
        "chunk on a fresh mount; then that chunk alone. Daemon peak RSS: "
        f"{r.rss(sh['peak'], 'sharding')}.",
    )
    rows = []
    for row in sh["rows"]:
        x = row["rchar"] / row["expected"]
        ok = r.judge("shard", row["how"], row["rchar"] <= row["expected"] + 16 * 1024, x, f"{x:.2f}x")
        rows.append([
            row["how"], row["what"], fmt_size(row["expected"]), fmt_size(row["rchar"]), f"{x:.2f}x",
            f"{row['rchar'] / sh['shard_stored']:.4f}x", str(row["syscr"]), ok,
        ])
    r.table(["read", "target", "target bytes", "store bytes read", "x target", "x shard stored",
             "read syscalls", ""], rows)


def groups(r: Report) -> None:
    if not r.res.groups:
        return
    n = r.a.group_arrays
    r.section(
        f"Groups: mount and `ls` of {n:,} small arrays",
        f"A group of {n:,} arrays of 16 float32 (one chunk each) with consolidated metadata (v2 "
        "`.zmetadata`, v3 inline in the root zarr.json), store files in the page cache. Each run is "
        "a fresh mount: `zarrfs mount` without `-f` until it returns (the daemon serves), then `ls` "
        "of the root, then `ls -l` (no target: it adds two getxattr round trips per entry, for "
        f"SELinux and ACLs). Medians of {GROUP_RUNS} runs. Targets: mount < {T_GROUP_MOUNT:g} s, "
        f"ls < {T_GROUP_LS:g} s, daemon peak RSS <= cache + 100 MiB.",
    )
    rows = []
    for key, g in r.res.groups.items():
        tll = median(g["ls_l"])
        rows.append([
            f"{key}, {n:,} arrays", fmt_size(g["stored"]),
            r.seconds(median(g["mount"]), T_GROUP_MOUNT, "group_mount", key),
            r.seconds(median(g["ls"]), T_GROUP_LS, "group_ls", key),
            "n/a" if tll is None else f"{tll:.3f} s",
            r.rss(max(g["rss"]) if g["rss"] else None, f"group {key}"),
        ])
    r.table(["group", "stored", "zarrfs mount", "ls root", "ls -l root", "daemon peak RSS"], rows)


def profile(r: Report) -> None:
    pr = r.res.profile
    if not pr:
        return
    r.section(
        f"Profile: cold dd of {pr['config']} under py-spy "
        f"({pr['bytes'] / pr['seconds'] / MB:,.0f} MB/s while sampled)",
        f"{pr['samples']} busy samples over all threads at 200 Hz ({pr['idle']} more "
        f"of threads waiting for work left out); raw stacks in `{pr['file']}`.",
    )
    for title, key in (("Top functions by own samples", "top"),
                       ("zarrfs functions by inclusive samples", "top_incl")):
        r.add(f"{title}:", "")
        total = max(1, pr["samples"])
        r.table(["self %", "inclusive %", "function"],
                [[f"{100 * s / total:.1f}", f"{100 * inc / total:.1f}", f"`{fn}`"] for fn, s, inc in pr[key]])


def errors(r: Report) -> None:
    if not r.res.errors and r.b.zarrfs_ok:
        return
    r.section("Errors")
    if r.a.skip_zarrfs:
        r.add("- zarrfs measurements skipped (--skip-zarrfs)")
    r.add(*(f"- {e}" for e in dict.fromkeys(r.res.errors)), "")


SECTIONS: list[Callable[[Report], None]] = [
    arrays, reads, rereads, recheck, writes, s3, small_chunks, memory, sharding, groups, profile, errors,
]
