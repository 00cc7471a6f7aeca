"""Codecs that change a chunk's shape, never the order of its elements: the registry's
`reshape` and zarrs' `zarrs.squeeze` (drop every axis of length 1; all of them leave one)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayArrayCodec, ChunkSpec, check_config_keys


class ReshapeCodec(ArrayArrayCodec):
    def __init__(self, chunk: ChunkSpec, shape: tuple[int, ...]) -> None:
        self.chunk = chunk
        self.shape = shape

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> ReshapeCodec:
        check_config_keys(spec, {"shape"})
        return cls(chunk, _output_shape(spec.configuration.get("shape"), chunk.shape, spec.option("shape")))

    @classmethod
    def squeeze(cls, spec: CodecSpec, chunk: ChunkSpec) -> ReshapeCodec:
        check_config_keys(spec, set())
        return cls(chunk, tuple(n for n in chunk.shape if n != 1) or (1,))

    def output_spec(self) -> ChunkSpec:
        return ChunkSpec(self.shape, self.chunk.data_type, self.chunk.fill_value)

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(chunk).reshape(self.shape)

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(chunk).reshape(self.chunk.shape)


def _output_shape(value: Any, shape: tuple[int, ...], member: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise MetadataError(member, f"expected a list of sizes, input axes or -1, got {value!r}")
    sizes: list[int] = []
    axes_so_far: list[int] = []
    for position, item in enumerate(value):
        if _is_int(item) and (item > 0 or item == -1):
            sizes.append(item)
        elif isinstance(item, list) and all(_is_int(a) and 0 <= a < len(shape) for a in item):
            after = not (item and axes_so_far and item[0] <= axes_so_far[-1])
            increasing = item == sorted(set(item)) and after
            if not increasing:
                raise MetadataError(f"{member}[{position}]", "input axes must increase strictly")
            # The axes' coordinates must be the output axis' raveled index: what comes before
            # them holds as many elements on both sides.
            if item and -1 not in sizes and math.prod(sizes) != math.prod(shape[: item[0]]):
                raise MetadataError(f"{member}[{position}]", "does not line up with the input axes")
            axes_so_far += item
            sizes.append(math.prod(shape[a] for a in item))
        else:
            raise MetadataError(f"{member}[{position}]", f"expected a size, input axes or -1, got {item!r}")
    return _resolve(sizes, math.prod(shape), member)


def _resolve(sizes: list[int], total: int, member: str) -> tuple[int, ...]:
    if sizes.count(-1) > 1:
        raise MetadataError(member, "-1 may appear only once")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or total % known:
            raise MetadataError(member, f"no size for -1 gives {total} elements")
        sizes = [total // known if s == -1 else s for s in sizes]
    if math.prod(sizes) != total:
        raise MetadataError(member, f"{sizes} holds {math.prod(sizes)} elements, a chunk has {total}")
    return tuple(sizes)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
