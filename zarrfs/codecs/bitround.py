"""The registry's `bitround` codec: floats keep `keepbits` bits of mantissa, integers
`keepbits` bits from their highest set bit, rounded to nearest with ties to even, as zarrs
does it (its sum saturates at the word's maximum; numcodecs' BitRound, floats only, wraps).
Decoding is the identity."""

from __future__ import annotations

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayArrayCodec, ChunkSpec, check_config_keys, config_int
from .components import MANTISSA_BITS, components


class BitroundCodec(ArrayArrayCodec):
    def __init__(self, chunk: ChunkSpec, keepbits: int, member: str) -> None:
        self.chunk = chunk
        self.keepbits = keepbits
        self.parts = components(chunk.data_type, member)
        self.mantissa = MANTISSA_BITS.get(self.parts.base)
        integer = chunk.data_type.kind in ("int", "datetime") and self.parts.bits % 8 == 0
        if self.mantissa is None and not integer:
            raise MetadataError(member, f"bitround is not defined for {chunk.data_type.name!r}")

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> BitroundCodec:
        check_config_keys(spec, {"keepbits"})
        return cls(chunk, config_int(spec, "keepbits", None, 0, 64), spec.member)

    def output_spec(self) -> ChunkSpec:
        fill = np.frombuffer(self.chunk.fill_value, dtype=self.chunk.data_type.storage)
        return ChunkSpec(self.chunk.shape, self.chunk.data_type, self.encode(fill).tobytes())

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        words = self.parts.unsigned(chunk)
        if self.mantissa is not None:
            maxbits = np.full(words.shape, self.mantissa, dtype=words.dtype)
        else:
            maxbits = _bit_length(words)
        kept = np.minimum(maxbits, self.keepbits)
        maskbits = (maxbits - kept).astype(words.dtype)
        rounding = maskbits > 0
        one = words.dtype.type(1)
        half = np.where(rounding, (one << np.maximum(maskbits, one) - one) - one, 0).astype(words.dtype)
        total = words + (((words >> maskbits) & one) & rounding) + half
        total[total < words] = np.iinfo(words.dtype).max  # saturate, as zarrs does
        mask = ~((one << maskbits) - one)
        rounded = np.where(rounding, total & mask, words)
        return self.parts.restore(rounded, self.chunk.data_type, chunk.shape)

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        return chunk


def _bit_length(words: np.ndarray) -> np.ndarray:
    length = np.zeros(words.shape, dtype=words.dtype)
    rest = words.copy()
    shift = words.dtype.itemsize * 4
    while shift:
        high = rest >> words.dtype.type(shift)
        has = high != 0
        length[has] += words.dtype.type(shift)
        rest = np.where(has, high, rest)
        shift //= 2
    total: np.ndarray = length + (rest != 0)
    return total
