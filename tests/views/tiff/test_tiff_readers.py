"""`data.tif` for every TIFF reader (issue 82): arrays and groups written with zarr-python 3's
defaults (v3: zstd; sharded; v2: zstd, and blosc, zarr-python 2's default), an OME-Zarr image's
`data.ome.tif` and a GeoZarr pyramid's cloud-optimized `data.tif`, read through real mounts by
OpenCV (its libtiff has no zstd), tifffile without imagecodecs (no zstd either), Pillow and
GDAL, each compared with what zarr-python reads. A default mount (`filters=builtin`) serves
those tiles decoded; with `-o filters=plugins` they go out as stored, and tifffile with
imagecodecs reads the zstd tiles themselves. Locally and on S3 (moto)."""

from __future__ import annotations

import os
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

from tests.helpers.mounting import mount_stats as stats
from tests.helpers.mounting import mounted
from tests.views.tiff.test_geo_pyramid import overview, pyramid

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
pytest_plugins = ["tests.helpers.recheck_places"]  # (the fixtures `where` and `s3_server`)

SHAPE, CHUNKS = (600, 800), (256, 256)  # (edge tiles reach past the image, as edge chunks do)
TILE_BYTES = CHUNKS[0] * CHUNKS[1] * 2
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


@pytest.fixture(scope="module")
def default_mount(written: Path) -> Iterator[Mounted]:
    yield from mount_all(written, ["ro", "filters=builtin"])


@pytest.fixture(scope="module")
def plugins_mount(written: Path) -> Iterator[Mounted]:
    yield from mount_all(written, ["ro", "filters=plugins"])


# -- the readers ------------------------------------------------------------------------------

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


# -- a default mount ----------------------------------------------------------------------------

@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("name", list(ARRAYS))
def test_every_reader_opens_default_arrays(default_mount: Mounted, tmp_path: Path, name: str,
                                           reader: str) -> None:
    found = READERS[reader](default_mount.mounts[name] / "data.tif", tmp_path)
    assert np.array_equal(found, default_mount.values(name))


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_opens_an_ome_zarr_images_ome_tiff(default_mount: Mounted, tmp_path: Path,
                                                        reader: str) -> None:
    """The first plane of `data.ome.tif` (the first channel at full resolution: every reader
    opens its first image)."""
    found = READERS[reader](default_mount.mounts["image"] / "data.ome.tif", tmp_path)
    assert np.array_equal(found, default_mount.image_level(0)[0])


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_opens_a_geozarr_pyramids_cog(default_mount: Mounted, tmp_path: Path,
                                                   reader: str) -> None:
    found = READERS[reader](default_mount.mounts["geo"] / "data.tif", tmp_path)
    assert np.array_equal(found, default_mount.values("geo", "0"))


def test_the_cogs_overviews_are_decoded_too(default_mount: Mounted, tmp_path: Path) -> None:
    """Its reduced images, the OME-TIFF's too: tifffile without imagecodecs and GDAL read them."""
    cog = default_mount.mounts["geo"] / "data.tif"
    first_overview = read_tifffile_without_imagecodecs(cog, tmp_path, 1)
    assert np.array_equal(first_overview, default_mount.values("geo", "1"))
    assert np.array_equal(overview(tmp_path, str(cog), 1), default_mount.values("geo", "2"))
    with tifffile.TiffFile(default_mount.mounts["image"] / "data.ome.tif") as tiff:
        levels = tiff.series[0].levels
        assert {page.compression for level in levels for page in level.pages} == {1}  # type: ignore[union-attr]
        assert np.array_equal(levels[1].asarray(), default_mount.image_level(1))


@pytest.mark.fast
def test_decoded_tiles_have_exact_counts_and_are_decoded_as_they_are_read(written: Path,
                                                                          mount_array: Any) -> None:
    """Uncompressed tiles, every byte count the tile's size, each in a slot of its own (as long
    as the tile: 128 KiB, a power of two). A reader of whole tiles (a request a tile, as GDAL's
    and tifffile's) has each stored chunk decoded as it reads it, and nothing kept in the
    cache (its memory goes to the next tile); a reader of tiles in pieces has each decoded
    once, in the cache, which then serves whole tiles too."""
    mount = mount_array(written / "v3_default.zarr", ["ro"])
    want = np.asarray(zarr.open_array(written / "v3_default.zarr", mode="r")[...])
    tif = mount.path / "data.tif"
    with tifffile.TiffFile(tif) as tiff:
        page = tiff.pages[0]
        assert page.compression == 1  # type: ignore[union-attr]
        assert set(page.databytecounts) == {TILE_BYTES}  # type: ignore[union-attr]
        assert set(np.diff(page.dataoffsets)) == {TILE_BYTES}  # type: ignore[union-attr]
        tiles = list(page.dataoffsets)  # type: ignore[union-attr]

    def read_whole_tiles() -> None:
        with open(tif, "rb", buffering=0) as f:
            found = [np.frombuffer(os.pread(f.fileno(), TILE_BYTES, at), "<u2").reshape(CHUNKS)
                     for at in tiles]
        rows = [np.concatenate(found[i : i + 4], axis=1) for i in range(0, len(found), 4)]
        assert np.array_equal(np.concatenate(rows)[: want.shape[0], : want.shape[1]], want)

    stored = 3 * 4 - 1  # (3 x 4 chunks; one of fill values is not stored)
    for _ in range(2):
        read_whole_tiles()
    assert stats(mount.path)["chunks_decoded"] == 2 * stored
    assert stats(mount.path)["cache_bytes"] == 0
    with open(tif, "rb", buffering=0) as f:  # (in 4 KiB pieces, twice)
        pieces = [b"".join(os.pread(f.fileno(), 4096, at + inside) for at in tiles
                           for inside in range(0, TILE_BYTES, 4096)) for _ in range(2)]
    assert pieces[0] == pieces[1]
    assert stats(mount.path)["chunks_decoded"] == 3 * stored
    cached = stats(mount.path)["cache_bytes"]
    assert stored * TILE_BYTES <= cached < (stored + 1) * TILE_BYTES  # (and the fill chunk's entry)
    read_whole_tiles()
    assert np.array_equal(tifffile.imread(tif), want)
    assert stats(mount.path)["chunks_decoded"] == 3 * stored


# -- filters=plugins --------------------------------------------------------------------------

def test_plugins_pass_zstd_tiles_through_for_tifffile_with_imagecodecs(plugins_mount: Mounted) -> None:
    """The tiles are the chunks as stored (TIFF's zstd, 50000), read by tifffile with imagecodecs;
    the mount decodes nothing; the OME-TIFF's and the COG's tiles go out as stored too."""
    mount = plugins_mount.mounts["v3_default"]
    with tifffile.TiffFile(mount / "data.tif") as tiff:
        page = tiff.pages[0]
        assert page.compression == 50000  # type: ignore[union-attr]
        assert np.array_equal(page.asarray(), plugins_mount.values("v3_default"))  # type: ignore[union-attr]
        offset, count = page.dataoffsets[1], page.databytecounts[1]  # type: ignore[union-attr]
    with open(mount / "data.tif", "rb") as f:
        f.seek(offset)
        assert f.read(count) == (plugins_mount.root / "v3_default.zarr" / "c" / "0" / "1").read_bytes()
    assert stats(mount)["chunks_decoded"] == 0
    for name, file in (("image", "data.ome.tif"), ("geo", "data.tif")):
        with tifffile.TiffFile(plugins_mount.mounts[name] / file) as tiff:
            assert {page.compression for page in tiff.pages} == {50000}  # type: ignore[union-attr]


def test_plugins_zstd_tiles_are_what_readers_without_zstd_cannot_read(plugins_mount: Mounted,
                                                                     tmp_path: Path) -> None:
    """Why the default decodes them: OpenCV and tifffile without imagecodecs fail on them."""
    tif = plugins_mount.mounts["v3_default"] / "data.tif"
    assert cv2.imread(str(tif), cv2.IMREAD_UNCHANGED) is None
    out = tmp_path / "tifffile.npy"
    found = subprocess.run([sys.executable, "-c", TIFFFILE_WITHOUT_IMAGECODECS, str(tif), str(out), "0"],
                           capture_output=True, text=True, timeout=120)
    assert found.returncode != 0 and not out.exists()


# -- locally and on S3 -------------------------------------------------------------------------

def test_a_default_array_on_s3_opens_in_readers_without_zstd(
        where: tuple[str, dict[str, Any], list[str]], tmp_path: Path, mount_array: Any) -> None:
    url, reach, options = where
    data = image_values()
    array = zarr.create_array(url, shape=SHAPE, dtype="uint16", chunks=CHUNKS, fill_value=0, **reach)
    array[...] = data
    mount = mount_array(url, ["ro", *options])
    tif = mount.path / "data.tif"
    for reader in (read_opencv, read_tifffile_without_imagecodecs, read_pillow):
        assert np.array_equal(reader(tif, tmp_path), data), reader.__name__
    assert os.stat(tif).st_size > data.nbytes
