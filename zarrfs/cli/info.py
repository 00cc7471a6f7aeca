"""`zarrfs info`: one line per node of a group's hierarchy, or the rows describing an array."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..array import ZarrArray
from ..codecs import ChunkSpec, Pipeline, ShardingCodec
from ..errors import ZarrfsError
from ..formats import (
    CodecSpec,
    NodeMetadata,
    children_of,
    describe_variable,
    discover,
    element_name,
    fill_value_to_json,
)
from ..store import Store


def describe_tree(store: Store) -> list[str] | None:
    """The lines describing the group at the root of `store`, or None when it is no group."""
    root = discover(store.get, "")
    if root is None or root.kind != "group":
        return None
    lines: list[str] = []
    _walk(store, root, lines)
    return lines


def _walk(store: Store, node: NodeMetadata, lines: list[str]) -> None:
    path = "/" + node.path
    if node.kind == "group":
        lines.append(f"{path:<24} group (zarr v{node.zarr_format})")
        for child in sorted(children_of(node, store.get, store.list_dirs).values(), key=lambda n: n.path):
            _walk(store, child, lines)
        return
    lines.append(f"{path:<24} array (zarr v{node.zarr_format}): {describe_array(node)}")


def describe_array(node: NodeMetadata) -> str:
    try:
        meta = node.describe()
        pipeline = Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))
    except ZarrfsError as e:
        try:
            text = describe_variable(node)
        except ZarrfsError:
            return f"metadata only: {e}"
        codecs = " -> ".join(codec_text(c) for c in text.codecs)
        shape, chunks = dims(text.grid.shape), dims(text.grid.chunk_shape)
        shown = "data.txt and data.h5" if text.kind == "string" else "data.txt only"  # (no `data`)
        return f"shape {shape}, {text.kind} ({shown}), chunks {chunks}, codecs {codecs}"
    edges = dims(meta.chunk_shape)
    if meta.rectilinear is not None:
        edges = f"rectilinear {meta.rectilinear.edges_text()}"
    chunks = f"chunks {edges}"
    if isinstance(pipeline.array_to_bytes, ShardingCodec):
        chunks = f"shards {edges} of chunks {dims(pipeline.array_to_bytes.inner_shape)}"
    codecs = " -> ".join(codec_text(c) for c in meta.codecs)
    return f"shape {dims(meta.shape)}, {meta.data_type.name}, {chunks}, codecs {codecs}"


def describe(array: ZarrArray) -> list[tuple[str, str]]:
    """An opened array, row by row (name, value)."""
    meta = array.metadata
    sharding = array.pipeline.array_to_bytes
    sharded = isinstance(sharding, ShardingCodec)
    rows = [
        ("zarr format", str(meta.zarr_format)),
        ("shape", dims(meta.shape)),
        ("data type", meta.data_type.name),
        ("chunk shape", dims(meta.chunk_shape) + (" (shards)" if sharded else "")),
    ]
    if meta.rectilinear is not None:
        edges = f"rectilinear {meta.rectilinear.edges_text()}"
        rows[-1] = ("chunk edges", edges + (" (shards)" if sharded else ""))
    if isinstance(sharding, ShardingCodec):
        rows.append(("inner chunk shape", dims(sharding.inner_shape)))
    rows += [
        ("codecs", " -> ".join(codec_text(c) for c in meta.codecs)),
        ("fill value", str(fill_value_to_json(meta.fill_value, meta.data_type))),
        ("dimension names", ", ".join(str(n) for n in meta.dimension_names) if meta.dimension_names else "-"),
        ("chunk key encoding", f"{meta.chunk_key_encoding.name} ({meta.chunk_key_encoding.separator!r})"),
        ("flat view element", element_name(meta.data_type, meta.data_type.storage.newbyteorder("<"))),
        ("flat view size", f"{meta.nbytes} bytes"),
        ("stored chunks", f"{array.stored_chunk_count()} of {math.prod(meta.grid_shape)}"),
    ]
    return rows


def dims(shape: Sequence[int]) -> str:
    return " x ".join(map(str, shape)) if shape else "() (scalar)"


def codec_text(spec: CodecSpec) -> str:
    config = spec.configuration
    if spec.name == "sharding_indexed":
        inner = " -> ".join(codec_text(CodecSpec(c["name"], c.get("configuration", {}), ""))
                            for c in config.get("codecs", []))
        return f"sharding_indexed(index at {config.get('index_location', 'end')}; {inner})"
    if not config:
        return spec.name
    return f"{spec.name}(" + ", ".join(f"{k}={v}" for k, v in config.items()) + ")"
