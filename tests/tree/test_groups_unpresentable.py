"""Groups holding arrays zarrfs cannot present on a real mount: variable-length strings
(data.txt, data.h5 instead of data), an unknown codec or corrupt metadata (the rest of the
group is served, the bad array is named in the log)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.group_checks import (
    assert_data,
    assert_enoent,
    assert_metadata_files_as_stored,
    info_lines,
    numbers,
    xattrs,
    zarrfs,
)
from tests.helpers.mounting import is_mounted, without_views


def _mount_fails(source: Path, mountpoint: Path) -> str:
    """Mount `source` (in the background), which must fail in one line; that line."""
    mountpoint.mkdir(exist_ok=True)
    try:
        done = zarrfs("mount", str(source), str(mountpoint))
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
    assert done.returncode != 0, f"mounting {source} succeeded"
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{done.stderr}"
    assert not is_mounted(mountpoint)
    return lines[0]


def _log_line_naming(log: str, *words: str) -> str:
    for line in log.splitlines():
        if all(w.lower() in line.lower() for w in words):
            return line
    raise AssertionError(f"no log line names {words}:\n{log}")


# -- arrays of variable-length strings (data.txt, data.h5); arrays zarrfs cannot present ----------


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2-vlen-utf8", "v3-string"])
def test_group_with_a_vlen_string_array(fmt: int, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "strings.zarr"
    root = zarr.create_group(store, zarr_format=fmt)
    names = root.create_array("names", shape=(3,), dtype=str, chunks=(2,))
    names[:] = np.array(["a", "bb", "ccc"])
    nums = root.create_array("nums", shape=(5,), dtype="<i4", chunks=(2,))
    nums[:] = np.arange(5) * 11
    meta = {".zarray", ".zattrs"} if fmt == 2 else {"zarr.json"}
    stored = json.loads((store / "names" / (".zarray" if fmt == 2 else "zarr.json")).read_bytes())
    assert stored.get("dtype", stored.get("data_type")) == ("|O" if fmt == 2 else "string")

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path)) == ({".zgroup", ".zattrs"} if fmt == 2 else {"zarr.json"}) | {
        "data.nc", "data.h5", "names", "nums"}
    assert set(os.listdir(mount.path / "names")) == meta | {"data.txt", "data.h5"}
    assert (mount.path / "names" / "data.txt").read_bytes() == b"a\nbb\nccc\n"
    assert_enoent(mount.path / "names" / "data")
    assert_enoent(mount.path / "names" / "chunks")
    assert_metadata_files_as_stored(mount.path, store)
    _log_line_naming(mount.log(), "names", "data.txt")
    assert_data(mount.path / "nums" / "data", np.arange(5, dtype="<i4") * 11)
    assert without_views(os.listdir(mount.path / "nums")) == sorted(meta | {"data", "chunks"})

    lines = info_lines(store)
    assert set(lines) == {"/", "/names", "/nums"}
    assert "data.txt and data.h5" in lines["/names"] and "string" in lines["/names"]
    assert "metadata only" not in lines["/nums"]

    direct = mount_array(store / "names", ["ro"])  # mounted alone: data.txt, data.h5 and its metadata
    assert set(os.listdir(direct.path)) == meta | {"data.txt", "data.h5"}


BAD_CODEC = "nosuchcodec"


def _group_with_a_bad_array(store: Path, kind: str) -> str:
    """A group with a good array `good` and a broken array `bad`; a word the problem's
    description must contain."""
    fmt = 3 if kind == "unknown-codec" else 2
    root = zarr.create_group(store, zarr_format=fmt, attributes={"ok": True})
    good = root.create_array("good", shape=(6,), dtype="<u2", chunks=(4,))
    good[:] = np.arange(6) + 100
    bad = root.create_array("bad", shape=(6,), dtype="<u2", chunks=(4,))
    bad[:] = np.arange(6)
    if kind == "unknown-codec":
        doc = json.loads((store / "bad" / "zarr.json").read_bytes())
        doc["codecs"] = [doc["codecs"][0], {"name": BAD_CODEC, "configuration": {}}]
        (store / "bad" / "zarr.json").write_text(json.dumps(doc, indent=2))
        return BAD_CODEC
    (store / "bad" / ".zarray").write_text('{"shape": [6], "chunks": [4], "dtype": "<u2"')
    return "json"


@pytest.mark.parametrize("kind", ["unknown-codec", "bad-json"])
def test_group_with_a_bad_array(kind: str, tmp_path: Path, mount_array: Any) -> None:
    store = tmp_path / "group.zarr"
    problem = _group_with_a_bad_array(store, kind)
    meta = {"zarr.json"} if kind == "unknown-codec" else {".zarray", ".zattrs"}

    mount = mount_array(store, ["ro"])
    assert set(os.listdir(mount.path / "bad")) == meta
    assert_metadata_files_as_stored(mount.path, store)  # the broken bytes, as stored
    assert_enoent(mount.path / "bad" / "data")
    _log_line_naming(mount.log(), "bad", problem)
    assert without_views(os.listdir(mount.path / "good")) == sorted(meta | {"data", "chunks"})
    assert_data(mount.path / "good" / "data", np.arange(6, dtype="<u2") + 100)
    assert json.loads(xattrs(mount.path)["user.zarr.attributes"]) == {"ok": True}

    done = zarrfs("info", str(store / "bad"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert problem in (done.stdout + done.stderr).lower()
    reason = done.stderr.strip().removeprefix("zarrfs:").strip()

    line = _mount_fails(store / "bad", tmp_path / "direct")
    assert problem in line.lower()
    assert reason in line  # the same reason, unaltered

    lines = info_lines(store)
    assert set(lines) == {"/", "/good", "/bad"}
    assert "metadata only" in lines["/bad"] and problem in lines["/bad"].lower()
    assert "metadata only" not in lines["/good"] and 6 in numbers(lines["/good"])
