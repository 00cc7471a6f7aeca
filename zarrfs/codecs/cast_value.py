"""The registry's `cast_value` codec (zarr-python 3.2+): each value converted to another
integer or float type by value, not by bits. In order: the `scalar_map`, then rounding
(`rounding`, nearest-even unless said), then what is out of the target's range (`clamp`,
`wrap` for integers, or an error when `out_of_range` is not given). NaN and infinities
into an integer type are errors unless mapped. Decoding is the same procedure back.

Rounding other than nearest-even is for casts to integers; a float target rounds to
nearest-even (numpy's cast), so any other rounding into a float type is refused when the
array is opened rather than written differently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from ..formats.dtypes import DataType, parse_fill_value
from ..formats.v3 import parse_data_type
from .base import ArrayArrayCodec, ChunkSpec, CodecError, check_config_keys, config_choice

_ROUNDINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "nearest-even": np.rint,
    "towards-zero": np.trunc,
    "towards-positive": np.ceil,
    "towards-negative": np.floor,
    "nearest-away": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
}
_NUMERIC = ("int", "float")
ScalarMap = list[tuple[bytes, bytes]]


class CastValueCodec(ArrayArrayCodec):
    def __init__(self, chunk: ChunkSpec, target: DataType, rounding: str, out_of_range: str | None,
                 maps: tuple[ScalarMap, ScalarMap]) -> None:
        self.chunk = chunk
        self.target = target
        self.rounding = rounding
        self.out_of_range = out_of_range
        self.maps = maps
        fill = np.frombuffer(chunk.fill_value, dtype=chunk.data_type.storage)
        encoded_fill = self.encode(fill)
        if self.decode_values(encoded_fill).tobytes() != chunk.fill_value:
            raise CodecError("the fill value does not survive the cast and back")
        self._output = ChunkSpec(chunk.shape, target, encoded_fill.tobytes())

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> CastValueCodec:
        check_config_keys(spec, {"data_type", "rounding", "out_of_range", "scalar_map"})
        target = parse_data_type(spec.configuration.get("data_type"), spec.option("data_type"))
        for data_type, member in ((chunk.data_type, spec.member), (target, spec.option("data_type"))):
            if data_type.kind not in _NUMERIC:
                raise MetadataError(member, f"cast_value is not defined for {data_type.name!r}")
        rounding = config_choice(spec, "rounding", "nearest-even", tuple(_ROUNDINGS))
        if rounding != "nearest-even" and _rounds_to_float(chunk.data_type, target):
            raise MetadataError(spec.option("rounding"), f"{rounding!r} is supported only where no value"
                                " is rounded to a float type (numpy's casts round to nearest-even)")
        out_of_range = spec.configuration.get("out_of_range")
        if out_of_range not in (None, "clamp", "wrap") or (out_of_range == "wrap" and target.kind != "int"):
            raise MetadataError(spec.option("out_of_range"), f"expected 'clamp' or, for integer types, 'wrap'"
                                f", got {out_of_range!r}")
        maps = _scalar_maps(spec, chunk.data_type, target)
        try:
            return cls(chunk, target, rounding, out_of_range, maps)
        except CodecError as e:
            raise MetadataError(spec.member, str(e)) from None

    def output_spec(self) -> ChunkSpec:
        return self._output

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        return self._cast(chunk, self.chunk.data_type, self.target, self.maps[0])

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        return self.decode_values(chunk)

    def decode_values(self, chunk: np.ndarray) -> np.ndarray:
        return self._cast(chunk, self.target, self.chunk.data_type, self.maps[1])

    def _cast(self, values: np.ndarray, source: DataType, target: DataType, mapping: ScalarMap) -> np.ndarray:
        out = np.empty(values.shape, dtype=target.storage)
        mapped = np.zeros(values.shape, dtype=bool)
        values = np.ascontiguousarray(values)
        raw = values.view(np.dtype(f"V{source.itemsize}"))
        for before, after in mapping:
            key = np.frombuffer(before, dtype=source.storage)
            nan_key = source.kind == "float" and bool(np.isnan(key[0]))
            hit = np.isnan(values) if nan_key else raw == key.view(raw.dtype)[0]
            out[hit] = np.frombuffer(after, dtype=target.storage)[0]
            mapped |= hit
        rest = values[~mapped]
        out[~mapped] = _to_int(rest, target, self) if target.kind == "int" else _to_float(rest, target, self)
        return out


def _rounds_to_float(source: DataType, target: DataType) -> bool:
    """Whether a cast either way may round a value to a float type: into a float target, or
    back from an integer target wider than the float source's mantissa."""
    if target.kind == "float":
        return True
    if source.kind != "float":
        return False
    low, high = target.int_range or (0, 0)
    return max(high, -low).bit_length() > np.finfo(source.storage).nmant + 1


def _to_int(values: np.ndarray, target: DataType, codec: CastValueCodec) -> np.ndarray:
    low, high = target.int_range or (0, 0)
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)):
            raise CodecError(f"cast_value: NaN or infinity has no {target.name} value (no scalar_map entry)")
        values = _ROUNDINGS[codec.rounding](values.astype(np.float64))
        exact: Any = [int(v) for v in values.reshape(-1)]
    else:
        exact = values.reshape(-1).tolist()
    flat = np.array(exact, dtype=object)
    outside = (flat < low) | (flat > high) if flat.size else np.zeros(0, dtype=bool)
    if np.any(outside):
        if codec.out_of_range is None:
            raise CodecError(f"cast_value: a value leaves the range of {target.name}")
        if codec.out_of_range == "clamp":
            flat = np.clip(flat, low, high)
        else:
            span = high - low + 1
            flat = (flat - low) % span + low
    return flat.astype(target.storage).reshape(values.shape)


def _to_float(values: np.ndarray, target: DataType, codec: CastValueCodec) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        out: np.ndarray = values.astype(target.storage)
    overflowed = np.isinf(out) & ~np.isinf(values) if values.dtype.kind == "f" else np.isinf(out)
    if np.any(overflowed) and codec.out_of_range is None:
        raise CodecError(f"cast_value: a value leaves the range of {target.name}")
    return out


def _scalar_maps(spec: CodecSpec, source: DataType, target: DataType) -> tuple[ScalarMap, ScalarMap]:
    config = spec.configuration.get("scalar_map", {})
    member = spec.option("scalar_map")
    if not isinstance(config, dict) or set(config) - {"encode", "decode"}:
        raise MetadataError(member, f"expected an object with 'encode' and 'decode', got {config!r}")
    maps: list[ScalarMap] = []
    for direction, types in (("encode", (source, target)), ("decode", (target, source))):
        pairs = config.get(direction, [])
        where = f"{member}.{direction}"
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise MetadataError(where, f"expected a list of [from, to] pairs, got {pairs!r}")
        maps.append([(parse_fill_value(a, types[0], f"{where}[{i}][0]"),
                      parse_fill_value(b, types[1], f"{where}[{i}][1]")) for i, (a, b) in enumerate(pairs)])
    return maps[0], maps[1]
