"""Multiscale groups for the tests of their TIFFs (tests/views/tiff/test_geo_pyramid.py,
test_cog.py, test_tiff_readers.py, tests/views/test_open_by_path.py, tests/serve/test_clients.py):
a GeoZarr pyramid (zarr-conventions `multiscales` v1) and an OME-Zarr image (ome-zarr-py's),
with their levels as written; GDAL's overviews of a TIFF read back, and GDAL's COG validator."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import tifffile
import zarr

MULTISCALES = {"uuid": "d35379db-88df-4056-af3a-620245f8e347", "name": "multiscales",
               "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
               "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md"}
LEADING = {"b": (), "rgb": (3,), "tb": (2, 2)}  # (each variable's dimensions before y, x)


def downsampled(full: np.ndarray[Any, Any], factor: int) -> np.ndarray[Any, Any]:
    *leading, height, width = full.shape
    blocks = full.reshape(*leading, height // factor, factor, width // factor, factor)
    return blocks.mean(axis=(-3, -1)).astype(full.dtype)


def pyramid(path: Path, *, arrays: bool = False, order: tuple[int, ...] = (0, 1, 2)) -> dict[str, list[Any]]:
    """A three-level pyramid of 1024x768 uint16 images (halved each level), as level groups
    holding `b`, `rgb` and `tb`, or (`arrays`) as level arrays `b` only; layout in `order`."""
    root = zarr.open_group(path, mode="w", zarr_format=3)
    rng = np.random.default_rng(6)
    found: dict[str, list[Any]] = {}
    for name, leading in (LEADING if not arrays else {"b": ()}).items():
        full = rng.integers(0, 4000, (*leading, 1024, 768)).astype("uint16")
        found[name] = [downsampled(full, 2**n) if n else full for n in range(3)]
    layout = []
    for n in order:
        for name, levels in found.items():
            data = levels[n]
            where = root if arrays else root.require_group(str(n))
            array = where.create_array(str(n) if arrays else name, shape=data.shape, dtype="uint16",
                                       chunks=(*[1] * (data.ndim - 2), 256, 256),
                                       dimension_names=[*"tc"[: data.ndim - 2], "Y", "X"])
            array[...] = data
        size = 10.0 * 2**n
        entry: dict[str, Any] = {"asset": str(n), "transform": {"scale": [2.0**n] * 2},
                                 "spatial:transform": [size, 0.0, 500000.0, 0.0, -size, 5000000.0]}
        if n:
            entry["derived_from"] = str(n - 1)
        layout.append(entry)
    root.attrs.update({"zarr_conventions": [MULTISCALES], "multiscales": {"layout": layout},
                       "proj:code": "EPSG:32632", "spatial:dimensions": ["Y", "X"]})
    return found


def overview(tmp_path: Path, source: str, number: int) -> np.ndarray[Any, Any]:
    """GDAL's overview `number` of `source`, as its own file, read back."""
    copy = tmp_path / f"overview{number}.tif"
    subprocess.run(["gdal_translate", "-q", "-ovr", str(number), source, str(copy)], check=True)
    return np.asarray(tifffile.imread(copy))


# GDAL's validator, as Debian's python3-gdal ships it (run by the system's python3, which has osgeo)
COG_VALIDATOR = "/usr/lib/python3/dist-packages/osgeo_utils/samples/validate_cloud_optimized_geotiff.py"


def ome_image(path: Path, version: str) -> list[np.ndarray[Any, Any]]:
    """A 2-D uint8 image of 1536 x 1024 in 256 x 256 chunks, three levels (ome-zarr-py's)."""
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.writer import write_image

    group = zarr.open_group(path, mode="w", zarr_format=2 if version == "0.4" else 3)
    rng = np.random.default_rng(11)
    data = rng.integers(0, 255, (1536, 1024)).astype("uint8")
    write_image(data, group, axes="yx", fmt=FormatV04() if version == "0.4" else FormatV05(),
                scale_factors=[2, 4], storage_options={"chunks": (256, 256)})
    attributes = dict(group.attrs)
    multiscale = (attributes["ome"] if version == "0.5" else attributes)["multiscales"][0]
    paths = [dataset["path"] for dataset in multiscale["datasets"]]
    assert len(paths) == 3
    return [np.asarray(zarr.open_array(path / name, mode="r")[...]) for name in paths]
