"""A group of 10,000 small arrays with consolidated metadata: `zarrfs mount` and `ls`."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import dir_bytes, log, run_checked, warm_files
from .context import Bench
from .mounting import MountError, daemon_pid, mounted, proc_status, unmount_daemon

GROUP_RUNS = 3  # fresh mounts per group figure
GROUP_LAYOUT = 1  # bump when write_group changes: the cached groups are then rebuilt


def array_meta(zarr_format: int) -> dict[str, Any]:
    """The metadata of each small array: 16 float32 in one uncompressed chunk."""
    if zarr_format == 2:
        return {
            "zarr_format": 2,
            "shape": [16],
            "chunks": [16],
            "dtype": "<f4",
            "compressor": None,
            "fill_value": 0.0,
            "filters": None,
            "order": "C",
            "dimension_separator": ".",
        }
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [16],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=4))


def write_group(path: Path, n: int, zarr_format: int) -> None:
    """A group of `n` small arrays (`a00000`, ...: 16 float32 each, one uncompressed chunk,
    attributes {"index": i}) with consolidated metadata (v2 `.zmetadata`; v3 inline in the
    root zarr.json), written directly: zarr-python takes minutes for 10,000 arrays."""
    values = np.arange(16, dtype="<f4")
    members: dict[str, Any] = {}
    for i in range(n):
        name = f"a{i:05d}"
        d = path / name
        d.mkdir(parents=True)
        attrs = {"index": i}
        meta = array_meta(zarr_format)
        if zarr_format == 2:
            write_json(d / ".zarray", meta)
            write_json(d / ".zattrs", attrs)
            members[f"{name}/.zarray"] = meta
            members[f"{name}/.zattrs"] = attrs
            (d / "0").write_bytes((values + i).tobytes())
        else:
            meta["attributes"] = attrs
            write_json(d / "zarr.json", meta)
            members[name] = meta
            (d / "c").mkdir()
            (d / "c" / "0").write_bytes((values + i).tobytes())
    if zarr_format == 2:
        write_json(path / ".zgroup", {"zarr_format": 2})
        members[".zgroup"] = {"zarr_format": 2}
        write_json(path / ".zmetadata", {"metadata": members, "zarr_consolidated_format": 1})
    else:
        consolidated = {"kind": "inline", "must_understand": False, "metadata": members}
        root = {"zarr_format": 3, "node_type": "group", "attributes": {}}
        write_json(path / "zarr.json", {**root, "consolidated_metadata": consolidated})


def build_group(b: Bench, zarr_format: int) -> Path:
    """The group of --group-arrays small arrays, cached in --data-dir (built once)."""
    n = b.args.group_arrays
    path = Path(b.args.data_dir) / f"group-v{zarr_format}-{n}-layout{GROUP_LAYOUT}"
    if path.is_dir():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".tmp-", dir=path.parent))
    t0 = time.perf_counter()
    try:
        write_group(tmp, n, zarr_format)
        import zarr  # the oracle: zarr-python sees the arrays through the consolidated metadata

        g = zarr.open_group(str(tmp), mode="r", zarr_format=zarr_format, use_consolidated=True)
        last = g[f"a{n - 1:05d}"]
        if last.attrs["index"] != n - 1 or last[3] != n + 2:
            raise RuntimeError(f"zarr-python reads the generated group {tmp} differently")
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"built group v{zarr_format} of {n} arrays in {time.perf_counter() - t0:.1f} s: {path}")
    return path


def group_mount_ls(b: Bench, key: str, store: Path, zarr_format: int) -> None:
    """One fresh mount: seconds for `zarrfs mount` (without -f) to return, i.e. until the
    daemon serves, then for `ls` of the root, then `ls -l` (each entry also costs the
    getxattr round trips `ls -l` makes); unmounted (daemon exited) afterwards."""
    mp = b.mountpoint()
    mp.mkdir()
    pid = None
    try:
        t0 = time.perf_counter()
        r = subprocess.run(
            [b.args.zarrfs, "mount", str(store), str(mp), "-o", b.mount_opts(f"log={b.logfile}")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        t_mount = time.perf_counter() - t0
        if r.returncode != 0 or not mounted(mp):
            raise MountError(f"zarrfs mount exited with {r.returncode}: {r.stderr.strip()[-800:]}")
        pid = daemon_pid(mp)
        t0 = time.perf_counter()
        listed = run_checked(["ls", str(mp)], timeout=300).stdout.split()
        t_ls = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = run_checked(["ls", "-l", str(mp)], timeout=300).stdout
        t_ls_l = time.perf_counter() - t0
        names = [ln.split()[-1] for ln in out.splitlines() if not ln.startswith("total")]
        # `ls -l` hides the dot files: v2's .zgroup/.zmetadata; v3 shows zarr.json.
        expected = b.args.group_arrays + (1 if zarr_format == 3 else 0)
        if len(names) != expected or len(listed) != expected:
            raise RuntimeError(
                f"ls (-l) of the group lists {len(listed)} ({len(names)}) entries, expected {expected}"
            )
        rss = proc_status(pid, "VmHWM") if pid else None
    finally:
        unmount_daemon(mp, pid or daemon_pid(mp))
    g = b.res.groups[key]
    g["mount"].append(t_mount)
    g["ls"].append(t_ls)
    g["ls_l"].append(t_ls_l)
    if rss:
        g["rss"].append(rss)


def groups(b: Bench) -> None:
    for zarr_format in (2, 3):
        key = f"v{zarr_format}"
        try:
            store = build_group(b, zarr_format)
        except Exception as e:
            b.res.err(f"group {key}: building", e)
            continue
        b.res.groups[key] = {"mount": [], "ls": [], "ls_l": [], "rss": [], "stored": dir_bytes(store)}
        warm_files(store)
        for _ in range(GROUP_RUNS):
            b.zarrfs_try(f"group {key} mount + ls", group_mount_ls, b, key, store, zarr_format)
