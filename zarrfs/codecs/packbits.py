"""The registry's `packbits` codec: each component's bits `first_bit..last_bit` laid end to end,
least significant bit first, padded with zeros to a whole byte (and the count of padding bits
in a byte before or after, when asked). Decoding sign-extends the signed integer types.

The registry's schema spells the members `start_bit`, `end_bit`, `start_byte` and `end_byte`
where its text says `first_bit`, `last_bit`, `first_byte` and `last_byte` (as zarrs writes);
both spellings are read, the text's is written.
"""

from __future__ import annotations

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayBytesCodec, BytesLike, ChunkSpec, CodecError, check_config_keys
from .components import components

_PADDINGS = {"none": "none", "first_byte": "first_byte", "last_byte": "last_byte",
             "start_byte": "first_byte", "end_byte": "last_byte"}


class PackBitsCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, padding: str, first_bit: int, last_bit: int, member: str) -> None:
        self.chunk = chunk
        self.padding = padding
        self.first_bit = first_bit
        self.last_bit = last_bit
        self.parts = components(chunk.data_type, member)
        self.width = last_bit - first_bit + 1
        count = int(np.prod(chunk.shape)) * self.parts.count
        self.bit_count = count * self.width
        self.pad_bits = -self.bit_count % 8

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> PackBitsCodec:
        check_config_keys(spec, {"padding_encoding", "first_bit", "last_bit", "start_bit", "end_bit"})
        padding = spec.configuration.get("padding_encoding", "none")
        if padding not in _PADDINGS:
            raise MetadataError(spec.option("padding_encoding"),
                                f"expected one of ['none', 'first_byte', 'last_byte'], got {padding!r}")
        bits = components(chunk.data_type, spec.member).bits
        first = _bit(spec, ("first_bit", "start_bit"), 0, bits)
        last = _bit(spec, ("last_bit", "end_bit"), bits - 1, bits)
        if last < first:
            raise MetadataError(spec.option("last_bit"), f"{last} is below first_bit {first}")
        return cls(chunk, _PADDINGS[padding], first, last, spec.member)

    def encoded_size(self) -> int:
        return (self.bit_count + self.pad_bits) // 8 + (self.padding != "none")

    def encode(self, chunk: np.ndarray) -> BytesLike:
        words = self.parts.unsigned(chunk)
        bits = np.unpackbits(words.view(np.uint8).reshape(len(words), -1), axis=1, bitorder="little")
        packed = np.packbits(bits[:, self.first_bit : self.last_bit + 1].reshape(-1), bitorder="little")
        pad = bytes([self.pad_bits])
        if self.padding == "first_byte":
            return pad + packed.tobytes()
        if self.padding == "last_byte":
            return packed.tobytes() + pad
        return packed.tobytes()

    def decode(self, data: BytesLike) -> np.ndarray:
        view = np.frombuffer(data, dtype=np.uint8)
        whole = self.pad_bits == 0 and self.width == 8 * self.parts.nbytes
        if whole and len(data) == self.encoded_size() - 1:
            pass  # zarrs writes whole little-endian elements without the padding byte
        elif len(data) != self.encoded_size():
            raise CodecError(f"packbits: holds {len(data)} bytes, a chunk needs {self.encoded_size()}")
        elif self.padding == "first_byte":
            view = view[1:]
        elif self.padding == "last_byte":
            view = view[:-1]
        bits = np.unpackbits(view, bitorder="little", count=self.bit_count).reshape(-1, self.width)
        full = np.zeros((len(bits), 8 * self.parts.nbytes), dtype=np.uint8)
        full[:, self.first_bit : self.last_bit + 1] = bits
        if self.parts.signed:
            full[:, self.last_bit + 1 :] = bits[:, -1:]  # the highest bit kept is the sign
        words = np.packbits(full, axis=1, bitorder="little").reshape(-1).view(f"<u{self.parts.nbytes}")
        return self.parts.restore(words, self.chunk.data_type, self.chunk.shape)


def _bit(spec: CodecSpec, keys: tuple[str, str], default: int, bits: int) -> int:
    key = keys[1] if keys[1] in spec.configuration else keys[0]
    value = spec.configuration.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < bits:
        raise MetadataError(spec.option(key), f"expected an integer from 0 to {bits - 1}, got {value!r}")
    return value
