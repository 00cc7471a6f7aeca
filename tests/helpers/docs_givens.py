"""What an example of the docs takes as given (`<!-- docs-test: given NAME -->`): the arrays,
groups, mounts and files its text assumes a reader has, made on a scratch machine
(`tests/helpers/docs_scratch.py`) under the paths the docs show.

Each is small, and holds what the text says it holds (an xarray dataset for `era5`, an
OME-Zarr image for `ome`, strings for `stations`), so the tools the examples run find it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import zarr

from tests.helpers.docs_examples import ROOT
from tests.helpers.docs_scratch import Scratch

Given = Callable[[Scratch], None]
GIVENS: dict[str, Given] = {}
NEEDS: dict[str, tuple[str, ...]] = {}  # a given made first for each of these


def given(name: str, *needs: str) -> Callable[[Given], Given]:
    def register(make: Given) -> Given:
        GIVENS[name] = make
        NEEDS[name] = needs
        return make
    return register


def prepare(machine: Scratch, names: tuple[str, ...], made: set[str] | None = None) -> None:
    made = set() if made is None else made
    for name in names:
        if name in made:
            continue
        if name not in GIVENS:
            raise KeyError(f"docs-test: no given named {name!r} (tests/helpers/docs_givens.py)")
        prepare(machine, NEEDS[name], made)
        GIVENS[name](machine)
        made.add(name)


@given("repository")
def _repository(machine: Scratch) -> None:
    """Examples run from the root of the repository (its `.venv`, `scripts/`)."""
    machine.directory = ROOT


@given("array")
def _array(machine: Scratch) -> None:
    """/srv/data/array.zarr as the docs create it (every element 0)."""
    path = machine.path("/srv/data/array.zarr")
    machine.run("zarrfs", "create", str(path), "--shape", "100,200", "--dtype", "uint16", "--chunks", "10,20")


@given("mounted", "array")
def _mounted(machine: Scratch) -> None:
    machine.mount("/srv/data/array.zarr", "/mnt/zarr", "rw")


@given("big")
def _big(machine: Scratch) -> None:
    """/srv/data/big.zarr as usage.md creates it (metadata only: nothing is stored yet)."""
    machine.run("zarrfs", "create", str(machine.path("/srv/data/big.zarr")), "--shape", "40000,40000",
                "--dtype", "float32", "--chunks", "256,256", "--shards", "4096,4096",
                "--codec", "blosc:lz4:5", "--fill-value", "nan", "--dimension-names", "y,x")


@given("metrics-port")
def _metrics_port(machine: Scratch) -> None:
    """The docs' port 9464 is a free one (another run on this machine may hold 9464)."""
    from tests.helpers.s3_server import free_port

    machine.urls["127.0.0.1:9464"] = f"127.0.0.1:{free_port()}"


@given("serve-port")
def _serve_port(machine: Scratch) -> None:
    """The docs' `zarrfs serve` port 8080 is a free one (another run may hold 8080)."""
    from tests.helpers.s3_server import free_port

    machine.urls["127.0.0.1:8080"] = f"127.0.0.1:{free_port()}"


@given("private-address")
def _private_address(machine: Scratch) -> None:
    """The address of a private interface the docs show (10.0.0.5) is this machine's loopback,
    on a port of its choosing."""
    machine.urls["10.0.0.5:9464"] = "127.0.0.1:0"


@given("dataset")
def _dataset(machine: Scratch) -> None:
    group = zarr.open_group(machine.path("/srv/data/dataset.zarr"), mode="w")
    for name in ("temperature", "pressure"):
        group.create_array(name, shape=(40, 30), chunks=(10, 10), dtype="float32")[...] = 1.5
    group.create_group("scans").create_array("s0", shape=(8, 8), chunks=(4, 4), dtype="uint8")[...] = 3


@given("era5")
def _era5(machine: Scratch) -> None:
    """An xarray dataset of CF variables on a regular lat/lon grid, mounted at /mnt/era5."""
    import pandas as pd
    import xarray as xr

    times = pd.date_range("2024-01-01", periods=4, freq="6h")
    latitude = np.linspace(90, -90, 19, dtype="float32")
    longitude = np.arange(0, 360, 10, dtype="float32")
    values = 250 + np.arange(4 * 19 * 36, dtype="float32").reshape(4, 19, 36) % 50
    t2m = xr.DataArray(values, dims=("time", "latitude", "longitude"),
                       attrs={"units": "K", "long_name": "2 metre temperature"})
    dataset = xr.Dataset({"t2m": t2m}, coords={"time": times, "latitude": latitude, "longitude": longitude})
    dataset.latitude.attrs.update(units="degrees_north", standard_name="latitude")
    dataset.longitude.attrs.update(units="degrees_east", standard_name="longitude")
    with warnings.catch_warnings():  # (zarr-python: v3 consolidated metadata is not in the spec yet)
        warnings.simplefilter("ignore", UserWarning)
        dataset.to_zarr(machine.path("/srv/data/era5.zarr"), mode="w", consolidated=True, zarr_format=3)
    machine.mount("/srv/data/era5.zarr", "/mnt/era5", "ro")


@given("ome")
def _ome(machine: Scratch) -> None:
    """An OME-Zarr 0.4 image `image` of one level `s0` (z, y, x) in /mnt/ome."""
    root = zarr.open_group(machine.path("/srv/data/ome.zarr"), mode="w", zarr_format=2)
    image = root.create_group("image")
    image.create_array("s0", shape=(4, 32, 48), chunks=(1, 32, 48), dtype="uint16")[...] = 7
    axes = [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]
    scale = [{"type": "scale", "scale": [2.0, 0.5, 0.5]},
             {"type": "translation", "translation": [0.0, 10.0, 20.0]}]
    multiscales: Any = [{"version": "0.4", "axes": axes,
                         "datasets": [{"path": "s0", "coordinateTransformations": scale}]}]
    image.attrs["multiscales"] = multiscales
    machine.mount("/srv/data/ome.zarr", "/mnt/ome", "ro")


@given("slide")
def _slide(machine: Scratch) -> None:
    """A 50,000 x 50,000 image of 512 x 512 chunks, none stored, at /mnt/slide/image/0."""
    root = zarr.open_group(machine.path("/srv/data/slide.zarr"), mode="w")
    root.create_group("image").create_array("0", shape=(50000, 50000), chunks=(512, 512), dtype="uint8",
                                            fill_value=9)
    machine.mount("/srv/data/slide.zarr", "/mnt/slide", "ro")


@given("img")
def _img(machine: Scratch) -> None:
    array = zarr.create_array(machine.path("/srv/data/img.zarr"), shape=(1024, 1024), chunks=(256, 256),
                              dtype="uint8")
    array[...] = np.arange(1024 * 1024, dtype="uint64").reshape(1024, 1024) % 251
    machine.mount("/srv/data/img.zarr", "/mnt/img", "ro")


@given("s2")
def _s2(machine: Scratch) -> None:
    """A GeoZarr multiscale group `reflectance` (levels r10m, r20m, r60m holding b04, as
    Sentinel-2's: 10980, 5490 and 1830 pixels a side, a corner stored) in /mnt/s2."""
    reflectance = zarr.open_group(machine.path("/srv/data/s2.zarr"), mode="w").create_group("reflectance")
    layout: list[dict[str, Any]] = []
    for level, size in (("r10m", 10.0), ("r20m", 20.0), ("r60m", 60.0)):
        side = round(109800 / size)
        band = reflectance.create_group(level).create_array(
            "b04", shape=(side, side), chunks=(256, 256), dtype="uint16", dimension_names=["y", "x"])
        band[:256, :256] = 1000
        transform = [size, 0.0, 300000.0, 0.0, -size, 5000000.0]
        entry: dict[str, Any] = {"asset": level, "spatial:transform": transform}
        layout.append(entry | ({"derived_from": layout[-1]["asset"]} if layout else {}))
    reflectance.attrs.update({"zarr_conventions": [MULTISCALES], "multiscales": {"layout": layout},
                              "proj:code": "EPSG:32632", "spatial:dimensions": ["y", "x"]})
    machine.mount("/srv/data/s2.zarr", "/mnt/s2", "ro")


MULTISCALES = {"uuid": "d35379db-88df-4056-af3a-620245f8e347", "name": "multiscales",
               "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
               "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md"}


@given("strings")
def _strings(machine: Scratch) -> None:
    """/mnt/stations/name and /mnt/samples/species: arrays of strings."""
    for group, name, values in (("stations", "name", ["Barrow", "Mauna Loa", "Cape Grim", "Mauna Kea"]),
                                ("samples", "species", ["oak", "ash", "oak", "elm", "ash"])):
        root = zarr.open_group(machine.path(f"/srv/data/{group}.zarr"), mode="w")
        root.create_array(name, shape=(len(values),), chunks=(2,), dtype=str)[...] = np.array(values)
        machine.mount(f"/srv/data/{group}.zarr", f"/mnt/{group}", "ro")


@given("project")
def _project(machine: Scratch) -> None:
    """The workspace of README.md: an empty v3 group with a group `g`, mounted at /mnt/project."""
    path = machine.path("/srv/data/project.zarr")
    (path / "g").mkdir(parents=True)
    for directory in (path, path / "g"):
        (directory / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
    machine.mount("/srv/data/project.zarr", "/mnt/project", "rw")


def _npy(name: str, shape: tuple[int, ...]) -> Given:
    def make(machine: Scratch) -> None:
        np.save(machine.work / name, np.arange(np.prod(shape), dtype="float32").reshape(shape))
    return make


given("result.npy")(_npy("result.npy", (300, 400)))
given("scan.npy")(_npy("scan.npy", (64, 64)))
given("x.npy")(_npy("x.npy", (100, 100)))


@given("rows.raw")
def _rows(machine: Scratch) -> None:
    """Five rows of the (N, 200) uint16 array of the docs."""
    (machine.work / "rows.raw").write_bytes(np.full((5, 200), 3, dtype="<u2").tobytes())


@given("scan.raw")
def _scan_raw(machine: Scratch) -> None:
    """A 512 x 512 x 300 big-endian uint16 volume in Fortran order (sparse: zeros)."""
    with open(machine.work / "scan.raw", "wb") as f:
        f.truncate(512 * 512 * 300 * 2)
