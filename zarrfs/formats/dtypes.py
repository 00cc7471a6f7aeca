"""Data types of every format, and their fill values.

Every data type has a *storage* numpy dtype: how one element looks in a decoded chunk and in
every view, in native byte order. bool is one byte (0 or 1), the sub-byte integers (int2,
int4, uint2, uint4) one byte each holding the value (as TensorStore keeps int4 in memory),
bfloat16 and float8 their ml_dtypes type, a complex type without a numpy one (complex_float16,
complex_bfloat16, complex_float8_*) a record of its real and imaginary parts, datetime64 its
int64 count, fixed-size strings and records as numpy packs them. Fill values are kept as the
raw bits of one element, because "equal to the fill value" is a bit-for-bit comparison
(TensorStore's rule: -0.0 is not 0.0, NaN payloads matter).
"""

from __future__ import annotations

import base64
import binascii
import json
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
    # A type narrower than a byte (int2, int4, float4_e2m1fn, ...; a complex one's parts): its
    # bits, the low ones of each byte (the high ones are ignored).
    sub_byte_bits: int | None = None

    @property
    def itemsize(self) -> int:
        return int(self.storage.itemsize)

    @property
    def part(self) -> np.dtype[Any]:
        """The type of a complex element's real and imaginary parts."""
        if self.storage.fields is not None:
            return np.dtype(self.storage.fields["real"][0])
        return np.dtype(f"f{self.itemsize // 2}")

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


def _complex_type(name: str, part: Any, sub_byte_bits: int | None = None) -> DataType:
    storage = np.dtype([("real", part), ("imag", part)])
    return DataType(name, storage, "complex", sub_byte_bits=sub_byte_bits)


def _float_types(name: str, sub_byte_bits: int | None = None) -> list[DataType]:
    """An ml_dtypes float type and the complex type of two of them."""
    part = np.dtype(getattr(ml_dtypes, name))
    return [DataType(name, part, "float", sub_byte_bits=sub_byte_bits),
            _complex_type(f"complex_{name}", part, sub_byte_bits)]


CORE_TYPES: dict[str, DataType] = {
    dt.name: dt
    for dt in [
        DataType("bool", np.dtype(np.bool_), "bool"),
        DataType("int4", np.dtype("i1"), "int", (-8, 7), sub_byte_bits=4),
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
# The zarr-extensions registry's other fixed-size types. Kept apart from the core ones: two of
# them share a storage dtype with a core type (complex_float32 is complex64's bytes), and a
# .npy stream's dtype maps to the core name.
EXTENSION_TYPES: dict[str, DataType] = {
    dt.name: dt
    for dt in [
        DataType("int2", np.dtype("i1"), "int", (-2, 1), sub_byte_bits=2),
        DataType("uint2", np.dtype("u1"), "int", (0, 3), sub_byte_bits=2),
        DataType("uint4", np.dtype("u1"), "int", (0, 15), sub_byte_bits=4),
        # The registry's float8_e4m3 is IEEE-like (infinities, NaN 0x7c): ml_dtypes'
        # float8_e4m3, not float8_e4m3fn.
        *_float_types("float8_e4m3"),
        *_float_types("float8_e5m2"),
        *_float_types("float8_e3m4"),
        *_float_types("float8_e4m3fnuz"),
        *_float_types("float8_e4m3b11fnuz"),
        *_float_types("float8_e5m2fnuz"),
        *_float_types("float8_e8m0fnu"),
        *_float_types("float6_e2m3fn", 6),
        *_float_types("float6_e3m2fn", 6),
        *_float_types("float4_e2m1fn", 4),
        # Not in the registry, but TensorStore writes it (NaN 0x7f, no infinities).
        DataType("float8_e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn), "float"),
        _complex_type("complex_bfloat16", ml_dtypes.bfloat16),
        _complex_type("complex_float16", np.float16),
        DataType("complex_float32", np.dtype(np.complex64), "complex"),
        DataType("complex_float64", np.dtype(np.complex128), "complex"),
    ]
}
REGISTERED_TYPES = {**CORE_TYPES, **EXTENSION_TYPES}  # every fixed-size type known by its name alone


def from_low_bits(values: np.ndarray, data_type: DataType) -> np.ndarray:
    """Elements of a sub-byte type from bytes holding them (or a complex one's parts) in their
    low bits, the high bits ignored as the registry says; other types unchanged."""
    bits = data_type.sub_byte_bits
    if bits is None:
        return values
    low: np.ndarray = values.view(np.uint8) & np.uint8((1 << bits) - 1)
    if data_type.kind != "int":
        return low.view(data_type.storage)
    if data_type.int_range is None or data_type.int_range[0] == 0:
        return low
    sign = np.uint8(1 << (bits - 1))
    signed: np.ndarray = (low ^ sign).astype(np.int8) - sign.astype(np.int8)
    return signed


def element_name(data_type: DataType, file_dtype: np.dtype[Any]) -> str:
    """The name of an element of the flat view (`file_dtype`, in its byte order): numpy's type
    string where numpy has one (records: the JSON of their descr); else the registry's name
    (bfloat16, float8_e4m3, complex_float16: ml_dtypes types have no type string numpy reads
    back, and a complex type of two such parts is no record)."""
    if data_type.kind == "complex" and file_dtype.fields is not None:
        return data_type.name
    if file_dtype.fields is not None:
        return json.dumps(file_dtype.descr)
    try:
        readable = np.dtype(file_dtype.str) == file_dtype
    except TypeError:
        readable = False
    return file_dtype.str if readable else data_type.name


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
    with np.errstate(over="ignore", invalid="ignore"):
        element = np.array(number, dtype=storage)
    # Types without NaN (float4_e2m1fn) or without infinities (the fn/fnuz ones; ml_dtypes
    # makes them NaN), and float8_e8m0fnu's missing zero: refused, not silently changed.
    if math.isnan(float(element)) != math.isnan(number):
        raise MetadataError(member, f"{value!r} has no representation in {storage}")
    return element.tobytes()


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
        return _low_bits(_float_bits(value, dtype.storage, member), dtype)
    if kind == "complex":
        part = dtype.part
        if not (isinstance(value, list) and len(value) == 2):
            raise MetadataError(member, f"expected [real, imaginary] for {dtype.name}, got {value!r}")
        return _low_bits(_float_bits(value[0], part, member) + _float_bits(value[1], part, member), dtype)
    if kind == "string":
        if not isinstance(value, str):
            raise MetadataError(member, f"expected a string, got {value!r}")
        return np.array(value, dtype=dtype.storage).tobytes()
    return _base64_bits(value, dtype, member)


def _low_bits(raw: bytes, dtype: DataType) -> bytes:
    """A sub-byte float's bits as they are read (hex bits may set the ignored high ones)."""
    return from_low_bits(np.frombuffer(raw, dtype=dtype.storage), dtype).tobytes()


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
        part = dtype.part
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
