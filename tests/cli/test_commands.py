"""`zarrfs create` and `zarrfs info`, run as commands.

Arrays made by `create` must open in TensorStore and zarr-python with exactly the requested
metadata; `info` must describe any array (its own, TensorStore's, zarr-python's); and bad
input must fail with a non-zero status and one clear line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import tensorstore as ts
import zarr


def _zarrfs_command() -> str:
    beside_python = Path(sys.executable).parent / "zarrfs"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("zarrfs")
    assert found is not None, "the zarrfs command is not installed (bash scripts/install)"
    return found


def zarrfs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_zarrfs_command(), *args], capture_output=True, text=True, timeout=60)


def created(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    done = zarrfs("create", str(path), *options)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def info(path: Path | str) -> dict[str, str]:
    """`zarrfs info` as {label: value}, labels lower-cased."""
    done = zarrfs("info", str(path))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        label, sep, value = line.partition(":")
        if sep:
            rows[label.strip().lower()] = value.strip()
    return rows


def row(rows: dict[str, str], *words: str, without: tuple[str, ...] = ()) -> str:
    """The value of the one row whose label has all `words` and none of `without`."""
    found = [v for k, v in rows.items()
             if all(w in k for w in words) and not any(w in k for w in without)]
    assert len(found) == 1, f"no single row labelled {words} in {rows}"
    return found[0]


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text.replace(",", "").replace("_", ""))]


def open_tensorstore(path: Path) -> Any:
    return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}},
                   open=True).result()


def open_zarr_python(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_array(str(path), mode="r")


def fill_bits(value: Any) -> bytes:
    return np.ascontiguousarray(np.asarray(value)).tobytes()



# -- create ------------------------------------------------------------------------------------

CODECS = {
    # --codec: (name TensorStore and zarr-python must show, its configuration)
    "zstd:3": ("zstd", {"level": 3}),
    "gzip:6": ("gzip", {"level": 6}),
    "blosc:lz4:5": ("blosc", {"cname": "lz4", "clevel": 5}),
    "none": (None, {}),
}


@pytest.mark.parametrize("shards", [None, "50,100"], ids=["unsharded", "sharded"])
@pytest.mark.parametrize("codec", list(CODECS))
def test_create_makes_the_array_asked_for(codec: str, shards: str | None, tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    options = ["--shape", "100,200", "--dtype", "uint16", "--chunks", "10,20", "--codec", codec,
               "--fill-value", "7", "--dimension-names", "x,y"]
    if shards:
        options += ["--shards", shards]
    created(path, *options)
    write_shape = (50, 100) if shards else (10, 20)
    codec_name, codec_config = CODECS[codec]

    store = open_tensorstore(path)
    assert store.shape == (100, 200)
    assert store.dtype == ts.uint16
    assert store.chunk_layout.read_chunk.shape == (10, 20)
    assert store.chunk_layout.write_chunk.shape == write_shape
    assert fill_bits(store.fill_value) == fill_bits(np.uint16(7))
    assert store.domain.labels == ("x", "y")
    codecs = store.codec.to_json()["codecs"]
    if shards:
        assert [c["name"] for c in codecs] == ["sharding_indexed"]
        assert codecs[0]["configuration"]["chunk_shape"] == [10, 20]
        codecs = codecs[0]["configuration"]["codecs"]
    names = [c["name"] for c in codecs]
    assert names == ["bytes"] + ([codec_name] if codec_name else [])
    if codec_name:
        assert codec_config.items() <= codecs[1]["configuration"].items()
    if codec_name == "blosc":  # the spec requires typesize when shuffling
        config = codecs[1]["configuration"]
        assert config["shuffle"] == "noshuffle" or config["typesize"] == 2

    array = open_zarr_python(path)
    assert array.shape == (100, 200)
    assert array.dtype == np.dtype("uint16")
    assert array.chunks == (10, 20)
    assert array.shards == ((50, 100) if shards else None)
    assert fill_bits(array.fill_value) == fill_bits(np.uint16(7))
    assert tuple(array.metadata.dimension_names) == ("x", "y")
    assert [type(c).__name__.lower() for c in array.compressors] == (
        [f"{codec_name}codec"] if codec_name else []
    )
    assert (np.asarray(array[...]) == 7).all()

    # Data written by TensorStore: `info` counts the stored chunks (or shards).
    store[0:25, 0:30] = np.arange(750, dtype=np.uint16).reshape(25, 30)
    rows = info(path)
    assert numbers(row(rows, "shape", without=("chunk",))) == [100, 200]
    assert "uint16" in row(rows, "type")
    assert numbers(row(rows, "chunk", "shape", without=("inner",))) == list(write_shape)
    if shards:
        assert numbers(row(rows, "inner", "chunk")) == [10, 20]
    else:
        assert not any("inner" in label for label in rows)
    codec_text = row(rows, "codec")
    assert "bytes" in codec_text
    if codec_name:
        assert codec_name in codec_text
        for value in codec_config.values():
            assert str(value) in codec_text
    if shards:
        assert "sharding" in codec_text
    assert row(rows, "fill") == "7"
    assert re.findall(r"\w+", row(rows, "dimension")) == ["x", "y"]
    assert 40000 in numbers(row(rows, "size"))  # the flat view: 100 * 200 * 2 bytes
    stored = 1 if shards else 3 * 2
    assert numbers(row(rows, "stored"))[0] == stored


FILL_VALUES = {
    # (--dtype, --fill-value): the fill value's bits
    ("float32", "nan"): np.float32("nan").tobytes(),
    ("float32", "-0.0"): np.float32(-0.0).tobytes(),
    ("float32", "0x7fc00001"): (0x7FC00001).to_bytes(4, "little"),
    ("float64", "-inf"): np.float64("-inf").tobytes(),
    ("int8", "-128"): np.int8(-128).tobytes(),
    ("uint64", "18446744073709551615"): np.uint64(2**64 - 1).tobytes(),
    ("bool", "true"): b"\x01",
    ("complex64", "1+2j"): np.complex64(1 + 2j).tobytes(),
    ("int4", "-3"): np.int8(-3).tobytes(),
    ("bfloat16", "nan"): np.array(np.nan, dtype=ml_dtypes.bfloat16).tobytes(),
    ("float16", "0x7e01"): (0x7E01).to_bytes(2, "little"),
}


@pytest.mark.parametrize(("dtype", "fill"), list(FILL_VALUES), ids=[
    f"{d}-{f}" for d, f in FILL_VALUES])
def test_create_keeps_the_fill_value_bit_for_bit(dtype: str, fill: str, tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    created(path, "--shape", "6,4", "--dtype", dtype, "--chunks", "3,4",
            f"--fill-value={fill}", "--codec", "none")
    store = open_tensorstore(path)
    want = FILL_VALUES[dtype, fill]

    def raw(value: Any) -> bytes:
        value = np.asarray(value)
        return value.astype(np.int8).tobytes() if dtype == "int4" else value.tobytes()

    assert raw(store.fill_value) == want
    assert raw(store[0, 0].read().result()) == want  # nothing stored: all fill
    # zarr-python has no int4 or bfloat16, and drops float16 NaN payloads.
    if dtype not in ("int4", "bfloat16") and (dtype, fill) != ("float16", "0x7e01"):
        assert fill_bits(open_zarr_python(path).fill_value) == want
    if fill.startswith("0x"):  # a NaN payload must survive into what `info` shows
        assert row(info(path), "fill").lower() == fill


@pytest.mark.parametrize("separator", [
    "/", "."])
def test_create_key_separator_and_no_dimension_names(separator: str, tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    created(path, "--shape", "7", "--dtype", "float64", "--chunks", "3",
            "--key-separator", separator)
    store = open_tensorstore(path)
    store[0:7] = np.arange(7.0)
    keys = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    assert keys == [f"c{separator}{i}" for i in range(3)] + ["zarr.json"]
    rows = info(path)
    assert numbers(row(rows, "size")) == [56]
    assert not re.findall(r"[a-z]{2,}", row(rows, "dimension").lower().replace("none", ""))
    assert numbers(row(rows, "stored"))[0] == 3


def test_create_refuses_an_existing_array(tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    created(path, "--shape", "4", "--dtype", "uint8", "--chunks", "2")
    before = (path / "zarr.json").read_bytes()
    done = zarrfs("create", str(path), "--shape", "8", "--dtype", "uint8", "--chunks", "2")
    assert_one_line_error(done)
    assert (path / "zarr.json").read_bytes() == before


# -- info on arrays zarrfs did not make ----------------------------------------------------------


@pytest.mark.fast
def test_info_describes_a_zarr_python_array(tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(store=str(path), shape=(30, 40, 5), chunks=(5, 10, 5),
                                  shards=(10, 20, 5), dtype="float32", fill_value=np.nan,
                                  dimension_names=("t", None, "c"))
        array[0:10, 0:20, :] = 1.0
        array[20:30, 20:40, :] = 2.0
    rows = info(path)
    assert numbers(row(rows, "shape", without=("chunk",))) == [30, 40, 5]
    assert "float32" in row(rows, "type")
    assert numbers(row(rows, "chunk", "shape", without=("inner",))) == [10, 20, 5]
    assert numbers(row(rows, "inner", "chunk")) == [5, 10, 5]
    assert "sharding" in row(rows, "codec") and "zstd" in row(rows, "codec")
    assert row(rows, "fill").lower() == "nan"
    names = row(rows, "dimension")
    assert "t" in names and "c" in names
    assert math.prod([30, 40, 5]) * 4 in numbers(row(rows, "size"))
    assert numbers(row(rows, "stored"))[0] == 2


def test_info_describes_a_tensorstore_array(tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    store = ts.open({
        "driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}, "dtype": "int16",
        "schema": {"domain": {"shape": [9, 13]}, "chunk_layout": {"chunk": {"shape": [4, 6]}},
                   "fill_value": -5,
                   "codec": {"driver": "zarr3", "codecs": [
                       {"name": "gzip", "configuration": {"level": 2}}]}},
    }, create=True).result()
    store[0:1, 0:1] = 1
    rows = info(path)
    assert numbers(row(rows, "shape", without=("chunk",))) == [9, 13]
    assert numbers(row(rows, "chunk", "shape", without=("inner",))) == [4, 6]
    assert "gzip" in row(rows, "codec")
    assert row(rows, "fill") == "-5"
    assert 9 * 13 * 2 in numbers(row(rows, "size"))
    assert numbers(row(rows, "stored"))[0] == 1


# -- bad input -----------------------------------------------------------------------------------


def assert_one_line_error(done: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{done.stderr}"
    for text in mentions:
        assert text in lines[0]


CREATE = ["--shape", "100,200", "--dtype", "uint16", "--chunks", "10,20"]

BAD_CREATE = {
    "unknown-dtype": (["--shape", "100,200", "--dtype", "nope", "--chunks", "10,20"], "nope"),
    "shape-not-numbers": (["--shape", "100,x", "--dtype", "uint16", "--chunks", "10,20"],
                          "100,x"),
    "shape-negative": (["--shape=-100,200", "--dtype", "uint16", "--chunks", "10,20"], "-100"),
    "shape-empty-part": (["--shape", "100,,200", "--dtype", "uint16", "--chunks", "10,20"],
                         "100,,200"),
    "chunks-of-another-rank": (["--shape", "100,200", "--dtype", "uint16", "--chunks", "10"],
                               "chunks"),
    "chunks-zero": (["--shape", "100,200", "--dtype", "uint16", "--chunks", "0,20"], "0"),
    "shards-not-a-multiple": ([*CREATE, "--shards", "55,100"], "55"),
    "unknown-codec": ([*CREATE, "--codec", "lz5"], "lz5"),
    "codec-level-not-a-number": ([*CREATE, "--codec", "zstd:high"], "zstd:high"),
    "fill-value-not-a-number": ([*CREATE[:3], "float32", *CREATE[4:], "--fill-value", "abc"],
                                "abc"),
    "fill-value-out-of-range": ([*CREATE, "--fill-value", "70000"], "70000"),
    "fill-value-not-an-integer": ([*CREATE, "--fill-value", "1.5"], "1.5"),
    "too-many-dimension-names": ([*CREATE, "--dimension-names", "x,y,z"], "dimension"),
}


def _bad_create_params() -> list[Any]:
    return [
        pytest.param(name)
        for name in BAD_CREATE
    ]


@pytest.fixture(scope="module")
def bad_creates(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """Every `zarrfs create` of BAD_CREATE, run at once: each is a new interpreter importing
    numpy and the codecs (about 0.3 s of CPU), on both cores instead of one after another."""
    root = tmp_path_factory.mktemp("bad-create")

    def run(name: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
        path = root / name / "array.zarr"
        return path, zarrfs("create", str(path), *BAD_CREATE[name][0])

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(BAD_CREATE, pool.map(run, BAD_CREATE), strict=True))


@pytest.mark.fast
@pytest.mark.parametrize("name", _bad_create_params())
def test_create_refuses_bad_input_in_one_line(
    name: str, bad_creates: dict[str, tuple[Path, subprocess.CompletedProcess[str]]]
) -> None:
    path, done = bad_creates[name]
    assert_one_line_error(done, BAD_CREATE[name][1])
    assert not (path / "zarr.json").exists()


def test_info_of_a_missing_source_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-array"
    assert_one_line_error(zarrfs("info", str(missing)), str(missing))


BAD_METADATA = {
    "not-json": (b"{not json", "zarr.json"),
    "unknown-codec": (json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "lz5"}]}).encode(), "lz5"),
}


def test_info_of_a_group_prints_its_tree(tmp_path: Path) -> None:
    """A group is no longer an error: `info` lists it (groups are mounted since issue 8)."""
    path = tmp_path / "group.zarr"
    (path / "empty").mkdir(parents=True)
    (path / "zarr.json").write_bytes(b'{"zarr_format": 3, "node_type": "group"}')
    (path / "empty" / "zarr.json").write_bytes(b'{"zarr_format": 3, "node_type": "group"}')
    result = zarrfs("info", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["/", "group", "(zarr", "v3)", "/empty", "group", "(zarr", "v3)"]


@pytest.mark.parametrize("name", list(BAD_METADATA))
def test_info_of_bad_metadata_fails_in_one_line(name: str, tmp_path: Path) -> None:
    content, mention = BAD_METADATA[name]
    path = tmp_path / "array.zarr"
    path.mkdir()
    (path / "zarr.json").write_bytes(content)
    assert_one_line_error(zarrfs("info", str(path)), mention)
