"""Property-based fuzzing of codec chains (zstd, gzip, crc32c, sharding) given mutated chunks:
CodecError or a chunk of the right shape, never anything else; behind a checksum, never wrong
values. Positive controls: each chain decodes its own chunk and accepts harmless changes.

blosc is left out on purpose: a mutated blosc header can crash the process (see the corpus
case chunks/blosc_cbytes_beyond_buffer), which would take the test run down with it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.fuzz_documents import BYTES, FUZZ
from zarrfs.codecs import ChunkSpec, CodecError, Pipeline
from zarrfs.formats.dtypes import DATA_TYPES
from zarrfs.formats.v3 import parse_codec_list

# -- codec chains given mutated chunks --------------------------------------------------------

CHAINS = {
    "zstd": [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
    "zstd+checksum": [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": True}}],
    "gzip": [BYTES, {"name": "gzip", "configuration": {"level": 6}}],
    "crc32c": [BYTES, {"name": "crc32c"}],
    "crc32c+zstd": [BYTES, {"name": "crc32c"}, {"name": "zstd", "configuration": {"level": 1}}],
    "sharding": [
        {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": [4, 4],
                "codecs": [BYTES, {"name": "gzip", "configuration": {"level": 1}}],
                "index_codecs": [BYTES, {"name": "crc32c"}],
            },
        }
    ],
}


# Chains where every stored byte that matters is under a checksum (gzip's CRC-32 of the data,
# crc32c, zstd's content checksum; the shard's index under crc32c, its chunks gzip): a
# mutated chunk they accept must decode to the original values.
CHECKSUMMED = {"zstd+checksum", "gzip", "crc32c", "crc32c+zstd", "sharding"}
ORIGINAL = np.arange(64, dtype=np.int32).reshape(8, 8) % 7


def chain(name: str) -> tuple[Pipeline, bytes]:
    spec = ChunkSpec((8, 8), DATA_TYPES["int32"], b"\0" * 4)
    pipeline = Pipeline.build(parse_codec_list(CHAINS[name], "codecs"), spec)
    good = bytes(pipeline.encode(ORIGINAL))
    return pipeline, good


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_codec_chain_decodes_its_own_chunk(name: str) -> None:
    """The positive control of the mutation test: the chunk unmutated decodes, exactly."""
    pipeline, good = chain(name)
    chunk = pipeline.decode(good)
    assert chunk.dtype == np.int32 and np.array_equal(chunk, ORIGINAL)


def _gzip_header_changed(good: bytes) -> bytes:
    # The header's MTIME (bytes 4-7), XFL (8) and OS (9) bytes are not under the CRC.
    assert good[:3] == b"\x1f\x8b\x08", good[:10]
    return good[:4] + b"\x12\x34\x56\x78\x02\x03" + good[10:]


def _shard_padded(good: bytes) -> bytes:
    # Inner chunks are found through the index, so bytes between them and the index (at the
    # end) are unused space, which a shard may have.
    index_nbytes = 16 * 4 + 4  # 2 x 2 inner chunks, offset and size each, then crc32c
    return good[:-index_nbytes] + b"\0" * 13 + good[-index_nbytes:]


HARMLESS_CHUNK_CHANGES = {
    "gzip": _gzip_header_changed,
    "sharding": _shard_padded,
}


@pytest.mark.parametrize("name", sorted(HARMLESS_CHUNK_CHANGES))
def test_codec_chain_accepts_harmless_changes(name: str) -> None:
    pipeline, good = chain(name)
    changed = HARMLESS_CHUNK_CHANGES[name](good)
    assert changed != good
    chunk = pipeline.decode(changed)
    assert chunk.dtype == np.int32 and np.array_equal(chunk, ORIGINAL)


@pytest.mark.parametrize("name", sorted(CHAINS))
@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_codec_chain_mutated_chunks(name: str, data: st.DataObject) -> None:
    pipeline, good = chain(name)
    buffer = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        if not buffer:
            break
        position = data.draw(st.integers(0, len(buffer) - 1), label="position")
        kind = data.draw(st.sampled_from(["set", "cut", "insert"]), label="kind")
        if kind == "set":
            buffer[position] = data.draw(st.integers(0, 255), label="byte")
        elif kind == "cut":
            del buffer[position:]
        else:
            buffer[position:position] = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
    try:
        chunk = pipeline.decode(bytes(buffer))
    except CodecError:
        # (A mutation may leave the bytes as they were: that chunk must still decode.)
        assert bytes(buffer) != good, "refused the unchanged chunk"
        return
    assert chunk.shape == (8, 8) and chunk.dtype == np.int32
    if name in CHECKSUMMED or bytes(buffer) == good:
        assert np.array_equal(chunk, ORIGINAL), "accepted a corrupt chunk, with wrong values"
