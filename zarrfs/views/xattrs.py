"""The extended attributes of array and group directories (and of `data`): shape, data type,
chunking, fill value, dimension names and attributes, and the views shown beside them,
read-only, as `user.zarr.*`."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..formats import ArrayDescription, element_name, fill_value_to_json
from ..formats.description import VariableDescription

PREFIX = "user.zarr."


def array_attributes(description: ArrayDescription, file_dtype: np.dtype[Any],
                     inner_chunks: tuple[int, ...] | None) -> dict[str, bytes]:
    dtype = element_name(description.data_type, file_dtype)
    fill = fill_value_to_json(description.fill_value, description.data_type)
    found = _grid_attributes(description, dtype, fill)
    if inner_chunks is not None:
        found[PREFIX + "inner_chunks"] = _dims(inner_chunks).encode()
    return found


def variable_attributes(description: VariableDescription) -> dict[str, bytes]:
    """An array of strings or bytes (shown as data.txt): the data type is its kind, the fill
    its text (base64 for bytes, as Zarr v3 writes it)."""
    fill = description.fill
    fill_json = fill if isinstance(fill, str) else base64.b64encode(fill).decode()
    return _grid_attributes(description.grid, description.kind, fill_json)


def _grid_attributes(description: ArrayDescription, dtype: str, fill: Any) -> dict[str, bytes]:
    names = None if description.dimension_names is None else list(description.dimension_names)
    found = {
        "shape": _dims(description.shape),
        "dtype": dtype,
        "chunks": _dims(description.chunk_shape) if description.rectilinear is None
        else json.dumps(description.rectilinear.to_json()["configuration"]["chunk_shapes"]),
        "fill_value": json.dumps(fill),
        "dimension_names": json.dumps(names),
        "attributes": json.dumps(dict(description.attributes)),
    }
    return {PREFIX + name: value.encode() for name, value in found.items()}


def group_attributes(attributes: Mapping[str, Any]) -> dict[str, bytes]:
    return {PREFIX + "attributes": json.dumps(dict(attributes)).encode()}


def views_attribute(names: Sequence[str]) -> dict[str, bytes]:
    """The files a directory shows made from the data (`data` and the views `-o views=` picks;
    not its metadata files or `chunks/`), as a JSON list: what a script may open there."""
    return {PREFIX + "views": json.dumps(list(names)).encode()}


def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))
