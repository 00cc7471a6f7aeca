"""The sources and readers of the tests of `data.tif` for every TIFF reader
(tests/views/tiff/test_tiff_readers.py, test_tiff_strips.py): arrays written with zarr-python
3's defaults (v3: zstd; sharded; v2: zstd, and blosc), an OME-Zarr image and a GeoZarr
pyramid, each mounted with the options a test asks for; and the readers, OpenCV, Pillow,
tifffile without imagecodecs and GDAL, each giving a file's first image as numpy."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numcodecs
import numpy as np
import pytest
import tifffile
import zarr
from PIL import Image

from tests.helpers.mounting import mounted
from tests.helpers.pyramids import pyramid

SHAPE, CHUNKS = (600, 800), (256, 256)  # (edge tiles reach past the image, as edge chunks do)


# Each array's zarr format and how it differs from zarr-python 3's defaults for it.
ARRAYS: dict[str, tuple[int, dict[str, Any]]] = {
    "v3_default": (3, {}),  # (zstd)
    "v3_sharded": (3, {"shards": (512, 512)}),
    "v2_default": (2, {}),  # (zstd, numcodecs')
    "v2_blosc": (2, {"compressors": numcodecs.Blosc()}),  # (zarr-python 2's default: lz4, shuffled)
}


# tifffile as a machine without imagecodecs has it: zlib from the standard library, no zstd.
TIFFFILE_WITHOUT_IMAGECODECS = """
import sys
sys.modules["imagecodecs"] = None
import numpy, tifffile
with tifffile.TiffFile(sys.argv[1]) as tiff:
    numpy.save(sys.argv[2], tiff.pages[int(sys.argv[3])].asarray())
"""


def image_values() -> np.ndarray[Any, Any]:
    data = np.random.default_rng(82).integers(0, 4000, SHAPE).astype("uint16")
    data[:256, :256] = 0  # (the fill value: that chunk is not stored)
    return data


def populate(root: Path) -> None:
    """Each array of ARRAYS under `root` (a directory), as zarr-python 3 writes it by default;
    an OME-Zarr image group (ome-zarr-py's defaults) and a GeoZarr pyramid."""
    from ome_zarr.format import FormatV05
    from ome_zarr.writer import write_image

    data = image_values()
    for name, (fmt, kwargs) in ARRAYS.items():
        array = zarr.create_array(root / f"{name}.zarr", shape=SHAPE, dtype="uint16", chunks=CHUNKS,
                                  fill_value=0, zarr_format=fmt, **kwargs)
        array[...] = data
    image = zarr.open_group(root / "image.zarr", mode="w", zarr_format=3)
    planes = np.random.default_rng(5).integers(0, 4000, (2, 512, 640)).astype("uint16")
    write_image(planes, image, axes="cyx", fmt=FormatV05(), scale_factors=[2],
                storage_options={"chunks": (1, 256, 256)})
    pyramid(root / "geo.zarr", arrays=True)


@dataclass(frozen=True)
class Mounted:
    """The sources under `root`, each mounted at `mounts[name]` with one `filters=` setting."""

    root: Path
    mounts: dict[str, Path]

    def values(self, name: str, path: str = "") -> np.ndarray[Any, Any]:
        return np.asarray(zarr.open_array(self.root / f"{name}.zarr" / path, mode="r")[...])

    def image_level(self, number: int) -> np.ndarray[Any, Any]:
        """Level `number` of the OME-Zarr image (its arrays' names are ome-zarr-py's)."""
        names = sorted(name for name, _ in zarr.open_group(self.root / "image.zarr", mode="r").arrays())
        return self.values("image", names[number])


SOURCES = [*ARRAYS, "image", "geo"]


def mount_all(root: Path, options: list[str]) -> Iterator[Mounted]:
    """Every source under `root` mounted with `options`, all unmounted at the end."""
    tag = "-".join(option.replace("=", "_") for option in options)
    with ExitStack() as stack:
        mounts = {name: stack.enter_context(mounted(root / f"{name}.zarr", root / f"mnt-{tag}-{name}",
                                                    options)).path for name in SOURCES}
        yield Mounted(root, mounts)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("defaults")
    populate(root)
    return root


def read_opencv(path: Path, tmp: Path) -> np.ndarray[Any, Any]:
    found = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert found is not None, f"OpenCV could not read {path}"
    return np.asarray(found)


def read_pillow(path: Path, tmp: Path) -> np.ndarray[Any, Any]:
    with Image.open(path) as image:
        return np.asarray(image)


def read_tifffile_without_imagecodecs(path: Path, tmp: Path, page: int = 0) -> np.ndarray[Any, Any]:
    out = tmp / "tifffile.npy"
    command = [sys.executable, "-c", TIFFFILE_WITHOUT_IMAGECODECS, str(path), str(out), str(page)]
    found = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    return np.asarray(np.load(out))


def read_gdal(path: Path, tmp: Path) -> np.ndarray[Any, Any]:
    """GDAL's copy of the first image (gdal_translate writes it uncompressed; its first page:
    the copy keeps an OME-TIFF's description, which names planes the copy has not)."""
    copy = tmp / "gdal.tif"
    subprocess.run(["gdal_translate", "-q", str(path), str(copy)], check=True, timeout=120)
    with tifffile.TiffFile(copy) as tiff:
        return np.asarray(tiff.pages[0].asarray())  # type: ignore[union-attr]


Reader = Callable[[Path, Path], np.ndarray[Any, Any]]


READERS: dict[str, Reader] = {"opencv": read_opencv, "pillow": read_pillow,
                              "tifffile without imagecodecs": read_tifffile_without_imagecodecs,
                              "gdal": read_gdal}
