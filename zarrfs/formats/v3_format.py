"""Zarr v3 as a `Format`: one `zarr.json` per node (attributes a member of it), consolidated
metadata inline in a group's `zarr.json` (`consolidated_metadata`, keyed by relative path),
documents written as zarr-python 3 writes them. Array documents are read in `v3`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import MetadataError
from .description import ArrayDescription, ChunkKeyEncoding, load_json_object
from .dtypes import CORE_TYPES, DataType, fill_value_to_json
from .format import (
    ConsolidatedChange,
    Format,
    Get,
    NodeMetadata,
    apply_change,
    join_path,
    mapping_or_empty,
)
from .layout import CodecChoice, new_layout
from .v3 import METADATA_KEY, metadata_from_json, resized_grid

_NO_NEW_TYPES = ("int4", "bfloat16")  # (no .npy stream carries them)


class V3Format(Format):
    def discover(self, get: Get, path: str, *, consolidated_first: bool) -> NodeMetadata | None:
        raw = get(join_path(path, METADATA_KEY))
        return None if raw is None else self._node(path, raw)

    def _node(self, path: str, raw: bytes) -> NodeMetadata:
        try:
            doc = load_json_object(raw, METADATA_KEY)
        except MetadataError:  # shown as an array that cannot be opened, saying why
            return NodeMetadata(path, "array", self, (METADATA_KEY,), {}, {METADATA_KEY: raw})
        kind = doc.get("node_type")
        if kind not in ("group", "array"):
            raise MetadataError("node_type", f"expected 'group' or 'array', got {kind!r}")
        return NodeMetadata(path, str(kind), self, (METADATA_KEY,), {METADATA_KEY: doc},
                            {METADATA_KEY: raw}, _consolidated(doc))

    def listed_node(self, path: str, documents: Mapping[str, Any]) -> NodeMetadata | None:
        doc = documents.get(METADATA_KEY)
        kind = doc.get("node_type") if isinstance(doc, Mapping) else None
        if kind not in ("group", "array"):
            return None
        return NodeMetadata(path, str(kind), self, (METADATA_KEY,), dict(documents))

    def attributes(self, documents: Mapping[str, Any]) -> Mapping[str, Any]:
        return mapping_or_empty(documents.get(METADATA_KEY, {}).get("attributes", {}))

    def describe(self, node: NodeMetadata) -> ArrayDescription:
        return metadata_from_json(node.document(METADATA_KEY))

    def dump(self, doc: Any) -> bytes:
        """In order, with 2 spaces, as zarr-python 3 writes."""
        return json.dumps(doc, indent=2).encode()

    def with_attributes(self, stored: bytes | None, attributes: Mapping[str, Any]) -> bytes:
        """The node's zarr.json with only its `attributes` member replaced."""
        if stored is None:
            raise MetadataError(METADATA_KEY, "missing")
        doc = load_json_object(stored, METADATA_KEY)
        doc["attributes"] = dict(attributes)
        return self.dump(doc)

    def new_group_files(self) -> dict[str, bytes]:
        return {METADATA_KEY: self.dump({"attributes": {}, "zarr_format": 3, "node_type": "group"})}

    def new_array_files(self, shape: Sequence[int], dtype: np.dtype[Any],
                        chunks: Sequence[int] | None, codec: str) -> dict[str, bytes]:
        data_type = _new_data_type(dtype)
        chunk_shape, choice = new_layout(shape, data_type.itemsize, chunks, codec)
        fill = fill_value_to_json(bytes(data_type.itemsize), data_type)
        return {METADATA_KEY: self.dump(new_array_document(shape, data_type, chunk_shape, choice, fill))}

    def resized_document(self, raw: bytes, shape: Sequence[int]) -> bytes:
        doc = load_json_object(raw, METADATA_KEY)
        resized_grid(doc, list(shape))
        return self.dump(doc)

    def resize_listed(self, files: dict[str, Any], shape: Sequence[int]) -> None:
        if isinstance(files.get(METADATA_KEY), dict):
            doc = dict(files[METADATA_KEY])
            resized_grid(doc, list(shape))
            files[METADATA_KEY] = doc

    def edit_consolidated(self, stored: bytes, change: ConsolidatedChange) -> bytes | None:
        doc = load_json_object(stored, METADATA_KEY)
        block = doc.get("consolidated_metadata")
        if not isinstance(block, dict) or not isinstance(block.get("metadata"), dict):
            return None
        nodes = {path: {METADATA_KEY: document} for path, document in block["metadata"].items()}
        if not apply_change(nodes, change):
            return None
        block["metadata"] = {path: files[METADATA_KEY] for path, files in nodes.items()
                             if METADATA_KEY in files}
        return self.dump(doc)

    def list_attributes(self, files: dict[str, Any], attributes: Mapping[str, Any]) -> None:
        # (An entry that is not a document is not a node, and is left as it is: see resize_listed.)
        if isinstance(files.get(METADATA_KEY), dict):
            files[METADATA_KEY] = {**files[METADATA_KEY], "attributes": dict(attributes)}


FORMAT = V3Format(zarr_format=3, metadata_file=METADATA_KEY, attributes_file=METADATA_KEY,
                  group_file=METADATA_KEY, consolidated_file=METADATA_KEY, child_formats=(3,),
                  listed_files=(METADATA_KEY,),
                  reserved_names=frozenset({METADATA_KEY, "c"}))  # ("c": the default chunk prefix)


def _consolidated(doc: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]] | None:
    block = doc.get("consolidated_metadata")
    if not isinstance(block, Mapping) or not isinstance(block.get("metadata"), Mapping):
        return None
    return {str(k): {METADATA_KEY: v} for k, v in block["metadata"].items()}


def _new_data_type(dtype: np.dtype[Any]) -> DataType:
    native = dtype.newbyteorder("=")
    if dtype.fields is None and dtype.subdtype is None and dtype.kind in "biufcMm":
        for name, known in CORE_TYPES.items():
            if known.storage == native and name not in _NO_NEW_TYPES:
                return known
        if dtype.kind in "Mm":
            name = "numpy.datetime64" if dtype.kind == "M" else "numpy.timedelta64"
            return DataType.from_numpy(name, native)
    raise MetadataError("dtype", f"{dtype.str} cannot be stored in a Zarr v3 array")


def new_array_document(shape: Sequence[int], data_type: DataType, chunks: Sequence[int],
                       codec: CodecChoice, fill_value: Any, *, shards: Sequence[int] | None = None,
                       dimension_names: Sequence[str] | None = None,
                       key_separator: str = "/") -> dict[str, Any]:
    """The document of every new v3 array (`zarrfs create`, `zarrfs import`, an array made
    through a mount): `chunks` are inner chunks when `shards` are given; `fill_value` as JSON."""
    data_type_json: Any = data_type.name
    if data_type.kind == "datetime":
        unit, scale = np.datetime_data(data_type.storage)
        data_type_json = {"name": data_type.name, "configuration": {"unit": unit, "scale_factor": scale}}
    codecs = [_bytes_codec(data_type.itemsize), *_compressor(codec, data_type.itemsize)]
    if shards:
        codecs = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(chunks), "codecs": codecs,
            "index_codecs": [_bytes_codec(8), {"name": "crc32c"}], "index_location": "end"}}]
    doc = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": data_type_json,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shards or chunks)}},
           "chunk_key_encoding": ChunkKeyEncoding("default", key_separator).to_json(),
           "fill_value": fill_value, "codecs": codecs, "attributes": {}}
    if dimension_names is not None:
        doc["dimension_names"] = list(dimension_names)
    return doc


def _bytes_codec(itemsize: int) -> dict[str, Any]:
    return {"name": "bytes"} if itemsize == 1 else {"name": "bytes", "configuration": {"endian": "little"}}


def _compressor(codec: CodecChoice, itemsize: int) -> list[dict[str, Any]]:
    if codec.name == "zstd":
        return [{"name": "zstd", "configuration": {"level": codec.level, "checksum": False}}]
    if codec.name == "gzip":
        return [{"name": "gzip", "configuration": {"level": codec.level}}]
    if codec.name == "blosc":
        return [{"name": "blosc", "configuration": {
            "cname": codec.cname, "clevel": codec.level,
            "shuffle": "bitshuffle" if codec.shuffles_bits(itemsize) else "shuffle",
            "typesize": itemsize, "blocksize": 0}}]
    return []
