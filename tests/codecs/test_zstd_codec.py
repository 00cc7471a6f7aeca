"""The zstd codec (zarrfs.codecs.zstd): frames numcodecs writes and reads, the frames it leaves
to numcodecs' decoder, what it refuses, which arrays use it, and compressors kept for reuse."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numcodecs
import numpy as np
import pytest
import zstandard

from zarrfs.codecs import ChunkSpec, CodecError, Pipeline, zstd
from zarrfs.codecs.zstd import ZstdCodec
from zarrfs.formats import v2, v3

pytestmark = pytest.mark.fast

CHUNK = (np.arange(4096, dtype="<u4") % 977).tobytes()
LIMIT = 1 << 20


@pytest.mark.parametrize(("level", "checksum"), [(1, False), (3, True), (-5, False), (0, True)])
def test_frames_are_what_numcodecs_writes_and_reads(level: int, checksum: bool) -> None:
    codec = ZstdCodec(level, checksum)
    ours = bytes(codec.encode(CHUNK))
    header = zstandard.get_frame_parameters(ours)
    assert header.content_size == len(CHUNK)
    assert header.has_checksum == checksum
    numcodecs_zstd = numcodecs.Zstd(level=level, checksum=checksum)
    assert bytes(numcodecs_zstd.decode(ours)) == CHUNK
    assert bytes(codec.decode(numcodecs_zstd.encode(CHUNK), len(CHUNK), LIMIT)) == CHUNK


def test_a_frame_without_its_size_and_several_frames_are_decoded() -> None:
    streaming = zstandard.ZstdCompressor(level=1).compressobj()
    unsized = streaming.compress(CHUNK) + streaming.flush()
    assert zstandard.get_frame_parameters(unsized).content_size == zstandard.CONTENTSIZE_UNKNOWN
    half = len(CHUNK) // 2
    compressor = zstandard.ZstdCompressor()
    two = compressor.compress(CHUNK[:half]) + compressor.compress(CHUNK[half:])
    codec = ZstdCodec(1, False)
    assert bytes(codec.decode(unsized, len(CHUNK), LIMIT)) == CHUNK
    assert bytes(codec.decode(two, None, LIMIT)) == CHUNK


def _flipped(frame: bytes, at: int) -> bytes:
    damaged = bytearray(frame)
    damaged[at] ^= 0xFF
    return bytes(damaged)


FRAME = bytes(ZstdCodec(1, True).encode(CHUNK))


@pytest.mark.parametrize(("data", "exact_size", "limit"), [
    pytest.param(_flipped(FRAME, len(FRAME) // 2), len(CHUNK), LIMIT, id="damaged"),
    pytest.param(_flipped(FRAME, len(FRAME) - 1), len(CHUNK), LIMIT, id="damaged-checksum"),
    pytest.param(FRAME[:-7], len(CHUNK), LIMIT, id="truncated"),
    pytest.param(b"\x00" * 64, len(CHUNK), LIMIT, id="not-zstd"),
    pytest.param(FRAME + b"\x00" * 8, len(CHUNK), LIMIT, id="trailing-bytes"),
    pytest.param(FRAME, len(CHUNK) + 4, LIMIT, id="declares-another-size"),
    pytest.param(FRAME, None, len(CHUNK) - 1, id="over-the-limit"),
])
def test_what_is_not_the_chunk_is_refused(data: bytes, exact_size: int | None, limit: int) -> None:
    with pytest.raises(CodecError):
        ZstdCodec(1, True).decode(data, exact_size, limit)


def _bytes_codecs(description: Any) -> tuple[Any, ...]:
    chunk = ChunkSpec(description.chunk_shape, description.data_type, description.fill_value)
    return Pipeline.build(description.codecs, chunk).bytes_codecs


def test_every_way_an_array_names_zstd_gets_this_codec() -> None:
    v3_doc: dict[str, Any] = {
        "zarr_format": 3, "node_type": "array", "shape": [8], "data_type": "uint16", "fill_value": 0,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
        "chunk_key_encoding": {"name": "default"},
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                   {"name": "zstd", "configuration": {"level": 5, "checksum": True}}],
    }
    numcodecs_zstd = {"name": "numcodecs.zstd", "configuration": {"level": 2}}
    numcodecs_doc = {**v3_doc, "codecs": [v3_doc["codecs"][0], numcodecs_zstd]}
    v2_doc = {"zarr_format": 2, "shape": [8], "chunks": [8], "dtype": "<u2", "fill_value": 0, "order": "C",
              "filters": None, "compressor": {"id": "zstd", "level": 4}}
    found = [_bytes_codecs(v3.metadata_from_json(v3_doc)),
             _bytes_codecs(v3.metadata_from_json(numcodecs_doc)),
             _bytes_codecs(v2.metadata_from_json(v2_doc, {}))]
    assert [(type(c), c.level, c.checksum) for (c,) in found] == [
        (ZstdCodec, 5, True), (ZstdCodec, 2, False), (ZstdCodec, 4, False)]


REAL_COMPRESSOR = zstandard.ZstdCompressor
# Options no other test encodes with, so the codec has kept no compressor for them yet
# whichever tests ran before in this process.
UNUSED_LEVEL, UNUSED_CHECKSUM = 11, True


class Gate:
    """Holds every encoder inside `compress` until `together` of them are there."""

    def __init__(self) -> None:
        self.together = threading.Barrier(1)


class HeldCompressor:
    def __init__(self, gate: Gate, **options: Any) -> None:
        self.real = REAL_COMPRESSOR(**options)
        self.gate = gate

    def compress(self, data: Any) -> bytes:
        self.gate.together.wait(timeout=10)
        return self.real.compress(data)

    def memory_size(self) -> int:
        return int(self.real.memory_size())


def _encode_at_once(codec: ZstdCodec, gate: Gate, encoders: int) -> None:
    """`encoders` threads encode a chunk each, all inside the compressor at the same time."""
    gate.together = threading.Barrier(encoders)

    def encode_and_check(_: int) -> None:
        assert bytes(numcodecs.Zstd().decode(codec.encode(CHUNK))) == CHUNK

    with ThreadPoolExecutor(encoders) as threads:
        list(threads.map(encode_and_check, range(encoders)))


def test_compressors_are_kept_for_the_next_chunk_as_many_as_encode_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate()
    made: list[HeldCompressor] = []

    def make(**options: Any) -> HeldCompressor:
        made.append(HeldCompressor(gate, **options))
        return made[-1]

    monkeypatch.setattr(zstandard, "ZstdCompressor", make)
    codec = ZstdCodec(UNUSED_LEVEL, UNUSED_CHECKSUM)
    for _ in range(10):
        _encode_at_once(codec, gate, 1)
    assert len(made) == 1
    _encode_at_once(codec, gate, 4)
    assert len(made) == 4  # the one kept, and three more for the encoders inside at once
    for encoders in [1, 4, 2, 4, 1, 3]:
        _encode_at_once(codec, gate, encoders)
    assert len(made) == 4


def test_idle_compressors_are_kept_within_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past IDLE_BYTES of them idle, a compressor is let go once it has encoded (one is always
    kept): a dozen write-back encoders of 512 KiB chunks kept 16 MiB (issue 95)."""
    gate = Gate()
    made: list[HeldCompressor] = []

    def make(**options: Any) -> HeldCompressor:
        made.append(HeldCompressor(gate, **options))
        return made[-1]

    monkeypatch.setattr(zstandard, "ZstdCompressor", make)
    monkeypatch.setattr(zstd, "IDLE_BYTES", 1)
    codec = ZstdCodec(UNUSED_LEVEL + 1, UNUSED_CHECKSUM)  # (options of its own: a pool of its own)
    _encode_at_once(codec, gate, 4)
    _encode_at_once(codec, gate, 4)
    assert len(made) == 4 + 3  # the one kept, and three more again
