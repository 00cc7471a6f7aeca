"""The Zarr v2 interop matrix, reads: arrays written by zarr-python 3 (`zarr_format=2`) and
by TensorStore's `zarr` driver, mounted directly as SOURCE (one mount each) and with
`-o endian=big`, compared with each writer's own reading (tests/helpers/v2_oracles.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.v2_cases import FILTER_SPECS, NC, SPECS, Spec
from tests.helpers.v2_oracles import (
    check_array,
    check_zarr_python_metadata,
    read_zarr_python,
    tensorstore_oracle,
    write_tensorstore,
    write_zarr_python,
    zarray_for,
)

# -- reads: arrays mounted as SOURCE ----------------------------------------------------------

# Mounted one by one (a mount costs about a second): every data type, compressor, filter kind,
# order, separator and fill value form at least once. Every case is also read in the group below.
DIRECT = [
    "b1-zlib", "i1-rank1-none", "u1-lzma", "i2-le-gzip-F-slash", "i2-be-zstd",
    "i4-be-rank3-blosc-F-slash", "i8-le-bz2-min-fill", "u8-be-lz4-max-fill", "f2-le-nan",
    "f2-be-minus-infinity-gzip", "f4-be-infinity-zstd-F", "f8-le-null-zlib", "c8-le-nan",
    "M8ns-be-default-fill-F", "m8ms-negative-lz4-slash", "S6-short-base64", "S6-null-F",
    "U3-le-string-fill", "U3-be-default-fill-F", "V4-base64-slash", "struct-base64-zlib",
    "struct-nested-base64", *(s.id for s in FILTER_SPECS), "rank0-zstd", "rank0-missing-be",
    "chunk-larger-than-array",
]


@pytest.mark.parametrize("case", DIRECT)
def test_zarr_python_array(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    written = write_zarr_python(spec, str(store))
    check_zarr_python_metadata(spec, store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


@pytest.mark.parametrize("case", ["i4-be-rank3-blosc-F-slash", "struct-null-F",
                                  "ts-defaults-i1-F-slash"])
def test_tensorstore_array(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    write_tensorstore(spec, str(store), zarray_for(spec))
    written = tensorstore_oracle(spec, store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


def test_stored_overhang_reads_as_fill(scratch: Path, mount_array: Any) -> None:
    """Edge chunks written by hand with other values than the fill value past the array's edge
    (v2 stores edge chunks full size; what is stored there is not part of the array)."""
    spec = Spec("hand-written-overhang", ">i2", shape=(3, 5), chunks=(2, 4), order="F",
                compressor=NC.Zlib(level=1), fill=7)
    store = scratch / "array"
    store.mkdir()
    (store / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [3, 5], "chunks": [2, 4], "dtype": ">i2", "order": "F",
        "compressor": {"id": "zlib", "level": 1}, "fill_value": 7, "filters": None}, indent=2))
    rng = np.random.default_rng(5)
    for key in ("0.1", "1.0", "1.1"):  # "0.0" missing
        values = rng.integers(100, 30000, (2, 4)).astype(">i2")
        (store / key).write_bytes(spec.compressor.encode(values.tobytes(order="F")))
    written = read_zarr_python(store)
    mount = mount_array(store, options=("ro",))
    check_array(spec, store, mount.path, written)


# -- big-endian flat view ------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["struct-base64-zlib", "U3-le-string-fill"])
def test_endian_big(case: str, scratch: Path, mount_array: Any) -> None:
    spec = SPECS[case]
    store = scratch / "array"
    written = write_zarr_python(spec, str(store))
    mount = mount_array(store, options=("ro", "endian=big"))
    check_array(spec, store, mount.path, written, endian=">")
