"""Reading `data.nc` ahead: each variable's bytes are read in slabs decoded ahead in big-endian
(zarrfs.views.netcdf.NetcdfReading over each variable's `RegionFile` readahead), the
header, padding and reads across variables read at once. Without FUSE against netCDF-C
(netCDF4-python, from memory) and zarr-python, then through a mount read by CDO."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS
from zarrfs.array import Shared
from zarrfs.array.reads import readahead, slab_layout
from zarrfs.array.reads.readahead import Reading
from zarrfs.formats import discover
from zarrfs.store import Store
from zarrfs.tree import Tree
from zarrfs.views import array_dir
from zarrfs.views.files import FileView
from zarrfs.views.netcdf.group_variables import NetcdfFile

T_SHAPE, T_CHUNKS = (24, 20, 30), (4, 10, 15)
T_SLAB = 4 * 20 * 30 * 4  # one row of chunks of `t` (SLAB_BYTES is patched down to it)
REQUEST = 5000  # (not a multiple of anything: requests cross slabs, variables and the header)


def _group(path: Path) -> dict[str, np.ndarray]:
    """A float32 variable of many rows of chunks, a float64 one, and an int16 one of an odd
    byte count (padded in the file); what zarr-python reads of each."""
    rng = np.random.default_rng(3)
    root = zarr.open_group(path, mode="w", zarr_format=3)
    values = {"t": rng.standard_normal(T_SHAPE).astype("f4"), "n": np.arange(7, dtype="i2") * -300,
              "d": rng.random((5, 3))}
    chunks = {"t": T_CHUNKS, "n": (4,), "d": (2, 3)}
    for name, data in values.items():
        root.create_array(name, shape=data.shape, chunks=chunks[name], dtype=data.dtype)[...] = data
    return {name: zarr.open_array(path / name, mode="r")[...] for name in values}


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tree]:
    monkeypatch.setattr(slab_layout, "SLAB_BYTES", T_SLAB)
    monkeypatch.setattr(readahead, "STREAK_BYTES", 4096)  # slabs after one read in order
    _group(tmp_path / "g.zarr")
    store = Store.open(str(tmp_path / "g.zarr"))
    node = discover(store.get, "")
    assert node is not None
    opened = Tree(store, node, Shared(64 << 20, 2), array_dir.ViewSettings())
    yield opened
    opened.close()


def _file(tree: Tree, *names: str) -> FileView:
    ref = tree.root
    for name in names:
        found = tree.lookup(ref, name)
        assert found is not None, name
        ref = found
    return tree.file(ref)


def _read_in_order(reading: Reading, start: int, stop: int) -> tuple[bytes, int]:
    """Bytes [start, stop) read as the fuse layer reads them (`ready`, else `read`), and how
    many requests `ready` answered."""
    got, at_once = bytearray(), 0
    for offset in range(start, stop, REQUEST):
        size = min(REQUEST, stop - offset)
        ready = reading.ready(offset, size)
        at_once += ready is not None
        got += bytes(ready if ready is not None else reading.read(offset, size))
    return bytes(got), at_once


def _variables(contents: bytes) -> dict[str, np.ndarray]:
    with netCDF4.Dataset("read.nc", memory=contents) as nc:
        nc.set_auto_maskandscale(False)
        return {name: np.asarray(variable[...]) for name, variable in nc.variables.items()}


@pytest.mark.fast
def test_data_nc_read_in_order_is_answered_from_big_endian_slabs(tmp_path: Path, tree: Tree) -> None:
    view = _file(tree, "data.nc")
    assert isinstance(view, NetcdfFile)
    reading = view.readahead()
    names = [variable.name for variable in view.layout.dataset.variables]
    t = names.index("t")
    begin = view.layout.begins[t]
    first, _ = _read_in_order(reading, 0, 2 * REQUEST)
    slab = reading.variables()[t].slabs()[1]  # (rows 4-7 of t: the slab after the reader's)
    assert slab.wait(), "the slab did not finish"
    expected = {name: zarr.open_array(tmp_path / "g.zarr" / name, mode="r")[...] for name in names}
    big_endian = expected["t"].astype(">f4").tobytes()
    offset = begin + T_SLAB + 1000  # (in the slab: answered without waiting, as it is)
    assert bytes(reading.ready(offset, 3000) or b"") == big_endian[T_SLAB + 1000 : T_SLAB + 4000]
    rest, _ = _read_in_order(reading, 2 * REQUEST, view.size)
    assert t not in reading.variables(), "t was read to its end: its slabs are given back"
    reading.close()
    assert first + rest == bytes(view.read(0, view.size))  # (read at once: through the cache)
    for name, values in _variables(first + rest).items():
        np.testing.assert_array_equal(values, expected[name])


@pytest.mark.fast
def test_a_write_to_an_array_shows_in_data_nc_read_ahead(tmp_path: Path, tree: Tree) -> None:
    """Slabs begun before a write (through the array's `data`) are never served after it."""
    view = _file(tree, "data.nc")
    assert isinstance(view, NetcdfFile)
    reading = view.readahead()
    names = [variable.name for variable in view.layout.dataset.variables]
    split = view.layout.begins[names.index("t")] + T_SLAB + 100  # (slabs of the rows after begun)
    first, _ = _read_in_order(reading, 0, split)
    assert any(r.slabs() for r in reading.variables().values()), "no slabs were begun"
    old = zarr.open_array(tmp_path / "g.zarr" / "t", mode="r")[...].reshape(-1)
    new = np.full(T_SHAPE, 7.5, dtype="<f4")
    written = _file(tree, "t", "data").write(0, new.tobytes())
    assert written == new.nbytes
    rest, _ = _read_in_order(reading, split, view.size)
    reading.close()
    got = _variables(first + rest)["t"].reshape(-1)
    seen_before = (T_SLAB + 100) // 4
    np.testing.assert_array_equal(got[:seen_before], old[:seen_before])
    assert (got[seen_before + 1 :] == 7.5).all()


def _stats(mountpoint: Path) -> dict[str, float]:
    result = subprocess.run([ZARRFS, "stats", str(mountpoint), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    counters: dict[str, float] = json.loads(result.stdout)
    return counters


def test_cdo_reads_data_nc_through_slabs_lent_from_the_cache(tmp_path: Path, mount_array: Any) -> None:
    """A variable of 16 MiB in rows of chunks of 1 MiB: while a reader is half-way through it,
    slabs (readahead_bytes) are lent to it; CDO's field means equal zarr-python's."""
    shape = (64, 256, 256)
    values = np.random.default_rng(4).standard_normal(shape).astype("f4") + np.arange(64)[:, None, None]
    root = zarr.open_group(tmp_path / "big.zarr", mode="w", zarr_format=3)
    root.create_array("v", shape=shape, chunks=(4, 128, 128), dtype="f4",
                      dimension_names=["time", "y", "x"])[...] = values
    expected = zarr.open_array(tmp_path / "big.zarr" / "v", mode="r")[...]
    mount = mount_array(tmp_path / "big.zarr")
    path = mount.path / "data.nc"
    with open(path, "rb", buffering=0) as f:
        got = bytearray(f.read(1 << 20))
        while len(got) < path.stat().st_size // 2:
            got += f.read(1 << 20)
        lent = _stats(mount.path)["readahead_bytes"]
        got += f.read()
    assert lent > 0, "no slabs were lent to the reader"
    np.testing.assert_array_equal(_variables(bytes(got))["v"], expected)
    out = subprocess.run(["cdo", "-s", "outputf,%.9g", "-fldmean", "-selname,v", str(path)],
                         check=True, capture_output=True, text=True).stdout
    means = [float(v) for v in out.split()]
    np.testing.assert_allclose(means, expected.reshape(64, -1).astype("f8").mean(axis=1), rtol=1e-6)
