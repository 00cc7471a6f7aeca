"""The Zarr v2 and v1 part of the bad-input corpus (corpus/v2, corpus/v1; see make_corpus.py),
checked through the commands users run: refused metadata makes `zarrfs info` exit 1 and
`zarrfs mount` fail with one line naming the field; inside a v2 group such an array is a
metadata-only directory; a chunk that does not decode is EIO for its region only, named in
the daemon's log."""

from __future__ import annotations

import bz2
import errno
import json
import os
import shutil
import subprocess
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from tests.helpers.mounting import ZARRFS, is_mounted

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())
OLD = {case: e for case, e in EXPECTED.items() if case.split("/")[0] in ("v2", "v1")}
REFUSED = sorted(case for case, e in OLD.items() if e["kind"] == "refused")
BAD_CHUNK = sorted(case for case, e in OLD.items() if e["kind"] == "bad_chunk")
METADATA_FILES = {2: ".zarray", 1: "meta"}
ROW = 1024 * 4  # one row of the arange arrays: int32[1024], a page


def missing_fragments(case: str, text: str) -> list[list[str]]:
    """The groups of expected fragments none of whose alternatives is in `text`."""
    lowered = text.lower()
    return [group for group in OLD[case]["fragments"]
            if not any(alternative.lower() in lowered for alternative in group)]


def arange() -> np.ndarray:
    return np.arange(8 * 1024, dtype="<i4").reshape(8, 1024)


# -- the corpus itself -----------------------------------------------------------------------


def test_old_format_cases_are_in_the_corpus() -> None:
    assert len([c for c in REFUSED if c.startswith("v2/")]) >= 7
    assert len([c for c in REFUSED if c.startswith("v1/")]) >= 3
    assert {c.split("/")[0] for c in BAD_CHUNK} == {"v2", "v1"}
    assert {f"v2/{name}" for name in GROUP_CASES} <= set(REFUSED)
    for case in REFUSED:
        for group in OLD[case]["fragments"]:
            assert group and all(isinstance(a, str) and a for a in group), case


@pytest.mark.parametrize("case", [c for c in BAD_CHUNK if c.startswith("v2/")])
def test_v2_chunk_cases_are_valid_for_zarr_python_but_the_bad_key(case: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.open_array(str(CORPUS / case), mode="r", zarr_format=2)
        assert np.asarray(array[:4]).tolist() == arange()[:4].tolist()
        # The bad key is too short or too long for its chunk (numpy cannot reshape it) or is
        # not zlib at all; zarr-python raises nothing more specific than these.
        with pytest.raises((ValueError, zlib.error),
                           match=r"cannot reshape array of size \d+ into shape|incorrect header check"):
            np.asarray(array[4:])


@pytest.mark.parametrize("case", [c for c in BAD_CHUNK if c.startswith("v1/")])
def test_v1_chunk_cases_decode_by_the_spec_but_the_bad_key(case: str) -> None:
    meta = json.loads((CORPUS / case / "meta").read_text())
    decompress = {"zlib": zlib.decompress, "bz2": bz2.decompress, "none": bytes}[meta["compression"]]
    good = decompress((CORPUS / case / "0.0").read_bytes())
    block = np.frombuffer(good, dtype=meta["dtype"]).reshape(meta["chunks"], order=meta["order"])
    assert block.tolist() == arange()[:4].tolist()
    try:
        bad = decompress((CORPUS / case / "1.0").read_bytes())
    except (OSError, zlib.error, ValueError):
        return
    assert len(bad) != 4 * 1024 * 4


# -- refused metadata ------------------------------------------------------------------------


@pytest.mark.parametrize("case", BAD_CHUNK)
def test_info_accepts_the_valid_metadata(case: str) -> None:
    """The positive control of the refusals below: the bad-chunk cases' metadata is valid, and
    `zarrfs info` describes it (exit 0), so a command that refused everything fails here."""
    result = subprocess.run([ZARRFS, "info", str(CORPUS / case)], capture_output=True, text=True,
                            timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"exit {result.returncode}:\n{output}"
    assert "Traceback" not in output, output
    fields = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert fields["zarr format"].strip() == str(OLD[case]["format"]), output
    assert fields["shape"].strip() == "8 x 1024", output
    assert fields["chunk shape"].strip() == "4 x 1024", output


@pytest.mark.parametrize("case", REFUSED)
def test_info_refuses_naming_the_field(case: str) -> None:
    result = subprocess.run([ZARRFS, "info", str(CORPUS / case)], capture_output=True, text=True,
                            timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 1, f"exit {result.returncode}:\n{output}"
    assert "Traceback" not in output, output
    assert not missing_fragments(case, output), f"{missing_fragments(case, output)} not in:\n{output}"


@pytest.mark.parametrize("case", REFUSED)
def test_mount_refuses_with_one_line_naming_the_field(case: str, tmp_path: Path) -> None:
    mountpoint = tmp_path / "mp"
    mountpoint.mkdir()
    result = subprocess.run([ZARRFS, "mount", str(CORPUS / case), str(mountpoint)], capture_output=True,
                            text=True, timeout=60)
    try:
        assert result.returncode != 0, f"mounted:\n{result.stdout}{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        missing = missing_fragments(case, result.stderr)
        assert not missing, f"{missing} not in: {result.stderr}"
        assert not is_mounted(mountpoint)
    finally:
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], capture_output=True)


# The structural problems (codec configurations are left to the single-array tests above).
GROUP_CASES = ["zarray_not_json", "compressor_unknown_id", "object_dtype_without_codec", "order_x",
               "dtype_bad_string", "shape_negative", "chunks_zero", "filter_unknown_id",
               "dimension_separator_bad", "fill_value_string", "compressor_not_object", "chunks_missing"]


def test_refused_v2_arrays_in_a_group_are_metadata_only(tmp_path: Path, mount_array: Any) -> None:
    """Every refused v2 case as a child of one v2 group, beside a good array: the group
    mounts, each bad child is a directory holding its metadata file only, and the log names
    each bad child and its problem."""
    group = tmp_path / "group.zarr"
    group.mkdir()
    (group / ".zgroup").write_text(json.dumps({"zarr_format": 2}, indent=4))
    bad = [f"v2/{name}" for name in GROUP_CASES]
    for case in bad:
        shutil.copytree(CORPUS / case, group / case.split("/")[1])
    good = np.arange(12, dtype="<i2").reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.create_array(store=str(group / "good"), shape=(3, 4), chunks=(2, 2), dtype="<i2",
                          zarr_format=2)[...] = good
    mount = mount_array(group, options=("ro",))
    names = [".zgroup", "data.h5", "data.nc", "good", *(c.split("/")[1] for c in bad)]
    assert sorted(os.listdir(mount.path)) == sorted(names)
    assert (mount.path / "good" / "data").read_bytes() == good.tobytes()
    problems = []
    for case in bad:
        name = case.split("/")[1]
        listed = sorted(os.listdir(mount.path / name))
        if listed != [".zarray"]:
            problems.append(f"{name}: lists {listed}")
        stored = (CORPUS / case / ".zarray").read_bytes()
        if (mount.path / name / ".zarray").read_bytes() != stored:
            problems.append(f"{name}: .zarray differs from the stored bytes")
    log = mount.log()  # after every child was looked up, in case they are opened lazily
    for case in bad:
        name = case.split("/")[1]
        lines = [line for line in log.splitlines() if name in line]
        if not lines:
            problems.append(f"{name}: not named in the log")
        elif not any(not missing_fragments(case, line) for line in lines):
            problems.append(f"{name}: log lines {lines} lack {OLD[case]['fragments']}")
    assert not problems, "\n".join(problems) + f"\n--- log ---\n{log}"


# -- chunks that do not decode ---------------------------------------------------------------


@pytest.mark.parametrize("case", BAD_CHUNK)
def test_bad_chunk_is_eio_for_its_region_and_named_in_the_log(case: str, mount_array: Any) -> None:
    assert OLD[case]["bad_keys"] == ["1.0"]  # rows 4-7 of the 8x1024 arange array
    mount = mount_array(CORPUS / case, options=("ro",))
    version = OLD[case]["format"]
    assert METADATA_FILES[version] in os.listdir(mount.path)
    reference = arange()
    fd = os.open(mount.data, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as bad:
            os.pread(fd, ROW, 5 * ROW)
        assert bad.value.errno == errno.EIO
        assert os.pread(fd, ROW, 0) == reference[0].tobytes()
        assert os.pread(fd, 2 * ROW, 2 * ROW) == reference[2:4].tobytes()
    finally:
        os.close(fd)
    with pytest.raises(OSError) as bad_chunk:
        mount.chunk("1.0").read_bytes()
    assert bad_chunk.value.errno == errno.EIO
    assert mount.chunk("0.0").read_bytes() == reference[:4].tobytes()
    log = mount.log()
    assert any("1.0'" in line or '1.0"' in line for line in log.splitlines()), log  # the key, quoted
