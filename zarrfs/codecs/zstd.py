"""The `zstd` codec: v3's core codec, and numcodecs' `zstd` of v2 and v1 arrays.

It runs on python-zstandard, which keeps its compression and decompression contexts for the
next chunk. numcodecs makes both afresh for every chunk, which costs about as long as
decoding a 4 KiB chunk (measured here, 4 KiB of float32: decoded in 15.6 us by numcodecs
and 5.5 us here, encoded in 22.8 and 12.0 us). The frames are numcodecs' (decoded size in
the header, content checksum when asked), so TensorStore and zarr-python read them.

A frame that does not declare its size, or several frames, are read as a stream, bounded, and
checked to end where a frame ends. (numcodecs' decoder, which had them before, spins forever
on a frame cut short after a whole one: found by tests/fuzz.)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import zstandard

from .base import ArrayArrayCodec, BytesBytesCodec, BytesLike, CodecError, check_limit
from .numcodecs_adapter import NumcodecsBytesCodec, zstd_frame_content_size


class ZstdCodec(BytesBytesCodec):
    def __init__(self, level: int, checksum: bool) -> None:
        self.level = level
        self.checksum = checksum

    @classmethod
    def in_place_of(cls, codec: ArrayArrayCodec | BytesBytesCodec) -> ArrayArrayCodec | BytesBytesCodec:
        """numcodecs' zstd, however an array names it (parsed and checked by the adapter), as
        this codec; any other codec as it is."""
        if isinstance(codec, NumcodecsBytesCodec) and codec.codec.codec_id == "zstd":
            return cls(codec.codec.level, codec.codec.checksum)
        return codec

    def encode(self, data: BytesLike) -> BytesLike:
        with _compressor(self.level, self.checksum) as compressor:
            try:
                return compressor.compress(data)
            except zstandard.ZstdError as e:
                raise CodecError(f"zstd: cannot encode: {e}") from None

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        declared = zstd_frame_content_size(data)
        if declared is None:
            return _stream_decode(data, exact_size, limit)
        if exact_size is not None and declared != exact_size:
            raise CodecError(f"zstd: holds {declared} bytes, expected {exact_size}")
        check_limit(declared, None, limit)
        try:
            out = _decompressor().decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            return _stream_decode(data, exact_size, limit)  # more frames, or a bad one
        check_limit(len(out), exact_size, limit)
        return out


def _stream_decode(data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
    """Frames of any kind, one after another: read no further than `limit` allows (a frame
    that does not declare its size may expand 30,000-fold), then walked frame by frame, which
    the reader does not do (it stops quietly at a frame cut short)."""
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
        out = bytearray()
        while len(out) <= limit and (part := reader.read(limit + 1 - len(out))):
            out += part
        check_limit(len(out), exact_size, limit)
        rest = bytes(data)
        while rest:  # (output now known to be bounded)
            frame = zstandard.ZstdDecompressor().decompressobj()
            frame.decompress(rest)
            if not frame.eof:
                raise CodecError("zstd: a frame is cut short")
            rest = frame.unused_data
    except zstandard.ZstdError as e:
        raise CodecError(f"zstd: {e}") from None
    return out


_contexts = threading.local()  # a decompressor per thread: ~100 KB each, and no options
# Compressors (1.4 MB each at level 1 for chunks of 512 KiB or more, 86 KB for 4 KiB) are
# kept only as many as encode at once, per options, and of those idle only IDLE_BYTES: the
# write-back's dozen encoders kept 16 MiB outside the cache's count (a fresh compressor
# encodes 512 KiB as fast as a kept one).
IDLE_BYTES = 4 << 20
_idle_compressors: dict[tuple[int, bool], list[tuple[zstandard.ZstdCompressor, int]]] = {}
_idle_bytes: dict[tuple[int, bool], int] = {}
_idle_lock = threading.Lock()


def _decompressor() -> zstandard.ZstdDecompressor:
    found: zstandard.ZstdDecompressor | None = getattr(_contexts, "decompressor", None)
    if found is None:
        found = _contexts.decompressor = zstandard.ZstdDecompressor()
    return found


@contextlib.contextmanager
def _compressor(level: int, checksum: bool) -> Iterator[zstandard.ZstdCompressor]:
    options = (level, checksum)
    with _idle_lock:
        idle = _idle_compressors.setdefault(options, [])
        compressor, nbytes = idle.pop() if idle else (None, 0)
        _idle_bytes[options] = _idle_bytes.get(options, 0) - nbytes
    if compressor is None:
        compressor = zstandard.ZstdCompressor(level=level, write_checksum=checksum, write_content_size=True)
    try:
        yield compressor
    finally:
        nbytes = compressor.memory_size()
        with _idle_lock:
            if _idle_bytes[options] + nbytes <= IDLE_BYTES or not idle:
                idle.append((compressor, nbytes))
                _idle_bytes[options] += nbytes
