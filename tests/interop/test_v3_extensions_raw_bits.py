"""Zarr v3's r* (raw bits) data types, the core spec's form, which zarr-python 3.1 does not
write: r24 reads and writes through a real mount like raw bytes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers.v3_extension_cases import CHUNKS, DTYPE_CASES, create, read_zarr

# -- r* (raw bits): the core spec's form, which zarr-python 3.1 does not write ----------------


def test_raw_bits_r24_reads_and_writes_like_raw_bytes(scratch: Path, mount_array: Any) -> None:
    """`"data_type": "r24"` with an integer-list fill value: the same bytes as the raw_bytes
    array zarr-python wrote (zarr-python cannot open r*, so the metadata is swapped back to
    check the write)."""
    case = DTYPE_CASES["V3-fill"]
    path = scratch / "r24.zarr"
    whole = create(path, case)
    raw_bytes_meta = (path / "zarr.json").read_bytes()
    doc = json.loads(raw_bytes_meta)
    doc["data_type"] = "r24"
    doc["fill_value"] = [1, 2, 3]
    (path / "zarr.json").write_text(json.dumps(doc, indent=2))
    r24_meta = (path / "zarr.json").read_bytes()

    mount = mount_array(path)
    assert mount.data.read_bytes() == whole.tobytes()
    assert mount.chunk("c/0/0").read_bytes() == b"\x01\x02\x03" * math.prod(CHUNKS)
    assert os.getxattr(mount.data, "user.zarr.dtype") == b"|V3"
    new = np.frombuffer(bytes(range(30)), dtype="V3")
    with open(mount.data, "r+b") as f:
        f.seek(3 * 14)
        f.write(new.tobytes())
    assert mount.unmount() == 0
    assert (path / "zarr.json").read_bytes() == r24_meta
    (path / "zarr.json").write_bytes(raw_bytes_meta)
    expected = whole.copy()
    expected.reshape(-1)[14:24] = new
    assert read_zarr(path).tobytes() == expected.tobytes()
