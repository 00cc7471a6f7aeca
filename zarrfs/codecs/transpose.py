"""The `transpose` codec: permute a chunk's axes before the bytes are written."""

from __future__ import annotations

import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import ArrayArrayCodec, ChunkSpec, check_config_keys


class TransposeCodec(ArrayArrayCodec):
    def __init__(self, chunk: ChunkSpec, order: tuple[int, ...]) -> None:
        self.chunk = chunk
        self.order = order
        self.inverse = tuple(int(i) for i in np.argsort(order))

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> TransposeCodec:
        check_config_keys(spec, {"order"})
        rank = len(chunk.shape)
        order = spec.configuration.get("order")
        # TensorStore accepts "C" and "F" for the identity and the reversal.
        if order == "C":
            order = list(range(rank))
        elif order == "F":
            order = list(range(rank))[::-1]
        if (
            not isinstance(order, list)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in order)
            or sorted(order) != list(range(rank))
        ):
            raise MetadataError(
                spec.option("order"), f"expected a permutation of 0..{rank - 1}, got {order!r}"
            )
        return cls(chunk, tuple(order))

    def output_spec(self) -> ChunkSpec:
        shape = tuple(self.chunk.shape[i] for i in self.order)
        return ChunkSpec(shape, self.chunk.data_type, self.chunk.fill_value)

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        return chunk.transpose(self.order)

    def decode(self, chunk: np.ndarray) -> np.ndarray:
        return chunk.transpose(self.inverse)
