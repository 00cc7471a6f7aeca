"""The layout of a new array, whatever its format: the chunk shape chosen when none is given,
and the compressor a `codec` text names (`parse_codec`: the one grammar of `zarrfs create
--codec`, `zarrfs import --codec` and the mount's `-o new_codec=`).

The chunk rule (`auto_chunks`) is TensorStore's and zarr-python's idea: chunks of about
`TARGET_CHUNK_BYTES`, made of whole rows of the last dimensions first, so that reading a row
of the array touches one chunk, and reading `data` in order touches chunks one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import MetadataError

TARGET_CHUNK_BYTES = 1 << 20
CODEC_NAMES = ("zstd", "gzip", "blosc", "none")
BLOSC_CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")
_LEVELS = {"zstd": (3, 22), "gzip": (6, 9), "blosc": (5, 9), "none": (0, 0)}  # (default, highest)
CODEC_GRAMMAR = "zstd[:LEVEL], gzip[:LEVEL], blosc[:CNAME][:LEVEL] or none"


@dataclass(frozen=True)
class CodecChoice:
    """The compressor of a new array, whatever its format."""

    name: str  # zstd, gzip, blosc or none
    level: int
    cname: str = "lz4"  # blosc's inner compressor

    def shuffles_bits(self, itemsize: int) -> bool:
        """blosc shuffles bits, not bytes, for 1-byte elements (a byte shuffle of them would
        change nothing)."""
        return itemsize == 1


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


def parse_codec(text: str) -> CodecChoice:
    """`zstd[:LEVEL]`, `gzip[:LEVEL]`, `blosc[:CNAME][:LEVEL]` or `none` (an empty LEVEL is the
    default); ValueError naming the grammar otherwise."""
    name, *parts = text.split(":")
    parts = [part for part in parts if part]
    cname = "lz4"
    if name == "blosc" and parts and not parts[0].isdigit():
        cname = parts.pop(0)
    wrong = name not in _LEVELS or cname not in BLOSC_CNAMES or len(parts) > (name != "none")
    if wrong or not all(part.isdigit() for part in parts):
        raise ValueError(f"codec {text!r}: expected {CODEC_GRAMMAR}")
    default, highest = _LEVELS[name]
    level = int(parts[0]) if parts else default
    if level > highest:
        raise ValueError(f"codec {text!r}: {name}'s levels go up to {highest}")
    return CodecChoice(name, level, cname)


def check_codec(text: str) -> str:
    """`text` when `parse_codec` takes it; ValueError otherwise."""
    parse_codec(text)
    return text


def new_layout(shape: Sequence[int], itemsize: int, chunks: Sequence[int] | None,
               codec: str) -> tuple[tuple[int, ...], CodecChoice]:
    """(chunk shape, compressor) of a new array: `chunks` None: `auto_chunks`; `codec` as
    `parse_codec` takes it. MetadataError when `chunks` does not fit the shape."""
    chunk_shape = tuple(chunks) if chunks is not None else auto_chunks(shape, itemsize)
    if len(chunk_shape) != len(shape) or min(chunk_shape, default=1) < 1:
        raise MetadataError("chunks", f"{list(chunk_shape)} does not fit an array of shape {list(shape)}")
    return chunk_shape, parse_codec(codec)
