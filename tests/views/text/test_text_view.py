"""`data.txt` of arrays of strings and bytes written by zarr-python 3 (v3 and v2) and xarray,
through real mounts, against the lines made from what zarr-python reads back."""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.core.dtype import VariableLengthBytes

from zarrfs.views.text.file import render

WORDS = ["a", "", "naïve", "日本語", "two\nlines", "back\\slash", "cr\rlf", "tab\there", " ", "zz"]


def lines(values: np.ndarray, kind: str = "string") -> bytes:
    """The oracle's lines: written out again here, not taken from zarrfs."""
    out = []
    for v in np.asarray(values, dtype=object).reshape(-1):
        if kind == "bytes":
            out.append(bytes(v).hex())
        else:
            out.append(str(v).replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r"))
    return "".join(line + "\n" for line in out).encode()


def strings(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return np.array([f"{WORDS[i % len(WORDS)]}{i}" if i % 3 else WORDS[i % len(WORDS)] for i in range(n)],
                    dtype=object).reshape(shape)


def create(path: Path, values: np.ndarray, chunks: tuple[int, ...], zarr_format: int,
           dtype: Any = str, fill: Any = "-", region: tuple[slice, ...] | None = None) -> np.ndarray:
    """Written by zarr-python; only `region` (all when None) is written, the rest never stored.
    What zarr-python reads back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(path, shape=values.shape, chunks=chunks, dtype=dtype, fill_value=fill,
                                  zarr_format=zarr_format)
        where = region or tuple(slice(None) for _ in values.shape)
        array[where] = values[where]
        return np.asarray(zarr.open_array(path, mode="r")[...], dtype=object)


@pytest.mark.fast
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_strings_one_per_line(tmp_path: Path, mount_array: Any, zarr_format: int) -> None:
    shape = (7, 5)
    path = tmp_path / "s.zarr"
    read_back = create(path, strings(shape), (3, 2), zarr_format, region=(slice(0, 5), slice(0, 3)))
    assert (read_back == "-").sum() > 0  # chunks never written read as the fill value
    m = mount_array(path)
    text = (m.path / "data.txt").read_bytes()
    assert text == lines(read_back)
    assert not (m.path / "data").exists()
    wc = subprocess.run(["wc", "-l", str(m.path / "data.txt")], capture_output=True, text=True, check=True)
    assert int(wc.stdout.split()[0]) == 35
    grep = subprocess.run(["grep", "-c", "日本語", str(m.path / "data.txt")], capture_output=True, text=True)
    assert int(grep.stdout) == sum("日本語" in str(v) for v in read_back.reshape(-1))
    done = subprocess.run(["sort", str(m.path / "data.txt")], capture_output=True, check=True,
                          env={**os.environ, "LC_ALL": "C"})
    assert done.stdout == b"".join(sorted(lines(read_back).splitlines(keepends=True)))
    with open(m.path / "data.txt", "rb") as f:  # reads of any range
        for offset, size in [(0, 3), (17, 40), (len(text) - 5, 100), (len(text), 10)]:
            assert os.pread(f.fileno(), size, offset) == text[offset : offset + size]


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_bytes_as_hex(tmp_path: Path, mount_array: Any, zarr_format: int) -> None:
    values = np.array([b"\x00\xff", b"", b"ab", b"\n", b"x" * 300], dtype=object)
    path = tmp_path / "b.zarr"
    read_back = create(path, values, (2,), zarr_format, dtype=VariableLengthBytes(), fill=b"",
                       region=(slice(0, 4),))
    m = mount_array(path)
    assert (m.path / "data.txt").read_bytes() == lines(read_back, "bytes")
    assert (m.path / "data.txt").read_bytes().splitlines()[:2] == [b"00ff", b""]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_string_variables_in_a_group(tmp_path: Path, mount_array: Any, zarr_format: int) -> None:
    names = np.array(["station é", "", "line\nbreak", "last"], dtype=object)
    ds = xr.Dataset({"names": ("x", names), "t": ("x", np.arange(4.0))})
    path = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=zarr_format, consolidated=zarr_format == 2)
    m = mount_array(path)
    assert "data.txt" in os.listdir(m.path / "names") and "data.txt" not in os.listdir(m.path / "t")
    assert (m.path / "names/data.txt").read_bytes() == lines(names)
    assert os.stat(m.path / "names/data.txt").st_size == len(lines(names))


def test_large_chunked_array_reads_in_slabs(tmp_path: Path, mount_array: Any) -> None:
    """Many rows of chunks, rank 3: every byte range equals the whole file's."""
    shape = (40, 3, 4)
    path = tmp_path / "big.zarr"
    read_back = create(path, strings(shape), (3, 2, 3), 3, fill="")
    m = mount_array(path)
    text = (m.path / "data.txt").read_bytes()
    assert text == lines(read_back) and text.count(b"\n") == 480
    with open(m.path / "data.txt", "rb") as f:
        for offset in range(0, len(text), 997):
            assert os.pread(f.fileno(), 1500, offset) == text[offset : offset + 1500]


@pytest.mark.fast
def test_render_escapes() -> None:
    assert render(np.array(["a\\n", "b\nc\r"], dtype=object), "string") == b"a\\\\n\nb\\nc\\r\n"
    assert render(np.array([b"\x01\xab"], dtype=object), "bytes") == b"01ab\n"


def test_v2_fortran_order_reads_in_c_order(tmp_path: Path, mount_array: Any) -> None:
    values = strings((5, 4))
    path = tmp_path / "f.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(path, shape=values.shape, chunks=(3, 4), dtype=str, zarr_format=2,
                                  order="F")
        array[...] = values
        read_back = np.asarray(zarr.open_array(path, mode="r")[...], dtype=object)
    m = mount_array(path)
    assert (m.path / "data.txt").read_bytes() == lines(read_back)


def test_an_unknown_codec_of_strings_is_named(tmp_path: Path, mount_array: Any) -> None:
    """Strings behind a codec zarrfs does not know: metadata only, the log naming the codec."""
    path = tmp_path / "g.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.create_group(path)
        group.create_array("names", shape=(2,), chunks=(2,), dtype=str)[...] = np.array(["a", "b"])
    doc_path = path / "names" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["codecs"][1] = {"name": "nosuchcodec"}
    doc_path.write_text(json.dumps(doc))
    m = mount_array(path)
    assert os.listdir(m.path / "names") == ["zarr.json"]
    assert "nosuchcodec" in m.wait_for_log("names")


# zarr-python 2 wrote `"fill_value": 0` for text and bytes arrays by default, and fills the
# chunks never written with numpy's text of it: np.full(shape, 0, "<U4") holds "0" (2.18, read
# through zarr.open_array). Variable-length ones read as "0" in zarr-python 3 too.
@pytest.mark.parametrize("dtype", ["<U4", "|S4"])
def test_v2_fixed_text_with_a_numeric_fill(tmp_path: Path, mount_array: Any, dtype: str) -> None:
    path = tmp_path / "fixed.zarr"
    values = np.array(["ab", "cd"], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(path, shape=(4,), chunks=(2,), dtype=dtype, zarr_format=2)
        array[:2] = values
    metadata = json.loads((path / ".zarray").read_text())
    (path / ".zarray").write_text(json.dumps({**metadata, "fill_value": 0}))
    m = mount_array(path)
    expected = np.concatenate([values, np.full(2, 0, dtype=dtype)])
    assert (m.path / "data").read_bytes() == expected.tobytes()
    assert os.getxattr(m.path, "user.zarr.shape") == b"4"


@pytest.mark.parametrize("kind", ["string", "bytes"])
def test_v2_variable_text_with_a_numeric_fill(tmp_path: Path, mount_array: Any, kind: str) -> None:
    path = tmp_path / "vlen.zarr"
    values = np.array(["ab", "cd"] if kind == "string" else [b"ab", b"cd"], dtype=object)
    read_back = create(path, np.concatenate([values, values]), (2,), 2,
                       dtype=str if kind == "string" else VariableLengthBytes(),
                       fill="" if kind == "string" else b"", region=(slice(0, 2),))
    metadata = json.loads((path / ".zarray").read_text())
    (path / ".zarray").write_text(json.dumps({**metadata, "fill_value": 0}))
    filled = np.array(["0", "0"] if kind == "string" else [b"0", b"0"], dtype=object)
    expected = np.concatenate([read_back[:2], filled])
    m = mount_array(path)
    assert (m.path / "data.txt").read_bytes() == lines(expected, kind)
    assert os.getxattr(m.path, "user.zarr.shape") == b"4"
