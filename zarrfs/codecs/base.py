"""The three kinds of codec (array->array, array->bytes, bytes->bytes) and what they share.

A codec is built for one chunk spec (the shape and type of what it encodes), so `decode`
knows exactly what it must produce and can refuse anything else. Codecs are synchronous:
the fuse layer runs them in worker threads.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MetadataError, ZarrfsError
from ..formats.description import CodecSpec
from ..formats.dtypes import DataType

# What flows between bytes codecs: decoders fill preallocated numpy buffers and hand out views.
BytesLike = bytes | bytearray | memoryview


class CodecError(ZarrfsError, ValueError):
    """Stored bytes cannot be decoded. The array layer adds the store key."""


@dataclass(frozen=True)
class ChunkSpec:
    """What a codec encodes: a chunk's shape, data type and fill value bits."""

    shape: tuple[int, ...]
    data_type: DataType
    fill_value: bytes

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.data_type.itemsize

    def fill_array(self) -> np.ndarray:
        """A new writable chunk holding only the fill value."""
        out = np.empty(self.shape, dtype=self.data_type.storage)
        out[...] = np.frombuffer(self.fill_value, dtype=self.data_type.storage)[0]  # records too
        return out


class ArrayArrayCodec(ABC):
    @abstractmethod
    def output_spec(self) -> ChunkSpec: ...

    @abstractmethod
    def encode(self, chunk: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def decode(self, chunk: np.ndarray) -> np.ndarray: ...


class ArrayBytesCodec(ABC):
    @abstractmethod
    def encode(self, chunk: np.ndarray) -> BytesLike | None:
        """The stored bytes, or None when nothing need be stored (all fill value)."""

    @abstractmethod
    def decode(self, data: BytesLike) -> np.ndarray: ...

    def encoded_size(self) -> int | None:
        """The exact encoded size when it does not depend on the data."""
        return None


class BytesBytesCodec(ABC):
    @abstractmethod
    def encode(self, data: BytesLike) -> BytesLike: ...

    @abstractmethod
    def decode(self, data: BytesLike, exact_size: int | None, limit: int) -> BytesLike:
        """Decode; the result must be `exact_size` bytes when given, and never over `limit`."""

    def encoded_size(self, decoded_size: int) -> int | None:
        return None


def config_int(spec: CodecSpec, key: str, default: int | None, lo: int, hi: int) -> int:
    value: Any = spec.configuration.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise MetadataError(spec.option(key), f"expected an integer from {lo} to {hi}, got {value!r}")
    return value


def config_choice(spec: CodecSpec, key: str, default: str | None, choices: tuple[str, ...]) -> str:
    value = spec.configuration.get(key, default)
    if value not in choices:
        raise MetadataError(spec.option(key), f"expected one of {list(choices)}, got {value!r}")
    assert isinstance(value, str)
    return value


def check_config_keys(spec: CodecSpec, allowed: set[str]) -> None:
    unknown = set(spec.configuration) - allowed
    if unknown:
        raise MetadataError(spec.option(sorted(unknown)[0]), "unknown configuration member")


def check_limit(size: int, exact_size: int | None, limit: int) -> None:
    if exact_size is not None and size != exact_size:
        raise CodecError(f"decoded to {size} bytes, expected {exact_size}")
    if size > limit:
        raise CodecError(f"decoded size {size} exceeds the limit of {limit} bytes")
