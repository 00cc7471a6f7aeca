"""`zarrfs check` and `zarrfs import`, run as commands.

check must pass arrays written by zarr-python (v3 plain and sharded, v2, groups) and name
every damaged key: a flipped byte caught by a checksum, a truncated shard, a shard index
whose entries overlap, a chunk that decodes to the wrong size, a stored key outside the chunk
grid, a temporary file left by a dead process, an array that cannot be opened.

import must produce arrays that zarr-python and TensorStore read back exactly, for RAW in C or
F order and either byte order, sharded or not, from a file or from stdin, and refuse a RAW of
the wrong size leaving nothing behind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import tensorstore as ts
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from tests.helpers.mounting import ZARRFS


def zarrfs(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([ZARRFS, *args], input=stdin, capture_output=True, timeout=60)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def check(path: Path) -> tuple[int, dict[str, str]]:
    """`zarrfs check`: its exit status and {key relative to path: problem}."""
    done = zarrfs("check", str(path))
    problems = {}
    for line in done.stdout.splitlines():
        where, _, problem = line.partition(": ")
        assert where.startswith(f"{path}/"), line
        problems[where[len(str(path)) + 1 :]] = problem
    assert done.returncode in (0, 1), done.stderr
    assert (done.returncode == 0) == (not problems), done.stdout
    return done.returncode, problems


def data(shape: tuple[int, ...], dtype: str = "uint16") -> np.ndarray:
    values = (np.arange(np.prod(shape)) % 251 + 1).astype(dtype).reshape(shape)
    values[: shape[0] // 3] = 0  # whole chunks of fill value
    return values


def v3_array(path: Path, **options: object) -> zarr.Array:
    values = data((40, 30))
    array = zarr.create_array(store=str(path), shape=values.shape, dtype=values.dtype, fill_value=0,
                              **options)  # type: ignore[arg-type]
    array[...] = values
    return array


# -- check: sound stores -----------------------------------------------------------------------


def test_check_passes_sound_arrays_and_groups(tmp_path: Path) -> None:
    v3_array(tmp_path / "plain.zarr", chunks=(8, 8))
    v3_array(tmp_path / "sharded.zarr", chunks=(4, 4), shards=(16, 8))
    v2 = zarr.create_array(store=str(tmp_path / "v2.zarr"), shape=(20, 9), chunks=(6, 4), dtype="<f8",
                           zarr_format=2, order="F", fill_value=0)
    v2[...] = data((20, 9), "f8")
    root = zarr.open_group(str(tmp_path / "group.zarr"), mode="w")
    root.create_array("a", shape=(10, 10), chunks=(3, 3), dtype="i4")[...] = data((10, 10), "i4")
    sub = root.create_group("sub")
    sub.create_array("b", shape=(7,), chunks=(2,), dtype="f4", shards=(4,))[...] = np.arange(7)
    v2_group = zarr.open_group(str(tmp_path / "v2group.zarr"), mode="w", zarr_format=2)
    v2_group.create_array("c", shape=(5, 5), chunks=(2, 2), dtype=">i2")[...] = data((5, 5), ">i2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(tmp_path / "v2group.zarr"), zarr_format=2)
    for name in ("plain", "sharded", "v2", "group", "v2group"):
        done = zarrfs("check", str(tmp_path / f"{name}.zarr"))
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        assert done.stdout == ""
    # A temporary file of a put in progress (its process is alive) is no problem.
    (tmp_path / "plain.zarr" / "c" / f".zarrfs-tmp-{1}-0123456789ab-0").write_bytes(b"x")
    assert check(tmp_path / "plain.zarr") == (0, {})


def test_check_of_nothing_zarr_is_an_error(tmp_path: Path) -> None:
    done = zarrfs("check", str(tmp_path))
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "no Zarr array or group" in done.stderr
    # A command, never the fstab form `zarrfs SOURCE MOUNTPOINT`.
    done = zarrfs("check", str(tmp_path), str(tmp_path))
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr


# -- check: damaged stores -------------------------------------------------------------------


def flip(path: Path, position: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[position] ^= 0x10
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("codecs", ["crc32c", "zstd-checksum"])
def test_check_finds_a_flipped_byte(codecs: str, tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    compressors = [Crc32cCodec()] if codecs == "crc32c" else [ZstdCodec(level=1, checksum=True)]
    v3_array(path, chunks=(8, 8), compressors=compressors)
    assert check(path) == (0, {})
    flip(path / "c" / "3" / "1", 20)
    status, problems = check(path)
    assert status == 1
    assert list(problems) == ["c/3/1"], problems


def test_check_finds_damaged_shards(tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    v3_array(path, chunks=(4, 4), shards=(16, 8))  # index: bytes + crc32c, at the end
    n_inner = 4 * 2
    # A truncated shard: its index is no longer where it should be.
    truncated = path / "c" / "1" / "0"
    truncated.write_bytes(truncated.read_bytes()[:-7])
    # A shard index whose entries overlap, with a valid checksum.
    overlapping = path / "c" / "1" / "1"
    shard = overlapping.read_bytes()
    index = np.frombuffer(shard[-(16 * n_inner + 4) : -4], dtype="<u8").reshape(n_inner, 2).copy()
    stored = index[:, 0] != np.uint64(2**64 - 1)
    first, second = np.flatnonzero(stored)[:2]
    index[second, 0] = index[first, 0] + np.uint64(1)
    new_index = index.tobytes()
    crc = numcodecs.CRC32C().encode(new_index)[-4:]
    overlapping.write_bytes(shard[: -(16 * n_inner + 4)] + new_index + bytes(crc))
    # A shard shorter than its index.
    (path / "c" / "2" / "0").write_bytes(b"tiny")
    status, problems = check(path)
    assert status == 1
    assert set(problems) == {"c/1/0", "c/1/1", "c/2/0"}, problems
    assert "overlap" in problems["c/1/1"]
    assert "shorter than its index" in problems["c/2/0"]


def test_check_finds_wrong_sizes_strays_and_bad_keys(tmp_path: Path) -> None:
    path = tmp_path / "array.zarr"
    v3_array(path, chunks=(8, 8), compressors=[ZstdCodec(level=1)])
    # A chunk that decodes to too few elements.
    (path / "c" / "2" / "2").write_bytes(numcodecs.Zstd(level=1).encode(np.ones(10, "<u2").tobytes()))
    # A chunk index outside the 5 x 4 grid, and a key that is no chunk key at all.
    shutil.copy(path / "c" / "4" / "3", path / "c" / "4" / "9")
    (path / "c" / "notes.txt").write_text("hello")
    # A temporary file left by a process that has died.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stray = f"c/3/.zarrfs-tmp-{dead}-0123456789ab-1"
    (path / stray).write_bytes(b"half a chunk")
    status, problems = check(path)
    assert status == 1
    assert set(problems) == {"c/2/2", "c/4/9", "c/notes.txt", stray}, problems
    assert "outside the chunk grid" in problems["c/4/9"]
    assert "temporary" in problems[stray]


@pytest.mark.fast
def test_check_finds_damage_inside_groups(tmp_path: Path) -> None:
    root = zarr.open_group(str(tmp_path / "group.zarr"), mode="w")
    root.create_array("good", shape=(6,), chunks=(2,), dtype="i4")[...] = np.arange(1, 7)
    sub = root.create_group("sub")
    bad = sub.create_array("bad", shape=(6,), chunks=(2,), dtype="i4", compressors=[Crc32cCodec()])
    bad[...] = np.arange(1, 7)
    broken = root.create_array("broken", shape=(6,), chunks=(2,), dtype="i4")
    broken[...] = np.arange(1, 7)
    meta_path = tmp_path / "group.zarr" / "broken" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["codecs"].append({"name": "no-such-codec"})
    meta_path.write_text(json.dumps(meta))
    flip(tmp_path / "group.zarr" / "sub" / "bad" / "c" / "1", 2)
    status, problems = check(tmp_path / "group.zarr")
    assert status == 1
    assert set(problems) == {"sub/bad/c/1", "broken/zarr.json"}, problems
    assert "no-such-codec" in problems["broken/zarr.json"]


# -- import ----------------------------------------------------------------------------------


def read_back(path: Path) -> tuple[np.ndarray, np.ndarray]:
    by_zarr = zarr.open_array(str(path), mode="r")[...]
    by_ts = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
    return np.asarray(by_zarr), by_ts.read().result()


CASES = [
    # order, endian, dtype, sharded, via stdin
    ("C", "little", "uint16", False, False),
    ("C", "big", "float32", False, True),
    ("F", "little", "int64", False, True),
    ("F", "big", "complex64", False, False),
    ("C", "little", "int32", True, True),
    ("C", "big", "uint16", True, False),
    ("F", "little", "float64", True, False),
    ("F", "big", "int16", True, True),
]


@pytest.mark.parametrize(("order", "endian", "dtype", "sharded", "stdin"), CASES)
def test_import_round_trips(order: str, endian: str, dtype: str, sharded: bool, stdin: bool,
                            tmp_path: Path) -> None:
    shape = (23, 17, 5)
    values = data(shape, dtype)
    raw = np.asarray(values, dtype=np.dtype(dtype).newbyteorder("<" if endian == "little" else ">"))
    raw_bytes = raw.tobytes(order=order)
    dest = tmp_path / "imported.zarr"
    options = ["--shape", "23,17,5", "--dtype", dtype, "--order", order, "--endian", endian]
    options += ["--chunks", "2,4,5", "--shards", "4,8,5"] if sharded else ["--chunks", "5,6,2"]
    if stdin:
        done = zarrfs("import", "-", str(dest), *options, stdin=raw_bytes)
    else:
        (tmp_path / "in.raw").write_bytes(raw_bytes)
        done = zarrfs("import", str(tmp_path / "in.raw"), str(dest), *options)
    assert done.returncode == 0, done.stderr
    by_zarr, by_ts = read_back(dest)
    np.testing.assert_array_equal(by_zarr, values)
    np.testing.assert_array_equal(by_ts, values)
    # The first third is fill value: chunks (shards) holding only that are not stored.
    keys = {p.relative_to(dest / "c").as_posix() for p in (dest / "c").rglob("*") if p.is_file()}
    stored = (4, 8, 5) if sharded else (5, 6, 2)
    grid = tuple(-(-n // c) for n, c in zip(shape, stored, strict=True))
    expected = {"/".join(map(str, cell)) for cell in np.ndindex(*grid)
                if values[tuple(slice(i * c, (i + 1) * c) for i, c in zip(cell, stored, strict=True))].any()}
    assert keys == expected
    assert len(expected) < np.prod(grid)
    assert zarrfs("check", str(dest)).returncode == 0


@pytest.mark.fast
def test_import_keeps_metadata_options(tmp_path: Path) -> None:
    values = np.arange(12, dtype="<f4").reshape(3, 4)
    (tmp_path / "in.raw").write_bytes(values.tobytes())
    dest = tmp_path / "a.zarr"
    done = zarrfs("import", str(tmp_path / "in.raw"), str(dest), "--shape", "3,4", "--dtype", "float32",
                  "--chunks", "2,2", "--codec", "gzip:1", "--fill-value", "5", "--dimension-names", "y,x",
                  "--key-separator", ".")
    assert done.returncode == 0, done.stderr
    array = zarr.open_array(str(dest), mode="r")
    np.testing.assert_array_equal(array[...], values)
    assert array.metadata.dimension_names == ("y", "x")  # type: ignore[union-attr]
    assert array.fill_value == 5
    assert (dest / "c.1.1").exists()


@pytest.mark.parametrize(("stdin", "size"), [(False, 599), (False, 601), (True, 599), (True, 601),
                                             (True, 0)])
def test_import_refuses_raw_of_the_wrong_size(stdin: bool, size: int, tmp_path: Path) -> None:
    raw = np.arange(size, dtype="u1").tobytes()  # 20 x 30 uint8 needs 600 bytes
    dest = tmp_path / "a.zarr"
    options = ["--shape", "20,30", "--dtype", "uint8", "--chunks", "4,4"]
    if stdin:
        done = zarrfs("import", "-", str(dest), *options, stdin=raw)
    else:
        (tmp_path / "in.raw").write_bytes(raw)
        done = zarrfs("import", str(tmp_path / "in.raw"), str(dest), *options)
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "600" in done.stderr, done.stderr
    assert not dest.exists()


def test_import_into_an_existing_array_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in.raw").write_bytes(bytes(8))
    dest = tmp_path / "a.zarr"
    options = ["--shape", "8", "--dtype", "uint8", "--chunks", "4"]
    assert zarrfs("import", str(tmp_path / "in.raw"), str(dest), *options).returncode == 0
    done = zarrfs("import", str(tmp_path / "in.raw"), str(dest), *options)
    assert done.returncode == 1 and "already holds" in done.stderr
    assert zarrfs("import", str(tmp_path / "in.raw")).returncode == 2  # usage: no DEST


def test_import_of_a_scalar_and_into_an_empty_directory(tmp_path: Path) -> None:
    dest = tmp_path / "scalar.zarr"
    done = zarrfs("import", "-", str(dest), "--shape", "", "--dtype", "float32", "--chunks", "",
                  "--endian", "big", stdin=np.array(2.5, ">f4").tobytes())
    assert done.returncode == 0, done.stderr
    by_zarr, by_ts = read_back(dest)
    assert by_zarr == 2.5 and by_ts == 2.5
    # A failed import into a directory that was there before leaves it there, and empty.
    empty = tmp_path / "empty"
    empty.mkdir()
    done = zarrfs("import", "-", str(empty), "--shape", "100,100", "--dtype", "uint8", "--chunks", "5,5",
                  stdin=bytes(range(1, 256)) * 20)
    assert done.returncode == 1 and "5100 bytes" in done.stderr, done.stderr
    assert list(empty.iterdir()) == []
