"""The registry's `scale_offset` codec (zarr-python 3.2+): `(x - offset) * scale` on encode,
`x / scale + offset` on decode, in the arithmetic of the chunk's own type. An integer result
that does not fit, or an integer division that is not exact, is an error, as the registry
asks: the codec never wraps or rounds silently."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from ..formats.dtypes import parse_fill_value
from .base import ArrayArrayCodec, ChunkSpec, CodecError, check_config_keys


class ScaleOffsetCodec(ArrayArrayCodec):
    def __init__(self, chunk: ChunkSpec, offset: np.generic, scale: np.generic) -> None:
        self.chunk = chunk
        self.offset = offset
        self.scale = scale
        self.integer = chunk.data_type.kind == "int"
        self._output = ChunkSpec(chunk.shape, chunk.data_type, self.encode(self._fill()).tobytes())

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ScaleOffsetCodec:
        check_config_keys(spec, {"offset", "scale"})
        if chunk.data_type.kind not in ("int", "float"):
            raise MetadataError(spec.member, f"scale_offset is not defined for {chunk.data_type.name!r}")
        scalars = [_scalar(spec, key, default, chunk) for key, default in (("offset", 0), ("scale", 1))]
        if scalars[1] == 0:
            raise MetadataError(spec.option("scale"), "must not be 0")
        try:
            return cls(chunk, scalars[0], scalars[1])
        except CodecError as e:
            raise MetadataError(spec.member, f"the fill value: {e}") from None

    def _fill(self) -> np.ndarray:
        return np.frombuffer(self.chunk.fill_value, dtype=self.chunk.data_type.storage)

    def output_spec(self) -> ChunkSpec:
        return self._output

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        if self.integer:
            exact = (chunk.astype(object) - int(self.offset)) * int(self.scale)
            return self._fit(exact, chunk.shape)
        with np.errstate(over="ignore"):
            encoded: np.ndarray = (chunk - self.offset) * self.scale
        return encoded

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        if self.integer:
            exact = chunk.astype(object)
            quotient, remainder = exact // int(self.scale), exact % int(self.scale)
            if np.any(remainder != 0):
                raise CodecError("scale_offset: a stored value is not a multiple of the scale")
            return self._fit(quotient + int(self.offset), chunk.shape)
        with np.errstate(over="ignore"):
            decoded: np.ndarray = chunk / self.scale + self.offset
        return decoded.astype(self.chunk.data_type.storage, copy=False)

    def _fit(self, exact: Any, shape: tuple[int, ...]) -> np.ndarray:
        low, high = self.chunk.data_type.int_range or (0, 0)
        flat = np.asarray(exact).reshape(-1)
        if flat.size and (min(flat) < low or max(flat) > high):
            raise CodecError(f"scale_offset: a value leaves the range of {self.chunk.data_type.name}")
        return np.asarray(exact, dtype=self.chunk.data_type.storage).reshape(shape)


def _scalar(spec: CodecSpec, key: str, default: int, chunk: ChunkSpec) -> np.generic:
    value = spec.configuration.get(key, default)
    bits = parse_fill_value(value, chunk.data_type, spec.option(key))
    scalar: np.generic = np.frombuffer(bits, dtype=chunk.data_type.storage)[0]
    return scalar
