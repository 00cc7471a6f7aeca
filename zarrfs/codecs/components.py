"""How the registry's bit-level codecs (packbits, bitround) see an element: one or two
components (complex types have two), each an unsigned integer of a known number of bits.

Decoded chunks hold each element in its storage dtype (zarrfs.formats.dtypes): the
sub-byte types (bool, int2, uint2, int4, uint4, float4) one per byte, the value in its low
bits; everything else as the `bytes` codec stores it in little-endian.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MetadataError
from ..formats.dtypes import DataType

# Types whose bits are fewer than their storage's (the registry's widths).
_NARROW_BITS = {"bool": 1, "int2": 2, "uint2": 2, "int4": 4, "uint4": 4, "float4_e2m1fn": 4,
                "float6_e2m3fn": 6, "float6_e3m2fn": 6}
# Bits of mantissa of the float types bitround rounds (zarrs' table).
MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}


@dataclass(frozen=True)
class Components:
    count: int  # 2 for complex types
    nbytes: int  # the storage bytes of one component
    bits: int  # the bits that carry its value
    signed: bool
    base: str  # the component's own type name: "float32" for complex64 and complex_float32

    def unsigned(self, chunk: np.ndarray) -> np.ndarray:
        """Every component as a little-endian unsigned integer, flat, in C order."""
        word = np.dtype(f"<u{self.nbytes}")
        return np.ascontiguousarray(chunk).reshape(-1).view(np.uint8).view(word)

    def restore(self, words: np.ndarray, data_type: DataType, shape: tuple[int, ...]) -> np.ndarray:
        return words.astype(f"<u{self.nbytes}", copy=False).view(data_type.storage).reshape(shape)


_COMPLEX_BASES = {"complex64": "float32", "complex128": "float64"}


def components(data_type: DataType, member: str) -> Components:
    name = data_type.name
    if data_type.kind in ("bytes", "string", "struct") or data_type.stored is not None:
        raise MetadataError(member, f"not defined for data type {name!r}")
    complex_type = data_type.kind == "complex" or name.startswith("complex_")
    count = 2 if complex_type else 1
    nbytes = data_type.itemsize // count
    base = _COMPLEX_BASES.get(name, name.removeprefix("complex_")) if complex_type else name
    bits = _NARROW_BITS.get(base, 8 * nbytes)
    signed = base.startswith("int") or data_type.kind == "datetime"
    return Components(count, nbytes, bits, signed, base)
