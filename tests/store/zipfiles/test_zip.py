"""Zipped Zarr mounted read-only (issue 41, item 1): zips written by zarr-python's ZipStore
(v3 and v2, the store at the root), by `zip -r` and `python -m zipfile` (the BioImage
Archive's layout: the store in one folder, entries deflated) and an RFC-9-like `.ozx`
(stored, ZIP64, `zarr.json` first, a comment), each mounted and compared with zarr-python
reading the same zip; every view of every array is opened and read. The costs of remote
zips: tests/reliability/test_s3_zip.py."""

from __future__ import annotations

import errno
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
import zarr

from tests.helpers.mounting import ZARRFS, Mount, is_mounted
from tests.helpers.zip_fixtures import (
    assert_array_matches,
    assert_group_matches,
    entries,
    file_names,
    ome_image,
    open_zipped,
    ozx,
    values,
    zipped_folder,
    zipstore_array,
    zipstore_group,
)


def test_zipstore_v3_group_with_a_sharded_array(tmp_path: Path, mount_array: Any) -> None:
    zipped = zipstore_group(tmp_path / "cells.zarr.zip", zarr_format=3)
    m = mount_array(zipped)
    assert_group_matches(m.path, open_zipped(zipped))
    stored = entries(zipped)
    assert (m.path / "image" / "zarr.json").read_bytes() == stored["image/zarr.json"]


def test_zipstore_v2_group(tmp_path: Path, mount_array: Any) -> None:
    zipped = zipstore_group(tmp_path / "cells.zip", zarr_format=2)
    m = mount_array(zipped)
    assert_group_matches(m.path, open_zipped(zipped))
    assert (m.path / "image" / ".zarray").read_bytes() == entries(zipped)["image/.zarray"]


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_zipstore_array_at_the_root_with_deflated_chunks(tmp_path: Path, mount_array: Any,
                                                         zarr_format: int) -> None:
    zipped = zipstore_array(tmp_path / "array.zip", zarr_format)
    with zipfile.ZipFile(zipped) as archive:
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_DEFLATED}
    m = mount_array(zipped)
    assert_array_matches(m.path, open_zipped(zipped))


@pytest.mark.parametrize("tool", ["zip", "python"])
def test_a_store_in_one_folder_of_the_zip_as_the_bioimage_archive_ships_it(
        tmp_path: Path, mount_array: Any, tool: str) -> None:
    image = ome_image(tmp_path / "source" / "cells.ome.zarr")
    zipped = zipped_folder(image, tmp_path / "cells.ome.zarr.zip", tool)
    with zipfile.ZipFile(zipped) as archive:
        assert zipfile.ZIP_DEFLATED in {i.compress_type for i in archive.infolist()}
        assert all(name.startswith("cells.ome.zarr/") for name in archive.namelist())
    m = mount_array(zipped)
    oracle = open_zipped(zipped, "cells.ome.zarr")
    assert_group_matches(m.path, oracle)
    assert np.array_equal(tifffile.imread(m.path / "data.ome.tif"), oracle["0"][...])


@pytest.mark.fast
def test_an_rfc9_ozx(tmp_path: Path, mount_array: Any) -> None:
    zipped = ozx(ome_image(tmp_path / "source" / "cells.ome.zarr"), tmp_path / "cells.ozx")
    with zipfile.ZipFile(zipped) as archive:
        names = archive.namelist()
        assert names[:3] == ["zarr.json", "0/zarr.json", "1/zarr.json"] and archive.comment
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_STORED}
    assert b"PK\x06\x06" in zipped.read_bytes()[-200:]  # a ZIP64 end record
    m = mount_array(zipped)
    oracle = open_zipped(zipped)
    assert_group_matches(m.path, oracle)
    assert zarr.open_group(m.path, mode="r").attrs["ome"]["version"] == "0.5"


@pytest.mark.parametrize("form", ["zip::{zip}", "zip://cells.ome.zarr/0::{zip}"])
def test_fsspecs_chained_form_names_the_zip_and_a_folder_in_it(tmp_path: Path, mount_array: Any,
                                                               form: str) -> None:
    image = ome_image(tmp_path / "source" / "cells.ome.zarr")
    zipped = zipped_folder(image, tmp_path / "cells.ome.zarr.zip", "python")
    m = mount_array(form.format(zip=zipped))
    if "/0::" in form:
        assert_array_matches(m.path, open_zipped(zipped, "cells.ome.zarr/0"))
    else:
        assert_group_matches(m.path, open_zipped(zipped, "cells.ome.zarr"))


def test_a_zip_mount_is_read_only_and_rw_is_refused(tmp_path: Path, mount_array: Any) -> None:
    zipped = zipstore_array(tmp_path / "array.zip")
    before = zipped.read_bytes()
    target = tmp_path / "refused"
    target.mkdir()
    result = subprocess.run([ZARRFS, "mount", "-f", str(zipped), str(target), "-o", "rw"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and not is_mounted(target)
    assert "zip mounts are read-only" in result.stderr and "Traceback" not in result.stderr

    m: Mount = mount_array(zipped)
    with pytest.raises(OSError) as refused, open(m.data, "r+b") as f:
        f.write(b"x")
    assert refused.value.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    assert zipped.read_bytes() == before


def test_a_file_that_is_not_a_zip_fails_the_mount_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"PK\x03\x04 not really a zip" * 100)
    target = tmp_path / "mnt"
    target.mkdir()
    result = subprocess.run([ZARRFS, "mount", "-f", str(fake), str(target)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and not is_mounted(target)
    assert "not a readable zip archive" in result.stderr and "Traceback" not in result.stderr


def test_a_corrupt_entry_is_eio_and_the_rest_still_reads(tmp_path: Path, mount_array: Any) -> None:
    zipped = zipstore_array(tmp_path / "array.zip")
    with zipfile.ZipFile(zipped) as archive:
        victim = archive.getinfo("c/0/0")
    raw = bytearray(zipped.read_bytes())
    data_start = victim.header_offset + 30 + len(victim.filename) + len(victim.extra)
    raw[data_start : data_start + 8] = b"\xff" * 8  # (the deflate stream, not the header)
    zipped.write_bytes(bytes(raw))
    m = mount_array(zipped)
    with pytest.raises(OSError) as failed:
        (m.chunk("c/0/0")).read_bytes()
    assert failed.value.errno == errno.EIO
    decoded = np.frombuffer(m.chunk("c/1/0").read_bytes(), dtype="<i4").reshape(32, 32)
    assert np.array_equal(decoded, values((100, 60), "int32")[32:64, 0:32])
    assert "Traceback" not in m.log()


def test_listing_comes_from_the_central_directory(tmp_path: Path, mount_array: Any) -> None:
    zipped = zipstore_group(tmp_path / "cells.zip", zarr_format=3)
    m = mount_array(zipped)
    chunk_entries = {n[len("image/"):] for n in entries(zipped) if n.startswith("image/c/")}
    assert {f"c/{name}" for name in file_names(m.path / "image" / "chunks" / "c")} == chunk_entries
