"""Data types of every format, and their fill values.

Every data type has a *storage* numpy dtype: how one element looks in a decoded chunk and in
every view, in native byte order. bool is one byte (0 or 1), int4 one signed byte (as
TensorStore keeps it in memory), bfloat16 two bytes, datetime64 its int64 count, fixed-size
strings and records as numpy packs them. Fill values are kept as the raw bits of one element,
because "equal to the fill value" is a bit-for-bit comparison (TensorStore's rule: -0.0 is not
0.0, NaN payloads matter).
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import MetadataError

# One element's fill value is held, parsed and written whole, several times over, as a
# document is opened: a 256 MiB element cost 1.2 GB and 14 s before any chunk was read.
MAX_ITEM_BYTES = 1 << 24
# numpy's kind letter -> ours
_KINDS = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex", "M": "datetime",
          "m": "datetime", "S": "bytes", "V": "bytes", "U": "string"}


@dataclass(frozen=True)
class DataType:
    name: str  # as the format spells it: "uint16", "<u2", "numpy.datetime64", ...
    storage: np.dtype[Any]
    kind: str  # bool, int, float, complex, datetime, bytes, string or struct
    int_range: tuple[int, int] | None = None
    # The byte order the format itself stores (v2 and v1 typestrs); None when a codec says.
    stored: np.dtype[Any] | None = None

    @property
    def itemsize(self) -> int:
        return int(self.storage.itemsize)

    @classmethod
    def from_numpy(cls, name: str, dtype: np.dtype[Any], *, stored: bool = False) -> DataType:
        kind = "struct" if dtype.fields is not None else _KINDS.get(dtype.kind)
        if kind is None or dtype.hasobject or dtype.itemsize == 0:
            raise MetadataError("dtype", f"{name!r} has no fixed size")
        if dtype.itemsize > MAX_ITEM_BYTES:
            raise MetadataError("dtype", f"{name!r}: elements of {dtype.itemsize} bytes, over the "
                                         f"limit of {MAX_ITEM_BYTES}")
        native = dtype.newbyteorder("=")
        int_range = None
        if kind == "int":
            info = np.iinfo(native)
            int_range = (int(info.min), int(info.max))
        return cls(name, native, kind, int_range, dtype if stored else None)


def _int_type(name: str, storage: str) -> DataType:
    return DataType.from_numpy(name, np.dtype(storage))


CORE_TYPES: dict[str, DataType] = {
    dt.name: dt
    for dt in [
        DataType("bool", np.dtype(np.bool_), "bool"),
        DataType("int4", np.dtype("i1"), "int", (-8, 7)),
        *(_int_type(f"{sign}int{bits}", f"{'u' if sign else 'i'}{bits // 8}")
          for bits in (8, 16, 32, 64) for sign in ("", "u")),
        DataType("float16", np.dtype(np.float16), "float"),
        DataType("bfloat16", np.dtype(ml_dtypes.bfloat16), "float"),
        DataType("float32", np.dtype(np.float32), "float"),
        DataType("float64", np.dtype(np.float64), "float"),
        DataType("complex64", np.dtype(np.complex64), "complex"),
        DataType("complex128", np.dtype(np.complex128), "complex"),
    ]
}
DATA_TYPES = CORE_TYPES  # the types `zarrfs create` offers


# -- fill values --------------------------------------------------------------------------------

_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_bits(value: object, storage: np.dtype[Any], member: str) -> bytes:
    """Raw native-order bits of one real float element from its JSON form."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            bits = int(value, 16)
        except ValueError:
            raise MetadataError(member, f"bad hex bit pattern {value!r}") from None
        if len(value) - 2 != 2 * storage.itemsize:
            raise MetadataError(member, f"hex bit pattern {value!r} needs {2 * storage.itemsize} digits")
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


def parse_fill_value(value: object, dtype: DataType, member: str = "fill_value") -> bytes:
    """The raw bits (native byte order) of one element equal to the JSON `value`.

    Numbers, the float words and hex bits, [re, im] for complex, integer counts for datetimes
    ("NaT" too), text for fixed strings, base64 for raw bytes and records (a short value is
    zero-padded to the item size, as zarr-python writes it)."""
    kind = dtype.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise MetadataError(member, f"expected true or false for bool, got {value!r}")
        return bytes([value])
    if kind in ("int", "datetime"):
        return _integer_bits(value, dtype, member)
    if kind == "float":
        return _float_bits(value, dtype.storage, member)
    if kind == "complex":
        part = np.dtype(f"f{dtype.itemsize // 2}")
        if not (isinstance(value, list) and len(value) == 2):
            raise MetadataError(member, f"expected [real, imaginary] for {dtype.name}, got {value!r}")
        return _float_bits(value[0], part, member) + _float_bits(value[1], part, member)
    if kind == "string":
        if not isinstance(value, str):
            raise MetadataError(member, f"expected a string, got {value!r}")
        return np.array(value, dtype=dtype.storage).tobytes()
    return _base64_bits(value, dtype, member)


def _integer_bits(value: object, dtype: DataType, member: str) -> bytes:
    if dtype.kind == "datetime" and value == "NaT":
        return np.array("NaT", dtype=dtype.storage).tobytes()
    # zarr-python writes integral floats like 0.0 for some int arrays; accept exact ones.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MetadataError(member, f"expected an integer for {dtype.name}, got {value!r}")
    lo, hi = dtype.int_range or (-(1 << 63), (1 << 63) - 1)
    if not lo <= value <= hi:
        raise MetadataError(member, f"{value} is outside the range of {dtype.name}")
    return np.array(value, dtype=dtype.storage if dtype.kind == "int" else np.int64).tobytes()


def _base64_bits(value: object, dtype: DataType, member: str) -> bytes:
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        value = base64.b64encode(bytes(value)).decode()  # r* types: a list of the bytes
    if not isinstance(value, str):
        raise MetadataError(member, f"expected base64 text for {dtype.name}, got {value!r}")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        if dtype.kind == "bytes" and value.isascii():
            raw = value.encode()  # v1 and some v2 writers store S fills as plain text
        else:
            raise MetadataError(member, f"not valid base64: {value!r}") from None
    if len(raw) > dtype.itemsize:
        raise MetadataError(member, f"{len(raw)} bytes do not fit a {dtype.itemsize}-byte element")
    raw = raw.ljust(dtype.itemsize, b"\0")
    stored = dtype.stored if dtype.stored is not None else dtype.storage.newbyteorder("<")
    return np.frombuffer(raw, dtype=stored).astype(dtype.storage).tobytes()


def fill_value_to_json(bits: bytes, dtype: DataType) -> Any:
    """The JSON form of a fill value, exact for every bit pattern."""
    if dtype.kind == "complex":
        half = dtype.itemsize // 2
        part = np.dtype(f"f{half}")
        return [_float_json(bits[:half], part), _float_json(bits[half:], part)]
    if dtype.kind == "float":
        return _float_json(bits, dtype.storage)
    scalar = np.frombuffer(bits, dtype=dtype.storage)[0]
    if dtype.kind == "bool":
        return bool(scalar)
    if dtype.kind == "int":
        return int(scalar)
    if dtype.kind == "datetime":
        return int(np.frombuffer(bits, dtype=np.int64)[0])
    if dtype.kind == "string":
        return str(scalar)
    little = np.frombuffer(bits, dtype=dtype.storage).astype(dtype.storage.newbyteorder("<"))
    return base64.b64encode(little.tobytes()).decode()


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
