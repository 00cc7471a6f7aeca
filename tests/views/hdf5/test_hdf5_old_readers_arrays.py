"""`data.h5` of Zarr arrays through real mounts, read by readers of HDF5 1.8's format that know
nothing of HDF5 1.10's (tests/helpers/old_hdf5_readers.py): Zarr v2 and v3 arrays of 1 to 3
dimensions with edge chunks, a scalar, integers, floats (NaN, infinities), bool, strings
(variable-length, numpy `U`, `S` bytes), chunks passed through as stored (zlib, shuffle +
zlib, zlib + fletcher32) or decoded by the mount (gzip's header, no compression), chunks never
written (the fill value), in the group's data.h5, a subgroup's and each array's own; zstd
chunks, which the default mount serves decoded (none of these readers has the plugin).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
import zarr.codecs.numcodecs

from tests.helpers.hdf5_sources import named, string_array, strings
from tests.helpers.mounting import mounted
from tests.helpers.old_hdf5_readers import READERS, Expected, as_held, assert_reads, codecs

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")]


def populate(group: zarr.Group, fmt: int) -> None:
    """The arrays of every case in `group` (each case's chunks of only its fill value are
    not stored, as zarr-python leaves them)."""
    rng = np.random.default_rng(11)

    def create(name: str, data: np.ndarray[Any, Any], chunks: tuple[int, ...], *chain: str,
               unwritten: tuple[slice, ...] | None = None, **kwargs: Any) -> None:
        array = group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks,
                                   **codecs(fmt, *chain), **kwargs)
        if unwritten is not None:  # (chunks of the fill value alone: zarr-python stores none)
            data = data.copy()
            data[unwritten] = array.fill_value
        array[...] = data
        if unwritten is not None:
            assert array.nchunks_initialized < array.nchunks, name

    plain = rng.integers(-2**31, 2**31, (100, 130)).astype("int32")
    plain[64:, :64] = 7
    create("plain", plain, (32, 64), fill_value=7, **named(fmt, ["plain_y", "plain_x"]))
    create("zlib", rng.integers(0, 2**16, (37, 21)).astype("uint16"), (8, 16), "zlib", fill_value=3,
           unwritten=(slice(24, None), slice(None)))
    floats = rng.standard_normal((9, 10, 11)).astype("float32") * 1e30
    floats.reshape(-1)[[0, 5, 77]] = [np.nan, np.inf, -np.inf]
    create("shuffle", floats, (4, 4, 4), "shuffle:4", "zlib", fill_value=np.nan,
           unwritten=(slice(4, 8), slice(None), slice(8, None)), **named(fmt, ["level", "row", "column"]))
    wide = rng.integers(-2**62, 2**62, 1000).astype("int64")
    wide[:3] = [2**63 - 1, -2**63, 0]
    create("fletcher", wide, (64,), "zlib", "fletcher32", fill_value=-5, unwritten=(slice(900, None),))
    near_top = np.uint64(2**64 - 1) - rng.integers(0, 2**40, 50).astype("uint64")
    create("gzip", near_top, (16,), "gzip", fill_value=0)
    create("int8", rng.integers(-128, 128, (7, 5)).astype("int8"), (3, 2), fill_value=-128)
    big = rng.standard_normal((6, 7)).astype(">f8")
    if fmt == 3:  # (the bytes codec stores big-endian; v2 says so in its type)
        create("bigend", big.astype("float64"), (4, 4), "zlib", fill_value=-1.0,
               serializer=zarr.codecs.BytesCodec(endian="big"))
    else:
        create("bigend", big, (4, 4), "zlib", fill_value=-1.0)
    create("flag", rng.integers(0, 2, (20, 6)).astype(bool), (4, 3), "zlib", fill_value=False,
           unwritten=(slice(16, None), slice(None)))
    group.create_array("scalar", shape=(), dtype="float64", fill_value=0, compressors=None)[...] = 2.5
    group.create_array("unset", shape=(), dtype="int16", fill_value=-3)
    create("zstd", rng.integers(0, 100, (10, 10)).astype("int32"), (5, 5), "zstd", fill_value=0)
    string_array(Path(group.store.root) / "vlen", fmt, strings((11, 7), seed=fmt), (3, 4),
                 ["vlen_y", "vlen_x"])  # (its last chunks along the first axis not written)
    unicode = group.create_array("unicode", shape=(5, 4), dtype="<U3", chunks=(2, 3), fill_value="-")
    unicode[:4] = strings((5, 4), seed=7).astype("<U3")[:4]
    chars = group.create_array("chars", shape=(6,), dtype="S4", chunks=(4,), fill_value=b"",
                               **codecs(fmt, "zlib"))
    chars[:4] = np.array([b"ab", b"", b"\xc3\xa9t\xc3", b"wxyz"], dtype="S4")
    sub = group.create_group("sub", attributes={"title": "inner"})
    inner = sub.create_array("inner", shape=(6, 4), dtype="int16", chunks=(4, 4), fill_value=0,
                             **codecs(fmt, "zlib"), **named(fmt, ["inner_y", "inner_x"]))
    inner[...] = np.arange(24, dtype="int16").reshape(6, 4) - 12
    group["plain"].attrs.update({"units": "K", "levels": [1, 2], "scale": 0.5, "title": "plain ints"})


ARRAYS = ["plain", "zlib", "shuffle", "fletcher", "gzip", "int8", "bigend", "flag", "scalar", "unset",
          "zstd", "vlen", "unicode", "chars", "sub/inner"]
# The files read: the group's, the subgroup's, each array's own.
FILES = ["data.h5", "sub/data.h5", *(f"{name}/data.h5" for name in ARRAYS)]


@dataclass(frozen=True)
class Source:
    store: Path
    mount: Path

    def expected(self, file: str) -> dict[str, Expected]:
        """zarr-python's values of the arrays in `file`, by the name of their dataset."""
        folder = file.rsplit("/", 1)[0] if "/" in file else ""
        found = {}
        for name in ARRAYS:
            if folder and name != folder and not name.startswith(folder + "/"):
                continue
            dataset = "data" if name == folder else name.removeprefix(folder + "/") if folder else name
            values, kind = as_held(np.asarray(zarr.open_array(self.store, path=name, mode="r")[...]))
            found[dataset] = Expected(values, kind)
        return found


@pytest.fixture(scope="module", params=[2, 3], ids=["v2", "v3"])
def source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """A group of every case (Zarr v2, then v3) written by zarr-python, mounted read-only."""
    root = tmp_path_factory.mktemp(f"old_readers_v{request.param}")
    group = zarr.open_group(root / "g.zarr", mode="w", zarr_format=request.param,
                            attributes={"title": "old readers"})
    populate(group, request.param)
    with mounted(root / "g.zarr", root / "mnt", ["ro"]) as mount:
        yield Source(root / "g.zarr", mount.path)


@pytest.mark.parametrize("file", FILES)
@pytest.mark.parametrize("reader", READERS)
def test_reads_as_zarr_python(source: Source, tmp_path: Path, reader: str, file: str) -> None:
    """Every dataset of the file: its values as zarr-python reads the array (a chunk never
    written as the fill value), its shape, type, chunks, fill value and attributes as h5py 3
    reads them; zstd chunks too, which the mount decodes (no reader here has the plugin)."""
    assert_reads(reader, source.mount / file, source.expected(file), tmp_path / "reading.json")
