"""Replay every committed input of every fuzz target (seeds, what fuzzing found, and the
inputs of past findings, crash-*) through its harness: each must parse/decode or raise one of
zarrfs's own errors (tests/fuzz/common.py), so a fixed finding stays fixed. scripts/fuzz grows
the corpus; tests/reliability/test_fuzz_*.py check, with hypothesis, the values of what parses."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from zarrfs.store import Store

from .common import CORPUS, TARGETS, corpus_files, harness_module, split
from .nodes import explore, store_of

pytestmark = pytest.mark.fast

CASES = [(target, path) for target in TARGETS for path in corpus_files(target)]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_has_a_corpus(target: str) -> None:
    seeds = [p for p in corpus_files(target) if p.name.startswith("seed-")]
    assert seeds, f"tests/fuzz/corpus/{target} has no seeds (python -m fuzz.make_seeds)"


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_replay(target: str, path: object) -> None:
    harness = importlib.import_module(harness_module(target))
    harness.fuzz_one(path.read_bytes())  # type: ignore[attr-defined]


# The positive controls: what zarr-python and TensorStore wrote must open and decode (a
# harness that refused everything would pass the replay above).
WRITTEN = ("seed-zp", "seed-ts-")


@pytest.mark.parametrize("target", ["metadata", "consolidated"])
def test_written_documents_open(target: str) -> None:
    written = [p for p in corpus_files(target) if p.name.startswith(WRITTEN)]
    assert written
    harness = importlib.import_module(harness_module(target))
    for path in written:
        names, payload = split(path.read_bytes(), harness.CASES)
        # Each way of discovery finds the node; consolidated metadata, its 3 descendants too.
        opened = explore(store_of(names, payload))
        assert opened >= (4 if target == "consolidated" else 2), (path.name, opened)


def test_chunks_and_shards_decode() -> None:
    from . import fuzz_codecs, fuzz_shard

    for name, pipeline in fuzz_codecs.PIPELINES.items():
        _, stored = split((CORPUS / "codecs" / f"seed-{name.replace('.', '_')}").read_bytes(),
                          fuzz_codecs.NAMES)
        assert np.array_equal(pipeline.decode(stored), fuzz_codecs.sample(name)), name
    for name, codec in fuzz_shard.CODECS.items():
        _, shard = split((CORPUS / "shard" / f"seed-{name}").read_bytes(), fuzz_shard.NAMES)
        assert np.array_equal(codec.decode(shard), fuzz_shard.sample(name)), name
    _, shard = split((CORPUS / "shard" / "seed-tensorstore").read_bytes(), fuzz_shard.NAMES)
    expected = np.arange(60).reshape(6, 10)[:4, :6].astype("u2")
    assert np.array_equal(fuzz_shard.CODECS["end-crc"].decode(shard), expected)


def test_zip_seeds_open() -> None:
    from . import fuzz_zip

    seeds = [p for p in corpus_files("zip") if p.name.startswith("seed-")]
    assert len(seeds) == 4
    for path in seeds:
        fuzz_zip.ARCHIVE.write_bytes(path.read_bytes())
        store = Store.open(str(fuzz_zip.ARCHIVE))
        files = {key: store.get(key) or b"" for key in store.list()}
        assert len(files) > 5 and explore(files) >= 2, path.name  # (the root, each way it is found)
