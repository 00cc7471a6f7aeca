"""The extended attributes of array and group directories (and of `data`): shape, data type,
chunking, fill value, dimension names and attributes, read-only, as `user.zarr.*`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..formats import ArrayDescription, element_name, fill_value_to_json

PREFIX = "user.zarr."


def array_attributes(description: ArrayDescription, file_dtype: np.dtype[Any],
                     inner_chunks: tuple[int, ...] | None) -> dict[str, bytes]:
    dtype = element_name(description.data_type, file_dtype)
    names = None if description.dimension_names is None else list(description.dimension_names)
    found = {
        "shape": _dims(description.shape),
        "dtype": dtype,
        "chunks": _dims(description.chunk_shape) if description.rectilinear is None
        else json.dumps(description.rectilinear.to_json()["configuration"]["chunk_shapes"]),
        "fill_value": json.dumps(fill_value_to_json(description.fill_value, description.data_type)),
        "dimension_names": json.dumps(names),
        "attributes": json.dumps(dict(description.attributes)),
    }
    if inner_chunks is not None:
        found["inner_chunks"] = _dims(inner_chunks)
    return {PREFIX + name: value.encode() for name, value in found.items()}


def group_attributes(attributes: Mapping[str, Any]) -> dict[str, bytes]:
    return {PREFIX + "attributes": json.dumps(dict(attributes)).encode()}


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))
