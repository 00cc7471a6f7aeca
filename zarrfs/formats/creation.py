"""New arrays: their metadata files in the format of the group they are made in
(`new_array_files`, each format's `Format.new_array_files`, laid out by `layout`), and the
description of one made by `zarrfs create` or `zarrfs import` (`described_v3_array`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ZarrfsError
from . import v3
from .description import ArrayDescription
from .dtypes import CORE_TYPES, fill_value_to_json, parse_user_fill_value
from .layout import auto_chunks, check_codec, parse_codec
from .registry import FORMATS
from .v3_format import new_array_document

__all__ = ["auto_chunks", "check_codec", "described_v3_array",
           "new_array_files"]


def new_array_files(zarr_format: int, shape: Sequence[int], dtype: np.dtype[Any],
                    chunks: Sequence[int] | None = None, codec: str = "zstd") -> dict[str, bytes]:
    """The metadata files of a new array of `dtype` (any byte order: stored little-endian),
    filled with zeros; `chunks` None: `layout.auto_chunks`. MetadataError when the format
    cannot hold the type, or `chunks` does not fit the shape."""
    return FORMATS[zarr_format].new_array_files(shape, dtype, chunks, codec)


def described_v3_array(shape: Sequence[int], data_type_name: str, chunks: Sequence[int], *,
                       shards: Sequence[int] | None = None, codec: str = "zstd:3", fill_value: str = "0",
                       dimension_names: Sequence[str] | None = None,
                       key_separator: str = "/") -> ArrayDescription:
    """A new Zarr v3 array as `zarrfs create` and `zarrfs import` make it (the document of
    `v3_format.new_array_document`, as an array made through a mount): `codec` as
    `layout.parse_codec` takes it; `fill_value` as the user wrote it. ZarrfsError when the
    codec text is wrong, MetadataError when the rest does not make an array."""
    data_type = CORE_TYPES[data_type_name]
    try:
        choice = parse_codec(codec)
    except ValueError as e:
        raise ZarrfsError(f"--{e}") from None
    fill = fill_value_to_json(parse_user_fill_value(fill_value, data_type), data_type)
    return v3.metadata_from_json(new_array_document(
        shape, data_type, chunks, choice, fill, shards=shards, dimension_names=dimension_names,
        key_separator=key_separator))
