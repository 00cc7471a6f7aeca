"""Zarr v3, v2 and v1 metadata -> one format-neutral `ArrayDescription`; node discovery."""

from .children import GroupChildren, children_of
from .description import ArrayDescription, ChunkKeyEncoding, CodecSpec, is_index_text
from .dtypes import (
    CORE_TYPES,
    DataType,
    element_name,
    fill_value_to_json,
    from_low_bits,
    parse_user_fill_value,
)
from .nodes import NodeMetadata, consolidated_children, discover

__all__ = [
    "CORE_TYPES",
    "ArrayDescription",
    "ChunkKeyEncoding",
    "CodecSpec",
    "DataType",
    "GroupChildren",
    "NodeMetadata",
    "children_of",
    "consolidated_children",
    "discover",
    "element_name",
    "fill_value_to_json",
    "from_low_bits",
    "is_index_text",
    "parse_user_fill_value",
]
