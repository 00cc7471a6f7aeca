"""One grammar for the codec of a new array: `zarrfs create --codec`, `zarrfs import --codec`
and the mount's `-o new_codec=` read the same text (`formats.layout.parse_codec`) and make
the same Zarr v3 document (`formats.v3_format.new_array_document`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.group_checks import zarrfs
from tests.helpers.mounting import MountFactory
from zarrfs.formats.layout import CodecChoice, parse_codec

ACCEPTED = {
    "zstd": CodecChoice("zstd", 3), "zstd:7": CodecChoice("zstd", 7), "zstd:": CodecChoice("zstd", 3),
    "gzip": CodecChoice("gzip", 6), "gzip:1": CodecChoice("gzip", 1),
    "blosc": CodecChoice("blosc", 5), "blosc:4": CodecChoice("blosc", 4),  # new_codec's old blosc:LEVEL
    "blosc:zstd:7": CodecChoice("blosc", 7, "zstd"),  # create's old blosc:CNAME:LEVEL
    "blosc:lz4hc": CodecChoice("blosc", 5, "lz4hc"), "none": CodecChoice("none", 0),
}
REFUSED = ["lzma", "zstd:x", "gzip:1:2", "blosc:nope:5", "blosc:lz4:5:1", "none:3", ""]


@pytest.mark.parametrize("text", list(ACCEPTED))
def test_accepted(text: str) -> None:
    assert parse_codec(text) == ACCEPTED[text]


@pytest.mark.parametrize("text", REFUSED)
def test_refused_naming_the_grammar(text: str) -> None:
    with pytest.raises(ValueError, match=r"blosc\[:CNAME\]\[:LEVEL\]"):
        parse_codec(text)


@pytest.mark.parametrize(("text", "highest"), [("zstd:23", 22), ("gzip:10", 9), ("blosc:zstd:10", 9)])
def test_levels_above_the_highest_refused(text: str, highest: int) -> None:
    with pytest.raises(ValueError, match=f"levels go up to {highest}"):
        parse_codec(text)


TEXTS = ["zstd:5", "blosc:zstd:7", "blosc:4", "none"]
TYPES = ["uint8", "float32"]  # blosc shuffles the bits of 1-byte types, the bytes of others


@pytest.mark.parametrize("text", TEXTS)
def test_create_import_and_a_mount_write_the_same_document(text: str, mount_array: MountFactory,
                                                             tmp_path: Path) -> None:
    group = tmp_path / "group"
    group.mkdir()
    (group / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    mount = mount_array(group, [f"new_codec={text}", "new_chunks=3:5"])
    for dtype in TYPES:
        values = np.arange(60, dtype=dtype).reshape(6, 10)
        np.save(mount.path / f"{dtype}.npy", values)
        raw = tmp_path / f"{dtype}.raw"
        raw.write_bytes(values.tobytes())
        common = ["--shape", "6,10", "--dtype", dtype, "--chunks", "3,5", "--codec", text]
        for command, extra in (("create", []), ("import", [str(raw)])):
            done = zarrfs(command, *extra, str(tmp_path / f"{command}-{dtype}"), *common)
            assert done.returncode == 0, done.stderr
    assert mount.unmount() == 0
    for dtype in TYPES:
        documents = [json.loads((path / "zarr.json").read_text())
                     for path in (group / dtype, tmp_path / f"create-{dtype}", tmp_path / f"import-{dtype}")]
        assert documents[0] == documents[1] == documents[2], dtype
