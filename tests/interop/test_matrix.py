"""The interop matrix: every case of `interop_cases.CASES` written by TensorStore and by
zarr-python is read by zarrfs, and written by zarrfs is read by TensorStore and zarr-python,
all compared bit for bit with the model (and with what the other readers see)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.interop_cases import CASES
from tests.helpers.interop_docs import chunk_key, is_default_dot
from tests.helpers.interop_io import (
    read_tensorstore,
    read_zarr_python,
    sub_boxes,
    write_tensorstore,
    write_zarr_python,
    write_zarrfs,
)
from tests.helpers.interop_model import EMPTY, Case, expected_keys, model, shard_index, stored_keys
from tests.helpers.interop_values import STORAGE, assert_same_bits, bits, element
from zarrfs.array_metadata import open_array
from zarrfs.formats.v3 import metadata_from_json, parse_metadata
from zarrfs.grid import Box
from zarrfs.store import Store

FOREIGN_WRITERS = {"tensorstore": write_tensorstore, "zarr-python": write_zarr_python}
FOREIGN_READERS = {"tensorstore": read_tensorstore, "zarr-python": read_zarr_python}


def _supports(case: Case, implementation: str) -> bool:
    return case.tensorstore if implementation == "tensorstore" else case.zarr_python


def _marks(case: Case) -> list[Any]:
    return []


def _foreign_params() -> Iterator[Any]:
    for case in CASES:
        for writer in FOREIGN_WRITERS:
            if _supports(case, writer):
                yield pytest.param(writer, case, id=f"{writer}-{case.id}", marks=_marks(case))


def _seed(case: Case) -> int:
    return zlib.crc32(case.id.encode()) + 1


@pytest.mark.parametrize(("writer", "case"), list(_foreign_params()))
def test_zarrfs_reads_foreign_array(writer: str, case: Case, scratch: Path) -> None:
    path = str(scratch / "array")
    data = model(case)
    FOREIGN_WRITERS[writer](path, case.doc, data)

    # What the writer wrote, as it reads it back itself.
    written, writer_fill = FOREIGN_READERS[writer](path)
    assert_same_bits(writer_fill, case.fill, f"{writer}'s fill value")
    if writer == "tensorstore" or case.lookalike is None:
        # (zarr-python drops chunks that merely compare equal to the fill value.)
        assert_same_bits(written, data, f"{writer} reading its own array")
    if writer == "tensorstore":
        assert stored_keys(path) == expected_keys(case, data), "the case's holes are not holes"

    array = open_array(Store.open(path, read_only=True), threads=2, cache_bytes=1 << 12)
    try:
        assert array.metadata.fill_value == bits(case.fill).tobytes()
        assert array.shape == case.shape
        whole = Box((0,) * len(case.shape), case.shape)
        assert_same_bits(array.read(whole), written, "zarrfs reading the whole array")
        for box in sub_boxes(case.shape, np.random.default_rng(_seed(case)), 6):
            assert_same_bits(array.read(box), written[box.slices()], f"zarrfs reading {box}")
        for other, read in FOREIGN_READERS.items():
            if other != writer and _supports(case, other):
                seen, _ = read(path)
                assert_same_bits(array.read(whole), seen, f"zarrfs vs {other}")
        assert array.stored_chunk_count() == len(stored_keys(path))
    finally:
        array.close()


@pytest.mark.parametrize("case", [c for c in CASES if is_default_dot(c.doc) and c.shape],
                         ids=lambda c: c.id)
def test_zarrfs_counts_dot_separated_keys(case: Case, scratch: Path) -> None:
    path = str(scratch / "array")
    write_tensorstore(path, case.doc, model(case))
    array = open_array(Store.open(path, read_only=True), threads=1)
    try:
        assert array.stored_chunk_count() == len(stored_keys(path)) > 0
    finally:
        array.close()


def _check_shards(case: Case, path: str, data: np.ndarray) -> None:
    """Each stored shard's index marks exactly the all-fill inner chunks empty."""
    config = case.shard_config
    if config is None:
        return
    fill = bits(case.fill)
    inner_shape = config["chunk_shape"]
    for index in case.grid(case.chunk_shape):
        key = chunk_key(case.doc, index)
        try:
            with open(f"{path}/{key}", "rb") as f:
                shard = f.read()
        except FileNotFoundError:
            continue
        entries = shard_index(case, shard)
        for inner in np.ndindex(*entries.shape[:-1]):
            start = [
                i * s + j * c
                for i, s, j, c in zip(index, case.chunk_shape, inner, inner_shape, strict=True)
            ]
            region = data[tuple(slice(a, a + c) for a, c in zip(start, inner_shape, strict=True))]
            all_fill = region.size == 0 or bool((bits(region).reshape(-1, fill.size) == fill).all())
            empty = int(entries[inner][0]) == EMPTY
            assert empty == all_fill, f"shard {key!r} inner chunk {inner}: empty={empty}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CASES])
def test_foreign_readers_read_zarrfs_array(case: Case, scratch: Path) -> None:
    path = str(scratch / "array")
    data = model(case)
    write_zarrfs(path, case.doc, data, seed=_seed(case))

    assert stored_keys(path) == expected_keys(case, data)
    _check_shards(case, path, data)
    with open(f"{path}/zarr.json", "rb") as f:
        reparsed = parse_metadata(f.read())
    assert reparsed == metadata_from_json(case.doc)
    assert_same_bits(element(reparsed.to_json()["fill_value"], case.data_type), case.fill,
                     "fill value after a JSON round trip")

    assert_same_bits(np.asarray(_read_back(path)), data, "zarrfs reading its own array")
    for reader, read in FOREIGN_READERS.items():
        if _supports(case, reader):
            seen, fill = read(path)
            assert_same_bits(seen, data, f"{reader} reading the zarrfs array")
            assert_same_bits(fill, case.fill, f"{reader}'s view of the fill value")


def _read_back(path: str) -> np.ndarray:
    array = open_array(Store.open(path), threads=2)
    try:
        return np.array(array.read(Box((0,) * len(array.shape), array.shape)))
    finally:
        array.close()


def test_matrix_covers_the_brief() -> None:
    """Guard against the matrix silently shrinking."""
    ids = " ".join(c.id for c in CASES)
    names = {spec["name"] for c in CASES for spec in _all_codecs(c.doc["codecs"])}
    assert names == {"bytes", "transpose", "gzip", "blosc", "zstd", "crc32c", "sharding_indexed"}
    assert {c.data_type for c in CASES} == set(STORAGE)
    for needle in ("key-default-slash", "key-default-dot", "key-v2-dot", "key-v2-slash",
                   "index-start", "index-end", "nested", "rank0", "rank4", "nan-payload",
                   "zero-size", "big-endian"):
        assert needle in ids
    assert len({c.id for c in CASES}) == len(CASES) > 100


def _all_codecs(codecs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for spec in codecs:
        yield spec
        if spec["name"] == "sharding_indexed":
            yield from _all_codecs(spec["configuration"]["codecs"])
            yield from _all_codecs(spec["configuration"]["index_codecs"])
