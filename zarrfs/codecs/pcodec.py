"""`numcodecs.pcodec` (array->bytes, as zarr-python 3 and zarrs have it), through numcodecs'
PCodec over the pcodec package. Complex types are their real and imaginary parts, as zarrs
encodes them; numcodecs itself has no complex types."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from ..errors import MetadataError
from ..formats.description import CodecSpec
from .base import (
    ArrayBytesCodec,
    BytesLike,
    ChunkSpec,
    CodecError,
    check_config_keys,
    config_choice,
    config_int,
)

_TYPES = {"uint16", "uint32", "uint64", "int16", "int32", "int64", "float16", "float32", "float64",
          "complex64", "complex128", "complex_float16", "complex_float32", "complex_float64",
          "numpy.datetime64", "numpy.timedelta64"}
_KEYS = {"level", "mode_spec", "delta_spec", "paging_spec", "delta_encoding_order", "equal_pages_up_to"}


class PcodecCodec(ArrayBytesCodec):
    def __init__(self, chunk: ChunkSpec, config: dict[str, Any], member: str = "") -> None:
        self.chunk = chunk
        try:  # (numcodecs has no PCodec, or one that cannot work, without the pcodec package)
            self.codec = numcodecs.PCodec(**config)
        except (AttributeError, ImportError):
            raise MetadataError(member, "the numcodecs.pcodec codec needs pcodec: "
                                        "pip install 'zarrfs[codecs]'") from None
        complex_type = chunk.data_type.kind == "complex" or chunk.data_type.name.startswith("complex_")
        parts = 2 if complex_type else 1
        kind = "u" if chunk.data_type.storage.kind == "u" else "i"  # datetimes are int64
        if chunk.data_type.kind in ("float", "complex"):
            kind = "f"
        self.element = np.dtype(f"<{kind}{chunk.data_type.itemsize // parts}")

    @classmethod
    def from_spec(cls, spec: CodecSpec, chunk: ChunkSpec) -> PcodecCodec:
        check_config_keys(spec, _KEYS)
        if chunk.data_type.name not in _TYPES:
            raise MetadataError(spec.member, f"pcodec does not encode {chunk.data_type.name!r}")
        has_order = spec.configuration.get("delta_encoding_order") is not None
        config = {
            "level": config_int(spec, "level", 8, 0, 12),
            "mode_spec": config_choice(spec, "mode_spec", "auto", ("auto", "classic")),
            "delta_spec": config_choice(spec, "delta_spec", "auto",
                                        ("auto", "none", "try_consecutive", "try_lookback")),
            "paging_spec": config_choice(spec, "paging_spec", "equal_pages_up_to", ("equal_pages_up_to",)),
            "delta_encoding_order": config_int(spec, "delta_encoding_order", 0, 0, 7) if has_order else None,
            "equal_pages_up_to": config_int(spec, "equal_pages_up_to", 262144, 1, 1 << 31),
        }
        return cls(chunk, config, spec.member)

    def encode(self, chunk: np.ndarray) -> BytesLike:
        values = np.ascontiguousarray(chunk).reshape(-1).view(self.element)
        return bytes(self.codec.encode(values))

    def decode(self, data: BytesLike) -> np.ndarray:
        try:
            values = np.asarray(self.codec.decode(bytes(data)))
        except (RuntimeError, ValueError, TypeError) as e:
            raise CodecError(f"pcodec: {e}") from None
        if values.nbytes != self.chunk.nbytes:
            raise CodecError(f"pcodec: decoded {values.nbytes} bytes, a chunk has {self.chunk.nbytes}")
        return values.view(self.chunk.data_type.storage).reshape(self.chunk.shape)
