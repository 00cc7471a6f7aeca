"""The layout of a new array, whatever its format: the chunk shape chosen when none is given,
and the compressor and level a `codec` text names.

The chunk rule (`auto_chunks`) is TensorStore's and zarr-python's idea: chunks of about
`TARGET_CHUNK_BYTES`, made of whole rows of the last dimensions first, so that reading a row
of the array touches one chunk, and reading `data` in order touches chunks one after another.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import MetadataError

TARGET_CHUNK_BYTES = 1 << 20
CODEC_NAMES = ("zstd", "gzip", "blosc", "none")
_DEFAULT_LEVELS = {"zstd": 3, "gzip": 6, "blosc": 5}


def auto_chunks(shape: Sequence[int], itemsize: int, target: int = TARGET_CHUNK_BYTES) -> tuple[int, ...]:
    """A chunk shape of about `target` bytes: whole extents of the last dimensions while they
    fit, then as many rows of the next as fit (at least one), then 1."""
    chunks = [1] * len(shape)
    room = max(1, target // max(1, itemsize))  # elements a chunk may still hold
    for dim in reversed(range(len(shape))):
        extent = max(1, shape[dim])
        if extent <= room:
            chunks[dim] = extent
            room //= extent
            continue
        chunks[dim] = max(1, room)
        break
    return tuple(chunks)


def check_codec(text: str) -> str:
    """`zstd`, `zstd:LEVEL`, `gzip[:LEVEL]`, `blosc[:LEVEL]` or `none`; ValueError otherwise."""
    name, _, level = text.partition(":")
    if name not in CODEC_NAMES or (level and (name == "none" or not level.isdigit())):
        raise ValueError(text)
    return text


def new_layout(shape: Sequence[int], itemsize: int, chunks: Sequence[int] | None,
               codec: str) -> tuple[tuple[int, ...], str, int]:
    """(chunk shape, compressor name, level) of a new array: `chunks` None: `auto_chunks`;
    `codec` as `check_codec` takes it. MetadataError when `chunks` does not fit the shape."""
    chunk_shape = tuple(chunks) if chunks is not None else auto_chunks(shape, itemsize)
    if len(chunk_shape) != len(shape) or min(chunk_shape, default=1) < 1:
        raise MetadataError("chunks", f"{list(chunk_shape)} does not fit an array of shape {list(shape)}")
    name, _, level = check_codec(codec).partition(":")
    return chunk_shape, name, int(level) if level else _DEFAULT_LEVELS.get(name, 0)
