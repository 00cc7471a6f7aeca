"""One adapter over the numcodecs registry: every codec numcodecs has, by its id.

- v3 `numcodecs.<id>` codecs, as zarr-python 3 writes them: the filters (delta,
  fixedscaleoffset, ...) are array->array codecs on the decoded chunk; the rest
  (compressors, shuffle, checksums) bytes->bytes codecs on the serialized bytes.
- v2 filters and compressors and v1 compressors (`numcodecs-buffer.<id>`, see
  zarrfs.formats.v2) run on the serialized bytes, handed over typed as the array's stored
  dtype first, exactly as zarr-python hands them the chunk (blosc's shuffle depends on it).
- v3's core `zstd` and `blosc` are numcodecs' codecs too, with their v3 configuration.

Decoding is bounded: zstd and blosc declare their decoded size in a header, which is checked
before anything is allocated; every other result is checked against the limit afterwards.
"""

from __future__ import annotations

import lzma
import math
import zlib
from collections.abc import Mapping
from typing import Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec as Numcodec

from ..errors import MetadataError
from ..formats.description import CodecSpec
from ..formats.dtypes import DataType
from .base import (
    ArrayArrayCodec,
    BytesBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
    check_config_keys,
    check_limit,
    config_choice,
    config_int,
)

V3_PREFIX = "numcodecs."


def one_thread_each() -> None:
    """Ready codecs to run in a process that is itself one core's worth of decoding (a decoding
    process, forked from one that called this): each chunk on its caller's thread alone (blosc
    called from a main thread would spread it over threads of its own: 294-308 us of CPU for a
    512 KiB lz4 chunk against 205 us alone, measured in a fresh process), and the lock
    numcodecs' blosc makes at its first chunk made possible without an import then (it imports
    multiprocessing.synchronize: ~15 ms of each decoding process's first chunk, seen with
    strace)."""
    import multiprocessing.synchronize  # noqa: F401

    from numcodecs import blosc

    blosc.use_threads = False


BUFFER_PREFIX = "numcodecs-buffer."
# zarr-python 3 runs these on the decoded chunk (its array->array wrappers).
ARRAY_CODEC_IDS = {"delta", "bitround", "fixedscaleoffset", "quantize", "packbits", "astype"}
_PROBE_ELEMENTS = 4096  # encoded to learn what an array->array codec makes of a chunk
_BLOSC_SHUFFLES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_BLOSC_CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")
# What numcodecs' codecs raise on bad input (zlib, lzma and the C extensions have their own;
# the checksums' IndexError: a buffer shorter than its checksum).
_DECODE_ERRORS = (RuntimeError, ValueError, TypeError, OverflowError, MemoryError, EOFError, OSError,
                  IndexError, zlib.error, lzma.LZMAError)


def from_spec(spec: CodecSpec, chunk: ChunkSpec) -> ArrayArrayCodec | BytesBytesCodec:
    codec_id, config, on_bytes, typed = _translate(spec, chunk)
    try:
        codec = numcodecs.get_codec({"id": codec_id, **config})
    except (TypeError, ValueError, KeyError) as e:
        if "not available" in str(e):
            raise MetadataError(_name_member(spec), f"unknown codec {codec_id!r}") from None
        raise MetadataError(_config_member(spec), f"{codec_id}: {e}") from None
    if on_bytes:
        stored = chunk.data_type.stored
        dtype = stored if stored is not None else chunk.data_type.storage.newbyteorder("<")
        adapter = NumcodecsBytesCodec(codec, dtype if typed else None)
        if codec_id not in ARRAY_CODEC_IDS:
            _check_by_encoding(adapter, spec, config, chunk.data_type.itemsize)
        return adapter
    return NumcodecsArrayCodec(codec, chunk, spec)


def _check_by_encoding(adapter: NumcodecsBytesCodec, spec: CodecSpec, config: Mapping[str, Any],
                       itemsize: int) -> None:
    """numcodecs checks some options (blosc's cname, zlib's level) only when it encodes:
    encode a few zero elements now, so a bad option fails the open, naming it. Whole
    elements of the array's type: shuffle refuses a part of a 3-byte r24 element."""
    sample = bytes(64 * itemsize)
    try:
        adapter.encode(sample)
    except CodecError as e:
        raise MetadataError(_config_member(spec), f"{config} is refused: {e}") from None


def _name_member(spec: CodecSpec) -> str:
    return f"{spec.member}.id" if spec.name.startswith(BUFFER_PREFIX) else f"{spec.member}.name"


def _config_member(spec: CodecSpec) -> str:
    # v2 and v1 keep a codec's options beside its id; v3 under "configuration".
    return spec.member if spec.name.startswith(BUFFER_PREFIX) else f"{spec.member}.configuration"


def _translate(spec: CodecSpec, chunk: ChunkSpec) -> tuple[str, dict[str, Any], bool, bool]:
    """(numcodecs id, its configuration, runs on bytes, hand the bytes over typed)."""
    if spec.name.startswith(BUFFER_PREFIX):
        return spec.name[len(BUFFER_PREFIX):], dict(spec.configuration), True, True
    if spec.name.startswith(V3_PREFIX):
        codec_id = spec.name[len(V3_PREFIX):]
        return codec_id, dict(spec.configuration), codec_id not in ARRAY_CODEC_IDS, False
    if spec.name == "zstd":
        return "zstd", _v3_zstd(spec), True, False
    return "blosc", _v3_blosc(spec, chunk), True, False


def _v3_zstd(spec: CodecSpec) -> dict[str, Any]:
    check_config_keys(spec, {"level", "checksum"})
    checksum = spec.configuration.get("checksum", False)
    if not isinstance(checksum, bool):
        raise MetadataError(spec.option("checksum"), f"expected true or false, got {checksum!r}")
    return {"level": config_int(spec, "level", 0, -131072, 22), "checksum": checksum}


def _v3_blosc(spec: CodecSpec, chunk: ChunkSpec) -> dict[str, Any]:
    check_config_keys(spec, {"cname", "clevel", "shuffle", "typesize", "blocksize"})
    shuffle = config_choice(spec, "shuffle", "noshuffle", tuple(_BLOSC_SHUFFLES))
    # With shuffling the element size matters; TensorStore defaults it to the data type's.
    default_typesize = chunk.data_type.itemsize if shuffle != "noshuffle" else 1
    return {
        "cname": config_choice(spec, "cname", "lz4", _BLOSC_CNAMES),
        "clevel": config_int(spec, "clevel", 5, 0, 9),
        "shuffle": _BLOSC_SHUFFLES[shuffle],
        "typesize": config_int(spec, "typesize", default_typesize, 1, 255),
        "blocksize": config_int(spec, "blocksize", 0, 0, 1 << 31),
    }


def _flat_bytes(data: Any) -> np.ndarray:
    """Any buffer numcodecs returns, as a flat uint8 array (no copy when contiguous)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, dtype=np.uint8)


class NumcodecsBytesCodec(BytesBytesCodec):
    def __init__(self, codec: Numcodec, input_dtype: np.dtype[Any] | None) -> None:
        self.codec = codec
        self.input_dtype = input_dtype

    def encode(self, data: BytesLike) -> BytesLike:
        typed: Any = data
        if self.input_dtype is not None and not isinstance(data, np.ndarray):
            typed = np.frombuffer(data, dtype=self.input_dtype)
        try:
            out = self.codec.encode(typed)
        except _DECODE_ERRORS as e:
            raise CodecError(f"{self.codec.codec_id}: cannot encode: {e}") from None
        # Filters return arrays, kept typed for the codec after them (v2 hands them on so).
        return out if isinstance(out, np.ndarray) else memoryview(out)  # type: ignore[return-value]

    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        declared = _declared_size(self.codec.codec_id, data)
        if declared is not None:
            if exact_size is not None and declared != exact_size:
                raise CodecError(f"{self.codec.codec_id}: holds {declared} bytes, expected {exact_size}")
            check_limit(declared, None, limit)
        try:
            out = self.codec.decode(data)
        except _DECODE_ERRORS as e:
            raise CodecError(f"{self.codec.codec_id}: {e}") from None
        flat = _flat_bytes(out)
        check_limit(flat.nbytes, exact_size, limit)
        return flat  # type: ignore[return-value]


class NumcodecsArrayCodec(ArrayArrayCodec):
    def __init__(self, codec: Numcodec, chunk: ChunkSpec, spec: CodecSpec) -> None:
        self.codec = codec
        self.chunk = chunk
        # What the codec makes of the fill value, learnt from a few elements: a whole chunk
        # (up to 4 GiB, as a document may claim) would be allocated at open, three times over.
        size = math.prod(chunk.shape)
        probe = min(size, _PROBE_ELEMENTS)
        sample = _encoded_fill(codec, ChunkSpec((probe,), chunk.data_type, chunk.fill_value), spec)
        # zarr-python keeps the chunk's shape unless the codec changes the element count.
        shape = chunk.shape
        if sample.size != probe:
            # A codec that changes the element count (packbits): its count for the whole chunk,
            # which decoding such a chunk allocates anyway.
            sample = sample if probe == size else _encoded_fill(codec, chunk, spec)
            shape = (sample.size,)
        out_type = DataType.from_numpy(sample.dtype.str, sample.dtype)
        fill = sample.reshape(-1)[:1].astype(out_type.storage).tobytes()
        self._output = ChunkSpec(shape, out_type, fill or bytes(out_type.itemsize))

    def output_spec(self) -> ChunkSpec:
        return self._output

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        out = np.asarray(self.codec.encode(np.ascontiguousarray(chunk)))
        return out.astype(self._output.data_type.storage, copy=False).reshape(self._output.shape)

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        try:
            out = np.asarray(self.codec.decode(np.ascontiguousarray(chunk)))
            return out.astype(self.chunk.data_type.storage, copy=False).reshape(self.chunk.shape)
        except _DECODE_ERRORS as e:
            raise CodecError(f"{self.codec.codec_id}: {e}") from None


def _encoded_fill(codec: Numcodec, chunk: ChunkSpec, spec: CodecSpec) -> np.ndarray:
    try:
        return np.asarray(codec.encode(chunk.fill_array()))
    except _DECODE_ERRORS as e:
        problem = f"{codec.codec_id} cannot encode {chunk.data_type.name}: {e}"
        raise MetadataError(spec.member, problem) from None


# -- decoded sizes declared in headers ---------------------------------------------------------

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _declared_size(codec_id: str, data: BytesLike) -> int | None:
    if codec_id == "zstd":
        return zstd_frame_content_size(data)
    if codec_id == "blosc":
        return _blosc_size(data)
    return None


def zstd_frame_content_size(data: BytesLike) -> int | None:
    """The decoded size a zstd frame header declares, or None when it does not say.
    numcodecs would allocate whatever a frame claims; reading the header first lets a
    decoder refuse a small frame that claims gigabytes."""
    view = memoryview(data).cast("B")
    if len(view) < 6 or bytes(view[:4]) != _ZSTD_MAGIC:
        raise CodecError("zstd: not a zstd frame")
    descriptor = view[4]
    fcs_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    dict_id_size = (0, 1, 2, 4)[descriptor & 3]
    position = 5 + (0 if single_segment else 1) + dict_id_size
    field_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if field_size == 0:
        return None
    if len(view) < position + field_size:
        raise CodecError("zstd: truncated frame header")
    size = int.from_bytes(view[position : position + field_size], "little")
    return size + 256 if field_size == 2 else size


def _blosc_size(data: BytesLike) -> int:
    view = memoryview(data).cast("B")
    if len(view) < 16:
        raise CodecError("blosc: shorter than a blosc header")
    compressed = int.from_bytes(view[12:16], "little")
    if compressed != len(view):
        # c-blosc trusts this field and reads past the buffer when it lies (a segfault).
        raise CodecError(f"blosc header says {compressed} compressed bytes, buffer has {len(view)}")
    return int.from_bytes(view[4:8], "little")


# The names this adapter answers to (prefixes end with a dot).
NAMES = (V3_PREFIX, BUFFER_PREFIX, "zstd", "blosc")
