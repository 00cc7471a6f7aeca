"""The corpus's chunk cases (make_corpus.py): a valid zarr.json and its chunks, all good but the
bad keys, encoded with numcodecs, zlib and crc32c directly (not with zarrfs)."""

from __future__ import annotations

import gzip
import math
import struct
from collections.abc import Callable
from typing import Any

import google_crc32c
import numpy as np
from numcodecs import Blosc, Zstd

from tests.helpers.corpus_docs import BYTES, CRC32C, Doc, base_doc, grid, sharding

EMPTY = (1 << 64) - 1
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def values(shape: tuple[int, ...], data_type: str) -> np.ndarray:
    flat = np.arange(math.prod(shape))
    if data_type == "bool":
        return (flat % 2).astype(bool).reshape(shape)
    return flat.astype(data_type).reshape(shape)


def blocks(array: np.ndarray, chunk: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    grid_shape = tuple(-(-s // c) for s, c in zip(array.shape, chunk, strict=True))
    out = {}
    for index in np.ndindex(*grid_shape):
        piece = np.zeros(chunk, dtype=array.dtype)  # fill value 0 beyond the edge
        region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunk, strict=True))
        part = array[region]
        piece[tuple(slice(0, n) for n in part.shape)] = part
        out[index] = piece
    return out


def crc(data: bytes) -> bytes:
    return struct.pack("<I", google_crc32c.value(data))


def zstd(data: bytes, level: int = 3, checksum: bool = False) -> bytes:
    return bytes(Zstd(level=level, checksum=checksum).encode(data))


def blosc(data: bytes) -> bytes:
    return bytes(
        Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, typesize=4, blocksize=0).encode(data)
    )


BLOSC_CONFIG: Doc = {
    "cname": "lz4",
    "clevel": 5,
    "shuffle": "shuffle",
    "typesize": 4,
    "blocksize": 0,
}


def zstd_bomb(claimed: int) -> bytes:
    """A 33-byte zstd frame whose header declares `claimed` decoded bytes."""
    descriptor = 0xE0  # 8-byte content size, single segment, no checksum, no dictionary
    raw_block = bytes(range(16))
    block_header = ((len(raw_block) << 3) | (0 << 1) | 1).to_bytes(3, "little")  # raw, last
    return (
        ZSTD_MAGIC + bytes([descriptor]) + claimed.to_bytes(8, "little") + block_header + raw_block
    )


def zstd_without_content_size(data: bytes) -> bytes:
    """A valid zstd frame of `data` whose header does not declare its decoded size."""
    frame = zstd(data)
    descriptor = frame[4]
    assert descriptor & 0x20 and descriptor & 0x03 == 0, "expected a single-segment frame"
    fcs_size = (1, 2, 4, 8)[descriptor >> 6]
    window_log = max(10, (len(data) - 1).bit_length())
    window = bytes([(window_log - 10) << 3])
    new_descriptor = descriptor & 0x04  # keep the checksum flag; no size, not single-segment
    return ZSTD_MAGIC + bytes([new_descriptor]) + window + frame[5 + fcs_size :]


def blosc_header_claiming(nbytes: int) -> bytes:
    """A blosc buffer of a few bytes whose header declares `nbytes` decoded bytes."""
    body = bytes(range(16))
    header = bytes([2, 1, 0x01 | 0x02, 4]) + struct.pack("<III", nbytes, 1 << 16, 16 + len(body))
    return header + body


def blosc_lying_cbytes() -> bytes:
    """Chunk c/1/0 of a 32x16 int32 array of 16x16 chunks, blosc-encoded, with the header's
    compressed size and the first block's start pointing far past the buffer's end."""
    good = bytearray(blosc(chunk_bytes(blocks(values((32, 16), "int32"), (16, 16))[(1, 0)])))
    good[12:16] = struct.pack("<I", 0x66B92E45)  # cbytes
    good[16:20] = struct.pack("<I", 0x1B000000 + struct.unpack("<I", good[16:20])[0])  # bstarts[0]
    return bytes(good)


def shard(
    inner: dict[tuple[int, ...], bytes | None],
    per_shard: tuple[int, ...],
    *,
    index_at_start: bool = False,
    index_crc: bool = True,
    entries_override: dict[tuple[int, ...], tuple[int, int]] | None = None,
) -> bytes:
    """A shard holding encoded inner chunks in C order, with its index."""
    index_nbytes = math.prod(per_shard) * 16 + (4 if index_crc else 0)
    entries = np.full((*per_shard, 2), EMPTY, dtype="<u8")
    position = index_nbytes if index_at_start else 0
    pieces = []
    for index in np.ndindex(*per_shard):
        data = inner.get(index)
        if data is None:
            continue
        entries[index] = (position, len(data))
        pieces.append(data)
        position += len(data)
    for index, entry in (entries_override or {}).items():
        entries[index] = entry
    raw_index = entries.tobytes()
    if index_crc:
        raw_index += crc(raw_index)
    body = b"".join(pieces)
    return raw_index + body if index_at_start else body + raw_index


# A chunk case: its zarr.json document and every chunk file (key -> bytes), and the bad keys.
ChunkCase = tuple[Doc, dict[str, bytes], list[str]]


def key(index: tuple[int, ...]) -> str:
    return "/".join(["c", *map(str, index)])


def plain_case(
    codecs: list[Doc],
    encode: Callable[[np.ndarray], bytes],
    bad: bytes,
    *,
    data_type: str = "int32",
    fill_value: Any = 0,
    shape: tuple[int, int] = (8, 8),
    chunk: tuple[int, int] = (4, 4),
) -> ChunkCase:
    """An array (8x8 of 4x4 chunks unless told) with every chunk encoded with `encode` except
    c/1/0, which is `bad`."""
    doc = base_doc(
        shape=list(shape),
        chunk_grid=grid(list(chunk)),
        data_type=data_type,
        fill_value=fill_value,
        codecs=codecs,
    )
    array = values(shape, data_type)
    files = {key(i): encode(b) for i, b in blocks(array, chunk).items()}
    files["c/1/0"] = bad
    return doc, files, ["c/1/0"]


def chunk_bytes(chunk: np.ndarray) -> bytes:
    return np.ascontiguousarray(chunk).astype(chunk.dtype.newbyteorder("<")).tobytes()


def good_chunk(index: tuple[int, ...] = (1, 0), data_type: str = "int32") -> bytes:
    return chunk_bytes(blocks(values((8, 8), data_type), (4, 4))[index])


def flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0xFF
    return bytes(out)


def sharded_case(
    bad: Callable[[dict[tuple[int, ...], bytes]], bytes],
    *,
    inner_codecs: list[Doc] | None = None,
    inner_encode: Callable[[bytes], bytes] = lambda b: b,
    index_at_start: bool = False,
    index_crc: bool = True,
) -> ChunkCase:
    """16x8 array of 8x8 shards of 4x4 inner chunks: shard c/0/0 good, c/1/0 made by `bad`
    from the inner chunks it should hold."""
    extra = {"index_location": "start"} if index_at_start else {}
    codec = sharding(
        codecs=inner_codecs,
        index_codecs=[BYTES, CRC32C] if index_crc else [BYTES],
        **extra,
    )
    doc = base_doc(shape=[16, 8], chunk_grid=grid([8, 8]), codecs=[codec])
    array = values((16, 8), "int32")
    files = {}
    for shard_index, shard_values in blocks(array, (8, 8)).items():
        inner = {i: inner_encode(chunk_bytes(b)) for i, b in blocks(shard_values, (4, 4)).items()}
        if shard_index == (1, 0):
            files[key(shard_index)] = bad(inner)
        else:
            files[key(shard_index)] = shard(
                dict(inner), (2, 2), index_at_start=index_at_start, index_crc=index_crc
            )
    return doc, files, ["c/1/0"]


def chunk_cases() -> dict[str, ChunkCase]:
    raw = good_chunk()
    zstd_codecs = [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}]
    zstd_sum = [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": True}}]
    crc_codecs = [BYTES, CRC32C]
    gzip_codecs = [BYTES, {"name": "gzip", "configuration": {"level": 6}}]
    blosc_codecs = [BYTES, {"name": "blosc", "configuration": BLOSC_CONFIG}]

    def gz(b: np.ndarray | bytes) -> bytes:
        data = b if isinstance(b, bytes) else chunk_bytes(b)
        return gzip.compress(data, 6, mtime=0)

    def zs(b: np.ndarray) -> bytes:
        return zstd(chunk_bytes(b))

    def zs_sum(b: np.ndarray) -> bytes:
        return zstd(chunk_bytes(b), checksum=True)

    def with_crc(b: np.ndarray) -> bytes:
        return chunk_bytes(b) + crc(chunk_bytes(b))

    def bl(b: np.ndarray) -> bytes:
        return blosc(chunk_bytes(b))

    per = (2, 2)
    cases: dict[str, ChunkCase] = {
        # zstd
        "zstd_not_a_frame": plain_case(zstd_codecs, zs, b"this is not a zstd frame at all!" * 2),
        "zstd_truncated_frame": plain_case(zstd_codecs, zs, zstd(raw)[: len(zstd(raw)) // 2]),
        "zstd_corrupt_blocks": plain_case(
            zstd_codecs, zs, zstd(raw)[:6] + bytes([0xFF]) * (len(zstd(raw)) - 6)
        ),
        "zstd_checksum_mismatch": plain_case(zstd_sum, zs_sum, flip(zstd(raw, checksum=True), -1)),
        "zstd_bomb_header": plain_case(zstd_codecs, zs, zstd_bomb(8 << 30)),
        "zstd_bomb_outer": plain_case(
            [BYTES, CRC32C, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
            lambda b: zstd(with_crc(b)),
            zstd_bomb(8 << 30),
        ),
        "zstd_no_size_oversized": plain_case(
            zstd_codecs, zs, zstd_without_content_size(bytes(1 << 20))
        ),
        "zstd_wrong_decoded_size": plain_case(zstd_codecs, zs, zstd(raw[:32])),
        "zstd_empty_file": plain_case(zstd_codecs, zs, b""),
        # crc32c
        "crc32c_mismatch": plain_case(crc_codecs, with_crc, flip(raw + crc(raw), 5)),
        "crc32c_too_short": plain_case(crc_codecs, with_crc, b"\x01\x02\x03"),
        "crc32c_wrong_size": plain_case(crc_codecs, with_crc, raw[:60] + crc(raw[:60])),
        # gzip
        "gzip_truncated": plain_case(gzip_codecs, gz, gz(raw)[:-12]),
        "gzip_not_gzip": plain_case(gzip_codecs, gz, b"\x1f\x8b" + bytes(40)),
        "gzip_bomb": plain_case(gzip_codecs, gz, gzip.compress(bytes(16 << 20), 9, mtime=0)),
        "gzip_wrong_decoded_size": plain_case(gzip_codecs, gz, gz(raw + raw)),
        # blosc
        "blosc_bomb_header": plain_case(blosc_codecs, bl, blosc_header_claiming(1 << 31)),
        "blosc_bomb_outer": plain_case(
            [BYTES, CRC32C, {"name": "blosc", "configuration": BLOSC_CONFIG}],
            lambda b: blosc(with_crc(b)),
            blosc_header_claiming(1 << 31),
        ),
        # The header says the compressed buffer is far longer than the object and the first
        # block starts past its real end: c-blosc trusts the header and reads out of bounds
        # (numcodecs 0.16 dies with SIGSEGV on this one).
        "blosc_cbytes_beyond_buffer": plain_case(
            blosc_codecs, bl, blosc_lying_cbytes(), shape=(32, 16), chunk=(16, 16)
        ),
        "blosc_short_header": plain_case(blosc_codecs, bl, b"\x02\x01\x21"),
        "blosc_wrong_decoded_size": plain_case(blosc_codecs, bl, blosc(raw[:32])),
        # bytes
        "bool_byte_2": plain_case(
            [{"name": "bytes"}],
            lambda b: chunk_bytes(b),
            bytes([0, 1, 2, 0]) + bytes(12),
            data_type="bool",
            fill_value=False,
        ),
        "bytes_too_short": plain_case([BYTES], chunk_bytes, raw[:60]),
        "bytes_too_long": plain_case([BYTES], chunk_bytes, raw + b"\0\0\0\0"),
        "bytes_empty_file": plain_case([BYTES], chunk_bytes, b""),
        # sharding
        "shard_truncated": sharded_case(lambda inner: shard(inner, per)[:100]),
        "shard_truncated_no_index_crc": sharded_case(
            lambda inner: shard(inner, per, index_crc=False)[: 4 * 64 + 40], index_crc=False
        ),
        "shard_truncated_index_start": sharded_case(
            lambda inner: shard(inner, per, index_at_start=True)[:-70], index_at_start=True
        ),
        "shard_shorter_than_index": sharded_case(lambda inner: shard(inner, per)[-10:]),
        "shard_empty_file": sharded_case(lambda inner: b""),
        "shard_index_crc_mismatch": sharded_case(lambda inner: flip(shard(inner, per), -10)),
        "shard_entry_outside": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 1): (4 * 64, 64)})
        ),
        "shard_entry_huge_offset": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): ((1 << 63) + 5, 64)})
        ),
        "shard_entry_overflowing_end": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (64, EMPTY - 1)})
        ),
        "shard_entries_overlap": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (32, 64)})
        ),
        "shard_half_empty_entry": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 0): (EMPTY, 64)})
        ),
        "shard_half_empty_size": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 0): (128, EMPTY)})
        ),
        "shard_entry_wrong_size": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (64, 60)})
        ),
        "shard_inner_corrupt": sharded_case(
            lambda inner: shard({**inner, (1, 1): b"\x28\xb5\x2f\xfd" + bytes(20)}, per),
            inner_codecs=zstd_codecs,
            inner_encode=zstd,
        ),
        "shard_inner_bomb": sharded_case(
            lambda inner: shard({**inner, (0, 0): zstd_bomb(8 << 30)}, per),
            inner_codecs=zstd_codecs,
            inner_encode=zstd,
        ),
    }
    return cases
