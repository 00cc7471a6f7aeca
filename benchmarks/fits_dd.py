#!/usr/bin/env python3
"""zarrfs benchmark, `data.fits` against `data`: cold `dd bs=1M` of each from a fresh mount (its
store's files in the page cache), on cold_dd.py's 256 MiB image (8192 x 16384 in 512 x 512
chunks) as uint16, which FITS stores as int16 with BZERO (every element's top bit flipped on
the way), and as int16, whose big-endian bytes data.fits serves as they are; blosc lz4 with
shuffle and zstd level 1, local. The bytes of every run are checked (their SHA-256 against
the values', after the timed `dd`, from the page cache).

    .venv/bin/python benchmarks/fits_dd.py [--repeat 3] [--rows 8192]

Prints a Markdown table of medians (MB/s); the runs alternate, one of each case a round.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cold_dd import CHUNKS, CODECS, image
from zarrfs_bench.common import VENV_BIN, alternated_medians, dd
from zarrfs_bench.mounting import Mount

HEADER_BLOCK = 2880


def served(values: np.ndarray) -> dict[str, bytes]:
    """What `data` and the elements of `data.fits` hold (FITS: big-endian, uint16 as int16 + 32768)."""
    fits = values.astype(values.dtype.newbyteorder(">"))
    if values.dtype.kind == "u":
        fits = (values.astype(np.int32) - 32768).astype(">i2")
    return {"data": values.tobytes(), "data.fits": fits.tobytes()}


def cold_read(store: Path, mountpoint: Path, name: str, want: bytes) -> float:
    """MB/s of one cold read of `name`; its elements checked (after the header's blocks)."""
    expected = hashlib.sha256(want).hexdigest()
    with Mount(str(VENV_BIN / "zarrfs"), store, mountpoint, "ro"):
        path = mountpoint / name
        header = 0 if name == "data" else _header_size(path)
        size = path.stat().st_size
        seconds = dd(path, "/dev/null", expect=size)
        with open(path, "rb") as f:  # (from the page cache now: checked apart from the timing)
            f.seek(header)
            found = hashlib.sha256(f.read(len(want))).hexdigest()
    assert found == expected, f"{name}: wrong bytes"
    return size / seconds / 1e6


def _header_size(path: Path) -> int:
    with open(path, "rb") as f:
        blocks = 0
        while True:
            block = f.read(HEADER_BLOCK)
            blocks += 1
            if any(block[i : i + 80].startswith(b"END ") for i in range(0, HEADER_BLOCK, 80)):
                return blocks * HEADER_BLOCK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=8192)
    args = parser.parse_args()
    print("| array | data: MB/s | data.fits: MB/s | data.fits / data |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="zarrfs-fits-dd-") as tmp:
        root = Path(tmp)
        for dtype in ("uint16", "int16"):
            values = image(args.rows).astype(dtype)
            for label, codec in CODECS.items():
                store = root / f"{dtype}-{len(label)}.zarr"
                zarr.create_array(store, shape=values.shape, dtype=values.dtype, chunks=CHUNKS,
                                  serializer=BytesCodec(), compressors=codec, fill_value=0)[...] = values
                cases = {name: functools.partial(cold_read, store, root / "mnt", name, want)
                         for name, want in served(values).items()}
                speeds = alternated_medians(dict(cases), args.repeat)
                print(f"| {dtype}, {label} | {speeds['data']:,.0f} | {speeds['data.fits']:,.0f} "
                      f"| {speeds['data.fits'] / speeds['data']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
