"""Real clients of `zarrfs serve`: rclone (a WebDAV client) lists the tree as a mount lists it,
and `rclone mount` of the server lets tifffile, h5py, GDAL and nibabel read the views equal to
zarr-python's values; GDAL reads data.tif through /vsicurl/ as a COG, with its overviews; and
the server runs from a virtualenv where pyfuse3 is not installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import h5py
import nibabel
import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.mounting import is_mounted, mounted
from tests.helpers.pyramids import COG_VALIDATOR, ome_image
from tests.helpers.serving import curl, served, status_of
from tests.helpers.webdav_clients import rclone, rclone_env

VALUES = (np.arange(96 * 160, dtype="<u2") * 7).reshape(96, 160)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    group = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    group.create_array("image", shape=VALUES.shape, chunks=(32, 64), dtype="<u2")[...] = VALUES
    group.create_group("sub").create_array("line", shape=(50,), chunks=(16,), dtype="<f4")[...] = \
        np.linspace(0, 1, 50, dtype="<f4")
    return tmp_path / "g.zarr"


def listing(root: Path) -> set[tuple[str, int]]:
    """Every file below `root` by its path, with its size; every directory by its path + '/'."""
    found = set()
    for directory, names, files in os.walk(root):
        below = Path(directory).relative_to(root)
        found |= {((below / name).as_posix() + "/", -1) for name in names}
        found |= {((below / name).as_posix(), (Path(directory) / name).stat().st_size) for name in files}
    return found


def test_rclone_lists_the_tree_as_a_mount_lists_it(tree: Path, tmp_path: Path) -> None:
    with served(tree, tmp_path, ["ro"]) as server, mounted(tree, tmp_path / "mnt", ["ro"]) as mount:
        done = rclone(server.url, "lsf", "-R", "--format", "ps", "--separator", "\t", "z:")
        assert done.returncode == 0, done.stderr
        listed = {(path, int(size) if not path.endswith("/") else -1)
                  for path, size in (line.split("\t") for line in done.stdout.splitlines())}
        assert listed == listing(mount.path)
        assert ("image/data.tif", mount.path.joinpath("image/data.tif").stat().st_size) in listed


@pytest.fixture
def rclone_mount(tree: Path, tmp_path: Path) -> Iterator[Path]:
    """The server, mounted by `rclone mount` (a WebDAV client's mount, as on a Mac)."""
    with served(tree, tmp_path, ["ro"]) as server:
        where = tmp_path / "rclone"
        where.mkdir()
        process = subprocess.Popen(["rclone", "mount", "z:", str(where), "--read-only"],
                                   env=rclone_env(server.url), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not is_mounted(where):
                assert process.poll() is None and time.monotonic() < deadline, process.stderr
                time.sleep(0.1)
            yield where
        finally:
            subprocess.run(["fusermount3", "-u", "-z", str(where)], capture_output=True)
            process.terminate()
            process.wait(60)


def test_readers_read_the_views_through_rclone_mount(rclone_mount: Path, tmp_path: Path) -> None:
    image = rclone_mount / "image"
    assert np.array_equal(tifffile.imread(image / "data.tif"), VALUES)
    with h5py.File(image / "data.h5", "r") as h5:
        assert np.array_equal(h5[next(iter(h5))][...], VALUES)
    nifti = np.asarray(nibabel.load(image / "data.nii").dataobj)
    assert np.array_equal(nifti.T if nifti.shape != VALUES.shape else nifti, VALUES)
    subprocess.run(["gdal_translate", "-q", "-of", "ENVI", str(image / "data.tif"),
                    str(tmp_path / "out.raw")], check=True, timeout=120)
    assert np.array_equal(np.fromfile(tmp_path / "out.raw", "<u2").reshape(VALUES.shape), VALUES)
    line = np.fromfile(rclone_mount / "sub" / "line" / "data", "<f4")
    assert np.array_equal(line, np.linspace(0, 1, 50, dtype="<f4"))


def test_gdal_reads_data_tif_as_a_cog_through_vsicurl(tmp_path: Path) -> None:
    levels = ome_image(tmp_path / "image.zarr", "0.4")
    with served(tmp_path / "image.zarr", tmp_path, ["ro"]) as server:
        url = f"/vsicurl/{server.url}data.tif"
        checked = subprocess.run(["/usr/bin/python3", COG_VALIDATOR, url], capture_output=True, text=True)
        assert "is a valid cloud optimized GeoTIFF" in checked.stdout, checked.stdout + checked.stderr
        done = subprocess.run(["gdalinfo", "-json", url], capture_output=True, text=True, timeout=120)
        info = json.loads(done.stdout)
        assert [o["size"] for o in info["bands"][0]["overviews"]] == [[512, 768], [256, 384]]
        for number, level in enumerate(levels):
            out = tmp_path / f"level{number}.raw"
            args = [] if number == 0 else ["-ovr", str(number - 1)]
            done = subprocess.run(["gdal_translate", "-q", *args, "-of", "ENVI", url, str(out)],
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr + server.log()
            assert np.array_equal(np.fromfile(out, "u1").reshape(level.shape), level)


def venv_without_pyfuse3(where: Path) -> Path:
    """A virtualenv of this Python holding what this one holds (linked), but pyfuse3."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    asked = "import sysconfig; print(sysconfig.get_path('purelib'))"
    target = Path(subprocess.run([str(python), "-c", asked], capture_output=True, text=True,
                                 check=True).stdout.strip())
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not entry.name.startswith("pyfuse3"):
            (target / entry.name).symlink_to(entry)
    return python


def test_the_server_runs_where_pyfuse3_is_not_installed(tree: Path, tmp_path: Path) -> None:
    python = venv_without_pyfuse3(tmp_path / "venv")
    gone = subprocess.run([str(python), "-c", "import pyfuse3"], capture_output=True, text=True)
    assert gone.returncode != 0 and "No module named 'pyfuse3'" in gone.stderr
    with served(tree, tmp_path, ["rw"], command=[str(python), "-m", "zarrfs.cli"]) as server:
        url = server.url + "image/data"
        assert curl(url).stdout == VALUES.tobytes()
        assert curl("-r", "320-639", url).stdout == VALUES.tobytes()[320:640]
        assert status_of("-X", "PROPFIND", "-H", "Depth: 1", server.url + "image/") == 207
        row = np.full(160, 9, "<u2").tobytes()
        (tmp_path / "row").write_bytes(row)
        assert status_of("-X", "PUT", "--data-binary", f"@{tmp_path / 'row'}", "-H",
                         f"Content-Range: bytes 0-{len(row) - 1}/*", url) == 204
        assert (zarr.open_array(tree / "image", mode="r")[0] == 9).all()
        done = rclone(server.url, "lsf", "z:image")
        assert "data.tif" in done.stdout.split()
    shutil.rmtree(tmp_path / "venv")
