"""Compare-and-swap in the store and in the engine, without FUSE.

Store level, for a local directory and for S3 (a moto server on 127.0.0.1): a put or delete
that expects a generation (or absence, `expect=None`) that no longer holds raises
ConflictError and changes nothing; one whose expectation holds succeeds, and the generation a
put returns is the one `generation()` and `read()` report afterwards. A local compare-and-swap
leaves nothing beside the keys (no lock files, no temporaries).

Engine level: two `ZarrArray`s opened on the same local store, each with its own cache, write
different elements of one chunk (plain array), and different inner chunks and different
elements of one inner chunk (sharded array), and write back alternately for 50 rounds, each
holding a stale copy of what the other wrote. A third array opened afterwards sees every
element's last write. The plain case counts its conflicts (each write-back finds the chunk
replaced by the other array); the sharded case makes some deterministically by having the
other array write the shard back between a write-back's read of the shard and its put.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zarrfs.array import ZarrArray
from zarrfs.array_metadata import open_array
from zarrfs.errors import ConflictError
from zarrfs.grid import Box
from zarrfs.store import Store

zarr = pytest.importorskip("zarr")

ROUNDS = 50


# -- stores ------------------------------------------------------------------------------------


@pytest.fixture
def s3_store() -> Iterator[Store]:
    """A Store on a fresh moto S3 server (the reliability suite's server, started here)."""
    pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    from tests.helpers.s3_server import S3_ENV, S3Server, free_port, running

    with pytest.MonkeyPatch.context() as patch:
        for name, value in S3_ENV.items():
            patch.setenv(name, value)
        with running(S3Server(free_port())) as server:
            fs = s3fs.S3FileSystem(**server.s3fs_options())
            yield Store(fs, f"{server.bucket}/cas")


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return Store.open(str(tmp_path / "store"))
    return request.getfixturevalue("s3_store")  # type: ignore[no-any-return]


def files_in(store: Store) -> list[str]:
    """Every file below a local store's root, hidden ones included."""
    return sorted(str(p.relative_to(store.root)) for p in Path(store.root).rglob("*") if p.is_file())


@pytest.mark.fast
def test_conditional_put(store: Store) -> None:
    assert store.capabilities.conditional
    first = store.put("c/0/0", b"first", expect=None)  # create if absent
    assert first is not None
    assert first == store.generation("c/0/0")
    found = store.read("c/0/0")
    assert found is not None and found == (b"first", first)

    with pytest.raises(ConflictError):  # it exists now
        store.put("c/0/0", b"created twice", expect=None)
    assert store.read("c/0/0") == (b"first", first)

    second = store.put("c/0/0", b"second", expect=first)  # the current generation: succeeds
    assert second is not None and second != first
    assert second == store.generation("c/0/0")
    assert store.read("c/0/0") == (b"second", second)

    with pytest.raises(ConflictError):  # a stale generation
        store.put("c/0/0", b"lost update", expect=first)
    assert store.read("c/0/0") == (b"second", second)
    assert store.get("c/0/0") == b"second"

    third = store.put("c/0/0", b"third!", expect=second)
    assert third == store.generation("c/0/0") and third not in (first, second)
    assert store.read("c/0/0") == (b"third!", third)

    if store.capabilities.local_files:
        assert files_in(store) == ["c/0/0"]  # no lock files, no temporaries


def test_put_expecting_an_object_that_was_deleted_conflicts(store: Store) -> None:
    """The object read was deleted since (another writer stored the fill value there): a put
    that expects it must raise ConflictError, so that the write-back merges and retries."""
    generation = store.put("c/0/1", b"read by both", expect=None)
    store.delete("c/0/1", expect=generation)  # the other writer
    with pytest.raises(ConflictError):
        store.put("c/0/1", b"lost update?", expect=generation)
    assert store.read("c/0/1") is None and store.generation("c/0/1") is None
    with pytest.raises(ConflictError):  # never stored at all
        store.put("c/9/9", b"x", expect=generation)


@pytest.mark.fast
def test_conditional_delete(store: Store) -> None:
    first = store.put("k", b"one", expect=None)
    second = store.put("k", b"two", expect=first)
    assert second is not None

    with pytest.raises(ConflictError):  # stale
        store.delete("k", expect=first)
    assert store.read("k") == (b"two", second)
    with pytest.raises(ConflictError):  # expects absence, but it is there
        store.delete("k", expect=None)
    assert store.read("k") == (b"two", second)

    store.delete("k", expect=second)
    assert store.read("k") is None and store.generation("k") is None
    with pytest.raises(ConflictError):  # already gone: not the generation expected
        store.delete("k", expect=second)
    store.delete("k", expect=None)  # absent, as expected: nothing to do

    # Created again after the delete: a new generation that CAS can name.
    third = store.put("k", b"three", expect=None)
    assert third == store.generation("k")
    assert store.read("k") == (b"three", third)
    if store.capabilities.local_files:
        assert files_in(store) == ["k"]


def test_read_reports_the_generation_of_the_bytes_it_read(store: Store) -> None:
    generations = []
    for i in range(5):
        data = bytes([i]) * (10 + i % 2)  # sizes repeat: the generation still changes
        expect = generations[-1] if generations else None
        generations.append(store.put("x/y", data, expect=expect))
        found = store.read("x/y")
        assert found is not None
        assert found.data == data
        assert found.generation == store.generation("x/y") == generations[-1]
    assert len(set(generations)) == len(generations)


@pytest.mark.fast
def test_local_cas_leaves_no_files_behind(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "store"))
    generation = None
    for i in range(20):
        generation = store.put("c/1/2", f"value {i}".encode(), expect=generation)
        with pytest.raises(ConflictError):
            store.put("c/1/2", b"stale", expect=None)
        with pytest.raises(ConflictError):
            store.delete("c/1/2", expect="0-0-0")
    assert files_in(store) == ["c/1/2"]
    assert not [name for name in os.listdir(tmp_path / "store" / "c" / "1") if name != "2"]
    store.delete("c/1/2", expect=generation)
    assert files_in(store) == []


# -- two engines on one store ------------------------------------------------------------------


def create(path: Path, sharded: bool) -> None:
    """A 16 x 16 int32 Zarr v3 array: 8 x 8 chunks, or one 16 x 16 shard of 8 x 8 inner chunks."""
    zarr.create_array(str(path), shape=(16, 16), chunks=(8, 8), shards=(16, 16) if sharded else None,
                      dtype="<i4", fill_value=-1, compressors=zarr.codecs.ZstdCodec(level=1))


def open_engine(path: Path) -> ZarrArray:
    return open_array(Store.open(str(path)), cache_bytes=8 << 20, threads=2)


def write(array: ZarrArray, expected: np.ndarray, where: tuple[int, int], value: int) -> None:
    box = Box(where, (where[0] + 1, where[1] + 1))
    array.write(box, np.array([[value]], dtype="<i4"))
    expected[where] = value


def conflicts(array: ZarrArray) -> int:
    return int(array.shared.counters.snapshot()["write_conflicts"])


def run_rounds(path: Path, writes: dict[str, Callable[[int], list[tuple[int, int]]]],
               between: Callable[[int, ZarrArray, ZarrArray], None] | None = None) -> dict[str, Any]:
    """ROUNDS rounds in which array A and then array B read (so each caches a copy the other
    then makes stale), write the elements `writes[name](round)` and write back."""
    a, b = open_engine(path), open_engine(path)
    expected = np.full((16, 16), -1, "<i4")
    try:
        for r in range(ROUNDS):
            for array in (a, b):
                array.read(Box((0, 0), (16, 16)))  # caches (stale after the other's write-back)
            for name, array in (("a", a), ("b", b)):
                for n, where in enumerate(writes[name](r)):
                    write(array, expected, where, (1 if name == "a" else 2) * 1_000_000 + r * 100 + n)
            if between is not None:
                between(r, a, b)
            a.flush()  # a no-op when `between` had it write back already
            b.flush()
        figures = {"rounds": ROUNDS, "conflicts_a": conflicts(a), "conflicts_b": conflicts(b)}
    finally:
        a.close()
        b.close()
    reader = open_engine(path)
    try:
        seen = np.array(reader.read(Box((0, 0), (16, 16))))
    finally:
        reader.close()
    figures["lost"] = int(np.count_nonzero(seen != expected))
    assert np.array_equal(np.asarray(zarr.open_array(str(path), mode="r")[...]), expected)
    return figures


def test_two_engines_write_different_elements_of_one_chunk(tmp_path: Path) -> None:
    path = tmp_path / "plain.zarr"
    create(path, sharded=False)
    figures = run_rounds(path, {
        # Both in chunk (0, 0): A in rows 0-3, B in rows 4-7; each element is written again
        # every 8 rounds.
        "a": lambda r: [(r % 4, r % 8), ((r + 1) % 4, (r * 3) % 8)],
        "b": lambda r: [(4 + r % 4, (r + 5) % 8), (4 + (r + 2) % 4, (r * 5) % 8)],
    })
    print(f"\nplain chunk, two engines: {figures}")
    assert figures["lost"] == 0, figures
    # Every write-back but the very first finds the chunk replaced by the other engine.
    assert figures["conflicts_a"] + figures["conflicts_b"] > 0, figures
    assert figures["conflicts_b"] >= ROUNDS - 1, figures


def test_two_engines_write_one_shard(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    create(path, sharded=True)
    squeezed = 0

    def a_writes_inside_b_write_back(r: int, a: ZarrArray, b: ZarrArray) -> None:
        """On odd rounds B writes back first, and A writes the shard back after B's
        write-back read it and before B's put: B's put must fail, and B must merge and retry."""
        nonlocal squeezed
        if r % 2 == 0:
            return
        original = b.io.stored_for_write

        def read_then_let_a_write(*args: Any) -> Any:
            nonlocal squeezed
            stored = original(*args)
            if "stored_for_write" in vars(b.io):  # only the first read of this write-back
                del b.io.stored_for_write
                a.flush()
                squeezed += 1
            return stored

        b.io.stored_for_write = read_then_let_a_write  # type: ignore[method-assign]
        b.flush()

    figures = run_rounds(path, {
        # Inner chunk (0, 0): A in rows 0-3, B in rows 4-7. Inner chunk (0, 1): only A.
        # Inner chunk (1, 0): only B. Inner chunk (1, 1): nobody (stays fill).
        "a": lambda r: [(r % 4, r % 8), (r % 8, 8 + (r * 3) % 8)],
        "b": lambda r: [(4 + r % 4, (r + 5) % 8), (8 + (r * 5) % 8, r % 8)],
    }, between=a_writes_inside_b_write_back)
    figures["puts_squeezed_between_read_and_put"] = squeezed
    print(f"\nsharded, two engines: {figures}")
    assert figures["lost"] == 0, figures
    assert squeezed == ROUNDS // 2
    assert figures["conflicts_b"] >= squeezed, figures


PLAIN_V3 = {
    "zarr_format": 3, "node_type": "array", "shape": [16, 16], "data_type": "int32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": -1, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "attributes": {},
}


def test_write_back_over_a_chunk_the_other_engine_deleted(store: Store) -> None:
    """Both engines cache chunk (0, 0); A sets all of it to the fill value (its write-back
    deletes the chunk); then B writes one element. B's write-back must find the chunk gone,
    merge and store it (fill and B's element), not fail."""
    store.put("zarr.json", json.dumps(PLAIN_V3).encode())
    store.put("c/0/0", np.arange(64, dtype="<i4").tobytes())
    a = open_array(store, cache_bytes=1 << 20, threads=2)
    b = open_array(store, cache_bytes=1 << 20, threads=2)
    try:
        whole = Box((0, 0), (8, 8))
        assert np.array_equal(a.read(whole), np.arange(64).reshape(8, 8))
        assert np.array_equal(b.read(whole), np.arange(64).reshape(8, 8))
        a.write(whole, np.full((8, 8), -1, "<i4"))
        a.flush()
        assert store.get("c/0/0") is None  # all fill: deleted
        b.write(Box((3, 3), (4, 4)), np.array([[77]], "<i4"))
        b.flush()
        assert conflicts(b) >= 1
    finally:
        a.close()
        b.close()
    expected = np.full((8, 8), -1, "<i4")
    expected[3, 3] = 77
    stored = store.get("c/0/0")
    assert stored is not None and np.array_equal(np.frombuffer(stored, "<i4").reshape(8, 8), expected)
