"""The harness of the old HDF5 readers (tests/helpers/old_hdf5_readers.py) on a file HDF5 1.8
itself wrote, with zstd chunks: its metadata alone is compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # (zstd: h5py 3 reads the zstd datasets, and writes one in the HDF5 1.8 file)
import numpy as np
import pytest

from tests.helpers.old_hdf5_readers import READERS, Expected, as_held, assert_reads

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")]


# -- the harness, on files HDF5 writes --------------------------------------------------------


def hdf5_1_8_file(path: Path) -> dict[str, Expected]:
    """A file in HDF5 1.8's format (h5py 3 with libver="earliest": layout version 3, chunks
    indexed by a version-1 B-tree) of the kinds of datasets data.h5 holds; what each holds.
    The strings of variable length fill their chunks, none is empty and every chunk is
    written: HDF5 writes an empty string, and the elements of an edge chunk past the
    dataset, as no heap object, on which pyfive 1.3 fails (its reader of chunked strings
    wants a heap there: AssertionError), and jsfive fails on chunks of strings not written."""
    rng = np.random.default_rng(2)
    expected: dict[str, Expected] = {}
    with h5py.File(path, "w", libver="earliest") as f:

        def add(name: str, data: np.ndarray[Any, Any], rows: int | None = None, **kwargs: Any) -> None:
            """`data` as dataset `name`, only its first `rows` written (the chunks of the
            rest are never written: the fill value)."""
            dataset = f.create_dataset(name, shape=data.shape, dtype=data.dtype, **kwargs)
            held = data.copy()
            if rows is None:
                dataset[...] = data
            else:
                dataset[:rows] = data[:rows]
                held[rows:] = dataset.fillvalue
            expected[name] = Expected(*as_held(held))

        add("zlib", rng.integers(0, 2**16, (37, 21)).astype("uint16"), rows=24, chunks=(8, 16),
            compression="gzip", fillvalue=3)
        add("shuffle", rng.standard_normal((9, 10, 11)).astype("float32"), chunks=(4, 4, 4), shuffle=True,
            compression="gzip", fillvalue=np.float32(np.nan))
        add("fletcher", rng.integers(-2**62, 2**62, 1000).astype("int64"), chunks=(64,), compression="gzip",
            fletcher32=True, fillvalue=-5)
        add("bigend", rng.standard_normal((6, 7)).astype(">f8"), chunks=(4, 4), fillvalue=-1.0)
        add("scalar", np.array(2.5))
        add("chars", np.array([[b"a", b"b"], [b"\xc3", b"\0"]], dtype="S1"), chunks=(1, 2))
        vlen = np.array([f"w{i} é" for i in range(6)], dtype=object)
        f.create_dataset("vlen", data=vlen, dtype=h5py.string_dtype(), chunks=(3,))
        expected["vlen"] = Expected(vlen, "text")
        add("g/never", np.arange(120, dtype="int16").reshape(20, 6), rows=8, chunks=(4, 3), fillvalue=-9)
        f["g/never"].attrs.update({"units": "m", "levels": np.array([1, 2], "int32"), "scale": 0.5})
        f.create_dataset("zstd", data=np.arange(10, dtype="int16"), chunks=(5,), **hdf5plugin.Zstd())
        expected["zstd"] = Expected(None, "number")
    return expected


@pytest.fixture(scope="module")
def hdf5_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Expected]]:
    path = tmp_path_factory.mktemp("old_readers_hdf5") / "earliest.h5"
    return path, hdf5_1_8_file(path)


@pytest.mark.parametrize("reader", READERS)
def test_the_readers_read_hdf5_1_8_files(hdf5_file: tuple[Path, dict[str, Expected]], tmp_path: Path,
                                         reader: str) -> None:
    """The harness on a file of HDF5 1.8's format that HDF5 wrote, no mount: each reader
    reads it, and the comparison finds it the same, so a difference found in data.h5 is
    data.h5's."""
    path, expected = hdf5_file
    assert_reads(reader, path, expected, tmp_path / "reading.json")
