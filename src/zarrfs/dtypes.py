"""Zarr v3 data types and their fill values.

Every data type has a *storage* numpy dtype: how one element looks in a decoded chunk and in
every view. bool is one byte (0 or 1), int4 one signed byte (as TensorStore keeps it in
memory), bfloat16 two bytes; the rest are their natural numpy types in native byte order.
Fill values are kept as the raw bits of one element, because "equal to the fill value" is a
bit-for-bit comparison (TensorStore's rule: -0.0 is not 0.0, NaN payloads matter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .errors import MetadataError


@dataclass(frozen=True)
class DataType:
    name: str
    storage: np.dtype[Any]
    kind: str  # "bool", "int", "float" or "complex"
    int_range: tuple[int, int] | None = None

    @property
    def itemsize(self) -> int:
        return int(self.storage.itemsize)

    @property
    def bits_dtype(self) -> np.dtype[Any]:
        """An unsigned integer dtype of the same size, for bitwise comparisons."""
        return np.dtype(f"u{self.itemsize}") if self.itemsize <= 8 else np.dtype(
            f"V{self.itemsize}"
        )


def _int_type(name: str, storage: str, lo: int, hi: int) -> DataType:
    return DataType(name, np.dtype(storage), "int", (lo, hi))


DATA_TYPES: dict[str, DataType] = {
    dt.name: dt
    for dt in [
        DataType("bool", np.dtype(np.bool_), "bool"),
        _int_type("int4", "i1", -8, 7),
        *(
            _int_type(f"{sign}int{bits}", f"{'u' if sign else 'i'}{bits // 8}", lo, hi)
            for bits in (8, 16, 32, 64)
            for sign, lo, hi in (
                ("", -(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                ("u", 0, (1 << bits) - 1),
            )
        ),
        DataType("float16", np.dtype(np.float16), "float"),
        DataType("bfloat16", np.dtype(ml_dtypes.bfloat16), "float"),
        DataType("float32", np.dtype(np.float32), "float"),
        DataType("float64", np.dtype(np.float64), "float"),
        DataType("complex64", np.dtype(np.complex64), "complex"),
        DataType("complex128", np.dtype(np.complex128), "complex"),
    ]
}


def parse_data_type(value: object) -> DataType:
    if not isinstance(value, str):
        raise MetadataError("data_type", f"expected a name, got {value!r}")
    try:
        return DATA_TYPES[value]
    except KeyError:
        raise MetadataError("data_type", f"unknown or unsupported data type {value!r}") from None


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_bits(value: object, storage: np.dtype[Any], member: str) -> bytes:
    """Raw native-order bits of one real float element from its JSON form."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            bits = int(value, 16)
        except ValueError:
            raise MetadataError(member, f"bad hex bit pattern {value!r}") from None
        if len(value) - 2 != 2 * storage.itemsize:
            raise MetadataError(
                member, f"hex bit pattern {value!r} needs {2 * storage.itemsize} digits"
            )
        return bits.to_bytes(storage.itemsize, "little")
    if isinstance(value, str) and value in _FLOAT_WORDS:
        number = _FLOAT_WORDS[value]
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            raise MetadataError(member, f"{value} is too large for a float") from None
    else:
        raise MetadataError(member, f"expected a number, NaN, Infinity or 0x bits, got {value!r}")
    with np.errstate(over="ignore"):
        return np.array(number, dtype=storage).tobytes()


def parse_fill_value(value: object, dtype: DataType) -> bytes:
    """The raw bits (native byte order) of one element equal to `value`."""
    member = "fill_value"
    if dtype.kind == "bool":
        if not isinstance(value, bool):
            raise MetadataError(member, f"expected true or false for bool, got {value!r}")
        return bytes([value])
    if dtype.kind == "int":
        # zarr-python writes integral floats like 0.0 for some int arrays; accept exact ones.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise MetadataError(member, f"expected an integer for {dtype.name}, got {value!r}")
        assert dtype.int_range is not None
        lo, hi = dtype.int_range
        if not lo <= value <= hi:
            raise MetadataError(member, f"{value} is outside the range of {dtype.name}")
        return np.array(value, dtype=dtype.storage).tobytes()
    if dtype.kind == "float":
        return _float_bits(value, dtype.storage, member)
    part = np.dtype(f"f{dtype.itemsize // 2}")
    if not (isinstance(value, list) and len(value) == 2):
        raise MetadataError(member, f"expected [real, imaginary] for {dtype.name}, got {value!r}")
    return _float_bits(value[0], part, member) + _float_bits(value[1], part, member)


def fill_value_to_json(bits: bytes, dtype: DataType) -> Any:
    """The JSON form of a fill value, exact for every bit pattern."""
    if dtype.kind == "complex":
        half = dtype.itemsize // 2
        part = np.dtype(f"f{half}")
        return [_float_json(bits[:half], part), _float_json(bits[half:], part)]
    if dtype.kind == "float":
        return _float_json(bits, dtype.storage)
    scalar = np.frombuffer(bits, dtype=dtype.storage)[0]
    return bool(scalar) if dtype.kind == "bool" else int(scalar)


def _float_json(bits: bytes, storage: np.dtype[Any]) -> Any:
    number = float(np.frombuffer(bits, dtype=storage)[0])
    if math.isnan(number):
        canonical = np.array(math.nan, dtype=storage).tobytes()
        if bits == canonical:
            return "NaN"
        return "0x" + int.from_bytes(bits, "little").to_bytes(len(bits), "big").hex()
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0 and math.copysign(1.0, number) < 0:
        return -0.0
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def parse_user_fill_value(text: str, dtype: DataType) -> bytes:
    """A fill value typed on the command line (``0``, ``nan``, ``-inf``, ``0x7fc00000``)."""
    text = text.strip()
    try:
        return parse_fill_value(_user_fill_json(text, dtype), dtype)
    except ValueError as e:
        if isinstance(e, MetadataError):
            raise
        raise MetadataError("fill_value", f"cannot read {text!r} as a {dtype.name}") from None


def _user_fill_json(text: str, dtype: DataType) -> Any:
    words = {"nan": "NaN", "inf": "Infinity", "+inf": "Infinity", "-inf": "-Infinity"}
    value: Any
    if dtype.kind == "bool":
        value = text.lower() in ("1", "true")
    elif text.lower() in words:
        value = words[text.lower()]
    elif text.startswith("0x") and dtype.kind != "int":
        value = text
    elif dtype.kind == "int":
        value = int(text, 0)
    elif dtype.kind == "complex":
        number = complex(text.replace("i", "j"))
        value = [number.real, number.imag]
    else:
        value = float(text)
    return value

