"""Zarr v3, v2 and v1 metadata -> one format-neutral `ArrayDescription`; node discovery."""

from .children import GroupChildren, children_of
from .creation import described_v3_array
from .description import ArrayDescription, ChunkKeyEncoding, CodecSpec, is_index_text
from .dtypes import (
    CORE_TYPES,
    DataType,
    element_name,
    fill_value_to_json,
    from_low_bits,
    parse_user_fill_value,
)
from .layout import auto_chunks
from .nodes import NodeMetadata, consolidated_children, discover, join_path
from .registry import consolidated_file
from .variable import describe_variable

__all__ = [
    "CORE_TYPES",
    "ArrayDescription",
    "ChunkKeyEncoding",
    "CodecSpec",
    "DataType",
    "GroupChildren",
    "NodeMetadata",
    "auto_chunks",
    "children_of",
    "consolidated_children",
    "consolidated_file",
    "describe_variable",
    "described_v3_array",
    "discover",
    "element_name",
    "fill_value_to_json",
    "from_low_bits",
    "is_index_text",
    "join_path",
    "parse_user_fill_value",
]
