"""The registry's `zfp` codec (array->bytes), through zfpy, byte for byte as zarrs writes it.

zarrs stores zfp's stream without zfp's header; zfpy writes it without one, but reads only
with one. The header depends on the chunk's shape, type and mode alone, not on the data: it
is taken once from zfpy's own encoding of a chunk of zeros, and put before the stored bits
(at a bit offset, zfp's streams are bits) to decode.

As zarrs: integers of 8 and 16 bits are promoted to int32 by zfp's rules (shifted to the top
bits, unsigned ones first centred), uint32 and uint64 clamped into int32 and int64; fixed
rate counts its bits per value as for a 3-d field (zarrs passes 3 to zfp_stream_set_rate,
whatever the chunk's rank), so the rate zfpy is given is scaled to give the same bits per
block. Expert mode is refused: zfpy has no way to set it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayBytesCodec, BytesLike, ChunkSpec, CodecError, check_config_keys, config_choice

# name -> (zfp's type, promotion shift, offset before the shift) for the promoted types
_PROMOTED = {"int8": ("<i4", 23, 0), "uint8": ("<i4", 23, 0x80), "int16": ("<i4", 15, 0),
             "uint16": ("<i4", 15, 0x8000)}
_CLAMPED = {"uint32": "<i4", "uint64": "<i8"}
_NATIVE = {"int32": "<i4", "int64": "<i8", "float32": "<f4", "float64": "<f8",
           "numpy.datetime64": "<i8", "numpy.timedelta64": "<i8"}
_MODES = ("reversible", "fixed_rate", "fixed_precision", "fixed_accuracy", "expert")
_MODE_KEYS = {"reversible": set(), "fixed_rate": {"rate"}, "fixed_precision": {"precision"},
              "fixed_accuracy": {"tolerance"}, "expert": {"minbits", "maxbits", "maxprec", "minexp"}}
_MAGIC_AND_META_BITS = 32 + 52


def _zfpy() -> Any:
    try:
        import zfpy
    except ImportError:
        raise MetadataError("", "the zfp codec needs zfpy: pip install 'zarrfs[codecs]'") from None
    return zfpy


class ZfpCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, mode: str, params: dict[str, Any], member: str) -> None:
        self.chunk = chunk
        self.mode = mode
        name = chunk.data_type.name
        zfp_type = _NATIVE.get(name) or _CLAMPED.get(name) or _PROMOTED.get(name, (None,))[0]
        if zfp_type is None:
            raise MetadataError(member, f"zfp does not encode {name!r}")
        if mode == "fixed_accuracy" and zfp_type[1] == "i":
            raise MetadataError(member, "zfp's fixed_accuracy mode is for floating-point types")
        self.zfp_type = np.dtype(zfp_type)
        self.field_shape = chunk.shape or (1,)
        if len(self.field_shape) > 4:
            raise MetadataError(member, f"zfp encodes 1 to 4 axes, a chunk has {len(chunk.shape)}")
        self.arguments = self._arguments(params)
        self._header = self._header_bits()

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ZfpCodec:
        mode = config_choice(spec, "mode", None, _MODES)
        check_config_keys(spec, {"mode"} | _MODE_KEYS[mode])
        if mode == "expert":
            raise MetadataError(spec.option("mode"), "zfp's expert mode is not supported (zfpy has none)")
        params = {key: _number(spec, key, key != "tolerance" and key != "rate") for key in _MODE_KEYS[mode]}
        return cls(chunk, mode, params, spec.member)

    def _arguments(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.mode == "fixed_rate":
            bits = math.floor(64 * params["rate"] + 0.5)  # a 3-d block of 64 values, as zarrs
            return {"rate": bits / 4 ** len(self.field_shape)}
        if self.mode == "fixed_precision":
            return {"precision": params["precision"]}
        if self.mode == "fixed_accuracy":
            return {"tolerance": params["tolerance"]}
        return {}

    def _header_bits(self) -> tuple[int, int]:
        """(the header's bits as an integer, how many) for this chunk's field and mode."""
        zeros = np.zeros(self.field_shape, dtype=self.zfp_type)
        stream = int.from_bytes(_zfpy().compress_numpy(zeros, write_header=True, **self.arguments), "little")
        short_mode = (stream >> _MAGIC_AND_META_BITS) & 0xFFF
        count = _MAGIC_AND_META_BITS + (12 if short_mode <= 0xFFE else 64)
        return stream & ((1 << count) - 1), count

    def encode(self, chunk: np.ndarray) -> BytesLike:
        promoted = self._promote(np.ascontiguousarray(chunk).reshape(self.field_shape))
        return bytes(_zfpy().compress_numpy(promoted, write_header=False, **self.arguments))

    def decode(self, data: BytesLike) -> np.ndarray:
        header, count = self._header
        # zfp reads whole words and trusts the stream to end: room for the longest chunk.
        room = 2 * math.prod(self.field_shape) * self.zfp_type.itemsize + 4096
        stream = header | int.from_bytes(data, "little") << count
        size = max(len(data) + (count + 63) // 64 * 8, room)
        try:
            decoded = _zfpy().decompress_numpy(stream.to_bytes(size, "little"))
        except (RuntimeError, ValueError, TypeError) as e:
            raise CodecError(f"zfp: {e}") from None
        return self._demote(np.asarray(decoded)).reshape(self.chunk.shape)

    def _promote(self, chunk: np.ndarray) -> np.ndarray:
        name = self.chunk.data_type.name
        if name in _PROMOTED:
            _, shift, offset = _PROMOTED[name]
            promoted: np.ndarray = (chunk.astype(np.int32) - offset) << shift
            return promoted
        if name in _CLAMPED:
            clamped: np.ndarray = np.minimum(chunk, np.iinfo(self.zfp_type).max)
            return clamped.astype(self.zfp_type)
        return chunk.view(self.zfp_type) if chunk.dtype.kind in "mM" else chunk.astype(self.zfp_type)

    def _demote(self, values: np.ndarray) -> np.ndarray:
        storage = self.chunk.data_type.storage
        name = self.chunk.data_type.name
        if name in _PROMOTED:
            _, shift, offset = _PROMOTED[name]
            info = np.iinfo(storage)
            demoted: np.ndarray = np.clip((values >> shift) + offset, info.min, info.max)
            return demoted.astype(storage)
        if name in _CLAMPED:
            floored: np.ndarray = np.maximum(values, 0)
            return floored.astype(storage)
        return values.astype(storage.newbyteorder("="), copy=False).view(storage)


def _number(spec: CodecSpec, key: str, integer: bool) -> Any:
    value = spec.configuration.get(key)
    kinds = (int,) if integer else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or (key != "minexp" and value < 0):
        wanted = "an integer" if integer else "a number"
        raise MetadataError(spec.option(key), f"expected {wanted} of 0 or more, got {value!r}")
    return value
