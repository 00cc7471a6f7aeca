"""`zarrfs info` on a group: one line per node of the hierarchy."""

from __future__ import annotations

from .codecs import ChunkSpec, Pipeline, ShardingCodec
from .errors import ZarrfsError
from .formats import NodeMetadata, children_of, discover
from .store import Store


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
    from .cli import codec_text, dims

    try:
        meta = node.describe()
        pipeline = Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))
    except ZarrfsError as e:
        return f"metadata only: {e}"
    chunks = f"chunks {dims(meta.chunk_shape)}"
    if isinstance(pipeline.array_to_bytes, ShardingCodec):
        chunks = f"shards {dims(meta.chunk_shape)} of chunks {dims(pipeline.array_to_bytes.inner_shape)}"
    codecs = " -> ".join(codec_text(c) for c in meta.codecs)
    return f"shape {dims(meta.shape)}, {meta.data_type.name}, {chunks}, codecs {codecs}"
