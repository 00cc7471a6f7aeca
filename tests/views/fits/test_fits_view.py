"""data.fits on a real mount, read by astropy.io.fits, fitsio (CFITSIO) and fitsverify against
zarr-python's values: every element type FITS holds (BZERO for int8 and the unsigned wider
ones), ranks 1 to 4, zstd, blosc and sharded chunks, both byte orders of the mount and both
element orders (`-o order=F`: FITS's first axis is then the array's first); large arrays read in
order (the slabs of reading ahead, top bits flipped); what FITS cannot hold shown as no file,
the log saying why; read-only; `-o views=`; a write through `data` seen in data.fits; an
xarray dataset's CF latitude and longitude as astropy.wcs reads them; S3 (moto).

The header without a mount: test_fits_header.py; XRADIO's sky images: test_fits_sky.py."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fitsio
import numpy as np
import pytest
import xarray as xr
import zarr
from astropy.io import fits
from astropy.wcs import WCS
from zarr.codecs import BloscCodec

from tests.helpers.mounting import MountFactory
from tests.helpers.s3_server import S3Server, free_port, serving

TYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]
SHAPES = {1: ((37,), (10,)), 2: ((13, 9), (5, 4)), 3: ((5, 7, 6), (2, 3, 4)), 4: ((3, 4, 5, 6), (2, 2, 3, 4))}
CODECS = ["zstd", "blosc", "sharded"]
# name: (dtype, shape, chunks, codec): every type, each at a rank and with a codec in turn
HELD = {f"{dtype}_{1 + i % 4}d_{CODECS[i % 3]}": (dtype, *SHAPES[1 + i % 4], CODECS[i % 3])
        for i, dtype in enumerate(TYPES)}
LARGE = {"uint16_large": ("uint16", (1024, 2048), (128, 256), "zstd"),  # (read in order: from slabs)
         "int8_large": ("int8", (2048, 2048), (256, 256), "blosc")}
NOT_HELD = {"f2": ("float16", "float16"), "c8": ("complex64", "complex64"), "b1": ("bool", "bool"),
            "s4": ("<U4", "str128"), "rank0": ("int16", "not 0")}
OPTIONS = {"C-little": (), "C-big": ("endian=big",), "F-little": ("order=F",),
           "F-big": ("order=F", "endian=big")}


def _values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = (rng.standard_normal(shape) * 1e3).astype(dtype)
    values.reshape(-1)[:2] = [np.inf, -0.0]
    return values


def _create(group: zarr.Group, name: str, values: np.ndarray, chunks: tuple[int, ...], codec: str) -> None:
    compressors: Any = BloscCodec(cname="lz4", shuffle="shuffle") if codec == "blosc" else "auto"
    shards = tuple(2 * c for c in chunks) if codec == "sharded" else None
    group.create_array(name, shape=values.shape, dtype=values.dtype, chunks=chunks, shards=shards,
                       compressors=compressors)[...] = values


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    path = tmp_path_factory.mktemp("fits") / "g.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    expected = {}
    for seed, (name, (dtype, shape, chunks, codec)) in enumerate({**HELD, **LARGE}.items()):
        _create(group, name, _values(dtype, shape, seed), chunks, codec)
        expected[name] = np.asarray(zarr.open_array(path / name, mode="r")[...])
    for name, (dtype, _) in NOT_HELD.items():
        shape = () if name == "rank0" else (4, 3)
        group.create_array(name, shape=shape, dtype=dtype, chunks=shape, fill_value=None)
    return path, expected


def _verified(paths: list[Path]) -> None:
    """fitsverify: no warning and no error in any of the files."""
    result = subprocess.run(["fitsverify", "-q", *map(str, paths)], capture_output=True, text=True,
                            timeout=120)
    lines = result.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["verification OK"] * len(paths), result.stdout
    assert result.returncode == 0


def _fitsio_reads(path: Path, want: np.ndarray, work: Path) -> None:
    """fitsio's values are zarr-python's; of uint64, which fitsio cannot read from the files it
    writes itself either, its failure is the one on its own file of the same values."""
    if want.dtype != np.uint64:
        got = fitsio.read(str(path))
        assert got.dtype.newbyteorder("=") == want.dtype and np.array_equal(got, want)
        return
    own = work / "fitsio-own.fits"
    fitsio.write(str(own), want, clobber=True)
    failures = []
    for file in (own, path):
        with fitsio.FITS(str(file)) as opened, pytest.raises(OSError) as failed:  # (closed: not left open)
            opened[0].read()
        failures.append(str(failed.value))
    assert failures[0] == failures[1]
    assert int(fitsio.read_header(str(path))["BZERO"]) == 2**63


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_every_type_reads_as_zarr_python(store: tuple[Path, dict[str, np.ndarray]], mount_array: MountFactory,
                                         tmp_path: Path, options: tuple[str, ...]) -> None:
    path, expected = store
    mount = mount_array(path, ["ro", *options])
    fortran = "order=F" in options
    for name in HELD:
        file, want = mount.path / name / "data.fits", expected[name]
        in_file = want.T if fortran else want  # (FITS's first axis is the file's fastest)
        with fits.open(file, memmap=False) as hdus:
            got, header = hdus[0].data, hdus[0].header
            assert got.dtype.newbyteorder("=") == want.dtype and np.array_equal(got, in_file, equal_nan=True)
            assert [header[f"NAXIS{i}"] for i in range(1, want.ndim + 1)] == list(in_file.shape[::-1])
        _fitsio_reads(file, in_file, tmp_path)
        size = file.stat().st_size
        assert size % 2880 == 0 and size > want.nbytes
        with open(file, "rb") as f:
            f.seek(size - (size - want.nbytes) % 2880)  # (the zeros after the elements)
            assert not any(f.read())
    _verified([mount.path / name / "data.fits" for name in HELD])


@pytest.mark.fast
def test_large_arrays_read_in_order(store: tuple[Path, dict[str, np.ndarray]],
                                    mount_array: MountFactory) -> None:
    """Read as dd reads, 1 MiB at a time: the slabs of reading ahead, int8 and uint16's top bits
    flipped in them (value - BZERO)."""
    path, expected = store
    mount = mount_array(path, ["ro"])
    for name in LARGE:
        want = expected[name]
        bzero, twin = {"int8": (-128, ">u1"), "uint16": (32768, ">i2")}[want.dtype.name]
        stored = (want.astype(np.int64) - bzero).astype(twin)
        elements = stored.tobytes()
        file = mount.path / name / "data.fits"
        with open(file, "rb", buffering=0) as f:
            found = b"".join(iter(lambda: f.read(1 << 20), b""))
        header = len(found) - len(elements) - (-len(elements) % 2880)
        assert found[header : header + len(elements)] == elements, name
        with fits.open(file, memmap=False) as hdus:
            assert np.array_equal(hdus[0].data, want)


def test_what_fits_cannot_hold_shows_no_file_and_the_log_says_why(store: tuple[Path, dict[str, np.ndarray]],
                                                                 mount_array: MountFactory) -> None:
    path, _ = store
    mount = mount_array(path, ["ro", "views=fits"])
    for name, (_, why) in NOT_HELD.items():
        assert "data.fits" not in os.listdir(mount.path / name)
        with pytest.raises(FileNotFoundError):
            (mount.path / name / "data.fits").stat()
        said = f"array {name} has no data.fits:"
        line = mount.wait_for_log(said).split(said)[1].splitlines()[0]
        assert why in line, line


def test_data_fits_is_read_only_as_the_other_made_views(store: tuple[Path, dict[str, np.ndarray]],
                                                        mount_array: MountFactory) -> None:
    path, _ = store
    writable, read_only = mount_array(path), mount_array(path, ["ro"])
    directory = writable.path / "uint16_4d_zstd"
    answers = []
    for name in ("data.fits", "data.tif"):
        assert stat.S_IMODE((directory / name).stat().st_mode) & 0o222 == 0
        with pytest.raises(PermissionError) as refused:
            os.open(directory / name, os.O_RDWR)
        answers.append(refused.value.errno)
    assert answers == [errno.EACCES, errno.EACCES]
    with pytest.raises(OSError) as refused:
        os.open(read_only.path / "uint16_4d_zstd" / "data.fits", os.O_WRONLY)
    assert refused.value.errno == errno.EROFS


def test_views_option(store: tuple[Path, dict[str, np.ndarray]], mount_array: MountFactory) -> None:
    path, expected = store
    only, others = mount_array(path, ["ro", "views=fits"]), mount_array(path, ["ro", "views=npy:tif"])
    name = next(iter(HELD))
    assert sorted(os.listdir(only.path / name)) == ["chunks", "data", "data.fits", "zarr.json"]
    assert "data.fits" not in os.listdir(others.path / name)
    with fits.open(only.path / name / "data.fits", memmap=False) as hdus:
        assert np.array_equal(hdus[0].data, expected[name])


def test_a_write_through_data_shows_in_data_fits(tmp_path: Path, mount_array: MountFactory) -> None:
    values = np.arange(4096, dtype=np.uint16).reshape(64, 64)
    zarr.create_array(tmp_path / "a.zarr", shape=values.shape, dtype=values.dtype,
                      chunks=(16, 16))[...] = values
    mount = mount_array(tmp_path / "a.zarr")
    with fits.open(mount.path / "data.fits", memmap=False) as hdus:
        assert np.array_equal(hdus[0].data, values)
    with open(mount.path / "data", "r+b") as f:
        f.seek(2 * (3 * 64 + 5))
        f.write(np.array([65535], "<u2").tobytes())
    values[3, 5] = 65535
    with fits.open(mount.path / "data.fits", memmap=False) as hdus:
        assert np.array_equal(hdus[0].data, values)


def _climate() -> xr.Dataset:
    lat, lon = np.linspace(60.0, -30.0, 10), np.arange(0.0, 360.0, 22.5)
    t2m = (280 + np.random.default_rng(3).standard_normal((3, 10, 16)) * 5).astype("float32")
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"})},
                    coords={"time": ("time", [0, 6, 12], {"units": "hours since 2000-01-01"}),
                            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"})})
    ds.attrs["title"] = "a test"
    return ds


def test_xarray_latitude_and_longitude_in_astropy_wcs(tmp_path: Path, mount_array: MountFactory) -> None:
    ds = _climate()
    ds.to_zarr(tmp_path / "era.zarr", mode="w", consolidated=True)
    mount = mount_array(tmp_path / "era.zarr", ["ro"])
    file = mount.path / "t2m" / "data.fits"
    with fits.open(file, memmap=False) as hdus:
        header, data = hdus[0].header, hdus[0].data
    assert np.array_equal(data, ds["t2m"].values)
    assert header["BUNIT"] == "K" and header["long_name"] == "2 m temperature"
    assert (header["CTYPE1"], header["CTYPE2"], header["CNAME3"]) == ("TLON-CAR", "TLAT-CAR", "time")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (astropy's notes on the defaults it fills in)
        wcs = WCS(header)
    t, y, x = np.meshgrid(*(np.arange(n) for n in data.shape), indexing="ij")
    lon, lat, hours = wcs.pixel_to_world_values(x.ravel(), y.ravel(), t.ravel())
    assert np.allclose(lon, ds["lon"].values[x.ravel()], atol=1e-9)
    assert np.allclose(lat, ds["lat"].values[y.ravel()], atol=1e-9)
    assert np.allclose(hours, [0, 6, 12][0] + 6 * t.ravel())
    _verified([file])


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    yield from serving(S3Server(free_port()), monkeypatch)


def test_on_s3(s3_server: S3Server, mount_array: MountFactory) -> None:
    values = _values("uint32", (40, 30), 9)
    url = f"s3://{s3_server.bucket}/a.zarr"
    options = {"endpoint_url": s3_server.endpoint_url, "key": "testing", "secret": "testing"}
    zstore = zarr.storage.FsspecStore.from_url(url, storage_options=options)
    zarr.create_array(zstore, shape=values.shape, dtype=values.dtype, chunks=(16, 16))[...] = values
    mount = mount_array(url, ["ro", f"endpoint_url={s3_server.endpoint_url}"])
    with fits.open(mount.path / "data.fits", memmap=False) as hdus:
        assert hdus[0].header["BZERO"] == 2**31 and np.array_equal(hdus[0].data, values)
    _verified([mount.path / "data.fits"])
