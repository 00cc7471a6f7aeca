"""Write the bad-input corpus: ``python tests/helpers/make_corpus.py [OUTDIR]``.

The output (by default ``tests/reliability/corpus/``, beside test_corpus.py) is committed;
tests read the committed files and never regenerate them, so a test cannot pass because a
fixture went missing. Run this again only to change the corpus, and commit what it writes.

Layout::

    corpus/expected.json              case -> expected outcome
    corpus/metadata/<case>/zarr.json  a zarr.json that must be refused (or, "ok_*", accepted)
    corpus/chunks/<case>/zarr.json    a valid zarr.json ...
    corpus/chunks/<case>/c/...        ... its chunks: all good but the ones named "bad_keys"
    corpus/v2/<case>/.zarray (...)    a Zarr v2 array directory (metadata and chunk keys)
    corpus/v1/<case>/meta, attrs ...  a Zarr v1 array directory

Expected outcomes:

* ``{"kind": "metadata", "member": M}``: opening raises MetadataError with ``.member == M``
  (parse_metadata, or building the codec pipeline, which is where codec configs are checked).
* ``{"kind": "ok"}``: the metadata is valid.
* ``{"kind": "chunk", "bad_keys": [...], "data": "arange"}``: every chunk not in bad_keys
  decodes to its part of ``arange(prod(shape)).reshape(shape)`` cast to the data type (``% 2``
  for bool); each bad key fails to decode with CodecError (ChunkError naming the key through the
  array layer), in bounded memory and without crashing the process.

* ``{"kind": "refused", "format": 2 or 1, "fragments": [[alternatives], ...]}``: a Zarr v2/v1
  array whose metadata must be refused (``zarrfs info`` exits 1, ``zarrfs mount`` fails with
  one line); the message contains, for every group of fragments, one of its alternatives
  (the field's name, then a keyword): e.g. ``[["order"], ["'X'", '"X"']]``.
* ``{"kind": "bad_chunk", "format": 2 or 1, "bad_keys": [...], "data": "arange"}``: a valid
  Zarr v2/v1 array of ``arange`` int32 values (see v2_chunk_case) whose bad keys do not decode
  (a wrong decompressed size): reading their region is EIO and the daemon's log names the key;
  every other chunk reads its values.

Chunks are encoded here with numcodecs, zlib and crc32c directly, not with zarrfs, so the corpus
does not inherit zarrfs's bugs. Output is deterministic for given library versions.
"""

from __future__ import annotations

import bz2
import gzip
import json
import math
import shutil
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import google_crc32c
import numpy as np
from numcodecs import Blosc, Zstd

CORPUS = Path(__file__).resolve().parents[1] / "reliability" / "corpus"  # (test_corpus.py's)
EMPTY = (1 << 64) - 1
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

Doc = dict[str, Any]


# -- metadata --------------------------------------------------------------------------------


def base_doc(**changes: Any) -> Doc:
    doc: Doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8, 8],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }
    doc.update(changes)
    return doc


def without(member: str) -> Doc:
    doc = base_doc()
    del doc[member]
    return doc


def grid(chunk_shape: Any) -> Doc:
    return {"name": "regular", "configuration": {"chunk_shape": chunk_shape}}


BYTES: Doc = {"name": "bytes", "configuration": {"endian": "little"}}
CRC32C: Doc = {"name": "crc32c"}


def sharding(
    inner: Any = (4, 4), codecs: Any = None, index_codecs: Any = None, **extra: Any
) -> Doc:
    config: Doc = {
        "chunk_shape": list(inner) if isinstance(inner, tuple) else inner,
        "codecs": [BYTES] if codecs is None else codecs,
        "index_codecs": [BYTES, CRC32C] if index_codecs is None else index_codecs,
    }
    config.update(extra)
    return {"name": "sharding_indexed", "configuration": config}


# name -> (zarr.json bytes, expected member or None when valid)
MetadataCase = tuple[bytes, str | None]


def dumps(doc: Any) -> bytes:
    return (json.dumps(doc, indent=2) + "\n").encode()


def metadata_cases() -> dict[str, MetadataCase]:
    sharded = {"shape": [16, 16], "chunk_grid": grid([8, 8])}
    cases: dict[str, MetadataCase] = {
        # not JSON, or not an object
        "json_malformed": (b'{"zarr_format": 3, "node_type": "array",\n', "zarr.json"),
        "json_empty": (b"", "zarr.json"),
        "json_array": (b'[3, "array"]\n', "zarr.json"),
        "json_string": (b'"zarr.json"\n', "zarr.json"),
        "json_invalid_utf8": (
            b'{"zarr_format": 3, "attributes": {"x": "\xc3\x28"}}\n',
            "zarr.json",
        ),
        "json_nan_literal_shape": (
            dumps(base_doc()).replace(b"[\n    8,\n    8\n  ]", b"[NaN, 8]", 1),
            "shape[0]",
        ),
        # zarr_format / node_type
        "zarr_format_2": (dumps(base_doc(zarr_format=2)), "zarr_format"),
        "zarr_format_string": (dumps(base_doc(zarr_format="3")), "zarr_format"),
        "zarr_format_missing": (dumps(without("zarr_format")), "zarr_format"),
        "node_type_group": (dumps(base_doc(node_type="group")), "node_type"),
        "node_type_number": (dumps(base_doc(node_type=1)), "node_type"),
        # shape
        "shape_missing": (dumps(without("shape")), "shape"),
        "shape_not_list": (dumps(base_doc(shape=8)), "shape"),
        "shape_object": (dumps(base_doc(shape={"0": 8})), "shape"),
        "shape_negative": (dumps(base_doc(shape=[-8, 8])), "shape[0]"),
        "shape_float": (dumps(base_doc(shape=[8, 8.5])), "shape[1]"),
        "shape_string": (dumps(base_doc(shape=[8, "8"])), "shape[1]"),
        "shape_bool": (dumps(base_doc(shape=[True, 8])), "shape[0]"),
        "shape_null": (dumps(base_doc(shape=[8, None])), "shape[1]"),
        "shape_overflow_product": (
            dumps(base_doc(shape=[1 << 40, 1 << 40], chunk_grid=grid([4, 4]))),
            "shape",
        ),
        "shape_overflow_int64": (
            dumps(base_doc(shape=[1 << 64, 1], chunk_grid=grid([4, 1]))),
            "shape",
        ),
        "shape_rank_33": (
            dumps(base_doc(shape=[1] * 33, chunk_grid=grid([1] * 33))),
            "shape",
        ),
        # chunk grid
        "chunk_grid_missing": (dumps(without("chunk_grid")), "chunk_grid"),
        "chunk_grid_unknown": (
            dumps(base_doc(chunk_grid={"name": "irregular", "configuration": {"chunk_shapes": [[4]]}})),
            "chunk_grid.name",
        ),
        # (the registry's rectilinear grid is read; one without its `kind` is refused)
        "chunk_grid_rectilinear_without_kind": (
            dumps(
                base_doc(
                    chunk_grid={"name": "rectilinear", "configuration": {"chunk_shapes": [[4]]}}
                )
            ),
            "chunk_grid.configuration.kind",
        ),
        "chunk_grid_not_object": (dumps(base_doc(chunk_grid=[4, 4])), "chunk_grid.name"),
        "chunk_grid_no_configuration": (
            dumps(base_doc(chunk_grid={"name": "regular"})),
            "chunk_grid.configuration.chunk_shape",
        ),
        "chunk_shape_zero": (
            dumps(base_doc(chunk_grid=grid([0, 4]))),
            "chunk_grid.configuration.chunk_shape[0]",
        ),
        "chunk_shape_negative": (
            dumps(base_doc(chunk_grid=grid([4, -4]))),
            "chunk_grid.configuration.chunk_shape[1]",
        ),
        "chunk_shape_float": (
            dumps(base_doc(chunk_grid=grid([4.0, 4]))),
            "chunk_grid.configuration.chunk_shape[0]",
        ),
        "chunk_rank_too_low": (
            dumps(base_doc(chunk_grid=grid([4]))),
            "chunk_grid.configuration.chunk_shape",
        ),
        "chunk_rank_too_high": (
            dumps(base_doc(chunk_grid=grid([4, 4, 4]))),
            "chunk_grid.configuration.chunk_shape",
        ),
        "chunk_too_large": (
            dumps(
                base_doc(
                    shape=[1 << 20, 1 << 20],
                    data_type="float64",
                    fill_value=0.0,
                    chunk_grid=grid([1 << 20, 1 << 20]),
                )
            ),
            "chunk_grid.configuration.chunk_shape",
        ),
        # data type
        "data_type_missing": (dumps(without("data_type")), "data_type"),
        "data_type_unknown": (dumps(base_doc(data_type="int128")), "data_type"),
        "data_type_numpy_str": (dumps(base_doc(data_type="<i4")), "data_type"),
        "data_type_object": (
            dumps(base_doc(data_type={"name": "numpy.datetime64", "configuration": {"unit": "parsec"}})),
            "data_type.configuration",
        ),
        "data_type_case": (dumps(base_doc(data_type="Int32")), "data_type"),
        # chunk key encoding
        "key_encoding_missing": (dumps(without("chunk_key_encoding")), "chunk_key_encoding"),
        "key_encoding_unknown": (
            dumps(base_doc(chunk_key_encoding={"name": "hierarchical"})),
            "chunk_key_encoding.name",
        ),
        "key_encoding_bad_separator": (
            dumps(
                base_doc(
                    chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}
                )
            ),
            "chunk_key_encoding.configuration.separator",
        ),
        "key_encoding_not_object": (dumps(base_doc(chunk_key_encoding=5)), "chunk_key_encoding"),
        "key_encoding_config_list": (
            dumps(base_doc(chunk_key_encoding={"name": "v2", "configuration": ["."]})),
            "chunk_key_encoding.configuration",
        ),
        # extensions
        "extension_must_understand": (
            dumps(base_doc(consolidated_chunks={"must_understand": True, "chunks": []})),
            "consolidated_chunks",
        ),
        "extension_must_understand_default": (
            dumps(base_doc(my_extension={"anything": 1})),
            "my_extension",
        ),
        "extension_unknown_scalar": (dumps(base_doc(foo=1)), "foo"),
        "storage_transformers": (
            dumps(
                base_doc(
                    storage_transformers=[{"name": "chunk-manifest-json", "configuration": {}}]
                )
            ),
            "storage_transformers",
        ),
        "storage_transformers_not_list": (
            dumps(base_doc(storage_transformers={})),
            "storage_transformers",
        ),
        # fill value
        "fill_missing": (dumps(without("fill_value")), "fill_value"),
        "fill_null": (dumps(base_doc(fill_value=None)), "fill_value"),
        "fill_int_nan": (dumps(base_doc(fill_value="NaN")), "fill_value"),
        "fill_int_fraction": (dumps(base_doc(fill_value=1.5)), "fill_value"),
        "fill_int_string": (dumps(base_doc(fill_value="0")), "fill_value"),
        "fill_int_bool": (dumps(base_doc(fill_value=True)), "fill_value"),
        "fill_uint8_256": (dumps(base_doc(data_type="uint8", fill_value=256)), "fill_value"),
        "fill_int8_minus_129": (dumps(base_doc(data_type="int8", fill_value=-129)), "fill_value"),
        "fill_uint64_negative": (dumps(base_doc(data_type="uint64", fill_value=-1)), "fill_value"),
        "fill_bool_int": (dumps(base_doc(data_type="bool", fill_value=0)), "fill_value"),
        "fill_float_lower_nan": (
            dumps(base_doc(data_type="float32", fill_value="nan")),
            "fill_value",
        ),
        "fill_float_hex_width": (
            dumps(base_doc(data_type="float32", fill_value="0x7fc0")),
            "fill_value",
        ),
        "fill_float_hex_digits": (
            dumps(base_doc(data_type="float32", fill_value="0xZZZZZZZZ")),
            "fill_value",
        ),
        "fill_float_list": (dumps(base_doc(data_type="float64", fill_value=[0.0])), "fill_value"),
        "fill_float_huge_int": (
            dumps(base_doc(data_type="float64", fill_value=10**400)),
            "fill_value",
        ),
        "fill_complex_scalar": (dumps(base_doc(data_type="complex64", fill_value=0)), "fill_value"),
        "fill_complex_three": (
            dumps(base_doc(data_type="complex128", fill_value=[0, 0, 0])),
            "fill_value",
        ),
        # codecs list
        "codecs_missing": (dumps(without("codecs")), "codecs"),
        "codecs_empty": (dumps(base_doc(codecs=[])), "codecs"),
        "codecs_not_list": (dumps(base_doc(codecs=BYTES)), "codecs"),
        "codec_no_name": (
            dumps(base_doc(codecs=[{"configuration": {"endian": "little"}}])),
            "codecs[0]",
        ),
        "codec_name_number": (dumps(base_doc(codecs=[{"name": 7}])), "codecs[0]"),
        "codec_config_list": (
            dumps(base_doc(codecs=[{"name": "bytes", "configuration": ["little"]}])),
            "codecs[0].configuration",
        ),
        "codec_unknown": (dumps(base_doc(codecs=[BYTES, {"name": "lz77"}])), "codecs[1].name"),
        "codec_order_compressor_first": (
            dumps(base_doc(codecs=[{"name": "zstd", "configuration": {"level": 1}}, BYTES])),
            "codecs[0]",
        ),
        "codec_order_transpose_after_bytes": (
            dumps(
                base_doc(codecs=[BYTES, {"name": "transpose", "configuration": {"order": [1, 0]}}])
            ),
            "codecs[1]",
        ),
        "codec_two_array_bytes": (dumps(base_doc(codecs=[BYTES, BYTES])), "codecs[1]"),
        "codec_no_array_bytes": (
            dumps(base_doc(codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}}])),
            "codecs",
        ),
        "codec_only_compressor": (
            dumps(base_doc(codecs=[{"name": "gzip", "configuration": {"level": 5}}])),
            "codecs[0]",
        ),
        "bytes_bad_endian": (
            dumps(base_doc(codecs=[{"name": "bytes", "configuration": {"endian": "middle"}}])),
            "codecs[0].configuration.endian",
        ),
        "bytes_unknown_config": (
            dumps(
                base_doc(codecs=[{"name": "bytes", "configuration": {"endian": "little", "x": 1}}])
            ),
            "codecs[0].configuration.x",
        ),
        "zstd_level_string": (
            dumps(base_doc(codecs=[BYTES, {"name": "zstd", "configuration": {"level": "high"}}])),
            "codecs[1].configuration.level",
        ),
        "zstd_checksum_string": (
            dumps(
                base_doc(
                    codecs=[
                        BYTES,
                        {"name": "zstd", "configuration": {"level": 1, "checksum": "yes"}},
                    ]
                )
            ),
            "codecs[1].configuration.checksum",
        ),
        "gzip_level_10": (
            dumps(base_doc(codecs=[BYTES, {"name": "gzip", "configuration": {"level": 10}}])),
            "codecs[1].configuration.level",
        ),
        "gzip_level_missing": (
            dumps(base_doc(codecs=[BYTES, {"name": "gzip"}])),
            "codecs[1].configuration.level",
        ),
        "blosc_bad_cname": (
            dumps(
                base_doc(
                    codecs=[
                        BYTES,
                        {
                            "name": "blosc",
                            "configuration": {
                                "cname": "lzma",
                                "clevel": 5,
                                "shuffle": "shuffle",
                                "typesize": 4,
                                "blocksize": 0,
                            },
                        },
                    ]
                )
            ),
            "codecs[1].configuration.cname",
        ),
        "blosc_bad_shuffle": (
            dumps(
                base_doc(
                    codecs=[
                        BYTES,
                        {
                            "name": "blosc",
                            "configuration": {
                                "cname": "lz4",
                                "clevel": 5,
                                "shuffle": 1,
                                "typesize": 4,
                                "blocksize": 0,
                            },
                        },
                    ]
                )
            ),
            "codecs[1].configuration.shuffle",
        ),
        "crc32c_with_config": (
            dumps(base_doc(codecs=[BYTES, {"name": "crc32c", "configuration": {"seed": 1}}])),
            "codecs[1].configuration.seed",
        ),
        "transpose_not_permutation": (
            dumps(
                base_doc(codecs=[{"name": "transpose", "configuration": {"order": [0, 0]}}, BYTES])
            ),
            "codecs[0].configuration.order",
        ),
        "transpose_wrong_rank": (
            dumps(
                base_doc(
                    codecs=[{"name": "transpose", "configuration": {"order": [0, 1, 2]}}, BYTES]
                )
            ),
            "codecs[0].configuration.order",
        ),
        "transpose_mixed_types": (
            dumps(
                base_doc(
                    codecs=[{"name": "transpose", "configuration": {"order": ["a", 1]}}, BYTES]
                )
            ),
            "codecs[0].configuration.order",
        ),
        # sharding
        "sharding_not_dividing": (
            dumps(base_doc(**sharded, codecs=[sharding(inner=(3, 4))])),
            "codecs[0].configuration.chunk_shape",
        ),
        "sharding_inner_rank": (
            dumps(base_doc(**sharded, codecs=[sharding(inner=[4])])),
            "codecs[0].configuration.chunk_shape",
        ),
        "sharding_inner_zero": (
            dumps(base_doc(**sharded, codecs=[sharding(inner=[0, 4])])),
            "codecs[0].configuration.chunk_shape",
        ),
        "sharding_inner_larger": (
            dumps(base_doc(**sharded, codecs=[sharding(inner=[16, 8])])),
            "codecs[0].configuration.chunk_shape",
        ),
        "sharding_index_variable_size": (
            dumps(
                base_doc(
                    **sharded,
                    codecs=[
                        sharding(
                            index_codecs=[BYTES, {"name": "zstd", "configuration": {"level": 1}}]
                        )
                    ],
                )
            ),
            "codecs[0].configuration.index_codecs",
        ),
        "sharding_index_codecs_missing": (
            dumps(
                base_doc(
                    **sharded,
                    codecs=[
                        {
                            "name": "sharding_indexed",
                            "configuration": {"chunk_shape": [4, 4], "codecs": [BYTES]},
                        }
                    ],
                )
            ),
            "codecs[0].configuration.index_codecs",
        ),
        "sharding_inner_codec_unknown": (
            dumps(base_doc(**sharded, codecs=[sharding(codecs=[BYTES, {"name": "lzma"}])])),
            "codecs[0].configuration.codecs[1].name",
        ),
        "sharding_bad_index_location": (
            dumps(base_doc(**sharded, codecs=[sharding(index_location="middle")])),
            "codecs[0].configuration.index_location",
        ),
        "sharding_after_compressor": (
            dumps(base_doc(**sharded, codecs=[BYTES, sharding()])),
            "codecs[1]",
        ),
        # other members
        "dimension_names_length": (dumps(base_doc(dimension_names=["y"])), "dimension_names"),
        "dimension_names_number": (dumps(base_doc(dimension_names=[1, "x"])), "dimension_names[0]"),
        "attributes_list": (dumps(base_doc(attributes=[])), "attributes"),
        # valid documents: the corpus must not over-reject
        "ok_minimal": (dumps(base_doc()), None),
        "ok_must_understand_false": (
            dumps(base_doc(my_extension={"must_understand": False, "x": 1})),
            None,
        ),
        "ok_zero_shape": (dumps(base_doc(shape=[0, 8])), None),
        "ok_rank_0": (dumps(base_doc(shape=[], chunk_grid=grid([]))), None),
        "ok_float_fill_words": (dumps(base_doc(data_type="float32", fill_value="-Infinity")), None),
        "ok_float_fill_hex": (
            dumps(base_doc(data_type="float64", fill_value="0x7ff8000000000001")),
            None,
        ),
        "ok_int_fill_integral_float": (dumps(base_doc(fill_value=3.0)), None),
        "ok_v2_key_encoding": (
            dumps(base_doc(chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}})),
            None,
        ),
        "ok_sharded_all_codecs": (
            dumps(
                base_doc(
                    **sharded,
                    codecs=[
                        {"name": "transpose", "configuration": {"order": [1, 0]}},
                        sharding(
                            codecs=[
                                BYTES,
                                {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
                                CRC32C,
                            ],
                            index_location="start",
                        ),
                    ],
                )
            ),
            None,
        ),
    }
    return cases


# -- chunks ----------------------------------------------------------------------------------


def values(shape: tuple[int, ...], data_type: str) -> np.ndarray:
    flat = np.arange(math.prod(shape))
    if data_type == "bool":
        return (flat % 2).astype(bool).reshape(shape)
    return flat.astype(data_type).reshape(shape)


def blocks(array: np.ndarray, chunk: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    grid_shape = tuple(-(-s // c) for s, c in zip(array.shape, chunk, strict=True))
    out = {}
    for index in np.ndindex(*grid_shape):
        piece = np.zeros(chunk, dtype=array.dtype)  # fill value 0 beyond the edge
        region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, chunk, strict=True))
        part = array[region]
        piece[tuple(slice(0, n) for n in part.shape)] = part
        out[index] = piece
    return out


def crc(data: bytes) -> bytes:
    return struct.pack("<I", google_crc32c.value(data))


def zstd(data: bytes, level: int = 3, checksum: bool = False) -> bytes:
    return bytes(Zstd(level=level, checksum=checksum).encode(data))


def blosc(data: bytes) -> bytes:
    return bytes(
        Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, typesize=4, blocksize=0).encode(data)
    )


BLOSC_CONFIG: Doc = {
    "cname": "lz4",
    "clevel": 5,
    "shuffle": "shuffle",
    "typesize": 4,
    "blocksize": 0,
}


def zstd_bomb(claimed: int) -> bytes:
    """A 33-byte zstd frame whose header declares `claimed` decoded bytes."""
    descriptor = 0xE0  # 8-byte content size, single segment, no checksum, no dictionary
    raw_block = bytes(range(16))
    block_header = ((len(raw_block) << 3) | (0 << 1) | 1).to_bytes(3, "little")  # raw, last
    return (
        ZSTD_MAGIC + bytes([descriptor]) + claimed.to_bytes(8, "little") + block_header + raw_block
    )


def zstd_without_content_size(data: bytes) -> bytes:
    """A valid zstd frame of `data` whose header does not declare its decoded size."""
    frame = zstd(data)
    descriptor = frame[4]
    assert descriptor & 0x20 and descriptor & 0x03 == 0, "expected a single-segment frame"
    fcs_size = (1, 2, 4, 8)[descriptor >> 6]
    window_log = max(10, (len(data) - 1).bit_length())
    window = bytes([(window_log - 10) << 3])
    new_descriptor = descriptor & 0x04  # keep the checksum flag; no size, not single-segment
    return ZSTD_MAGIC + bytes([new_descriptor]) + window + frame[5 + fcs_size :]


def blosc_header_claiming(nbytes: int) -> bytes:
    """A blosc buffer of a few bytes whose header declares `nbytes` decoded bytes."""
    body = bytes(range(16))
    header = bytes([2, 1, 0x01 | 0x02, 4]) + struct.pack("<III", nbytes, 1 << 16, 16 + len(body))
    return header + body


def blosc_lying_cbytes() -> bytes:
    """Chunk c/1/0 of a 32x16 int32 array of 16x16 chunks, blosc-encoded, with the header's
    compressed size and the first block's start pointing far past the buffer's end."""
    good = bytearray(blosc(chunk_bytes(blocks(values((32, 16), "int32"), (16, 16))[(1, 0)])))
    good[12:16] = struct.pack("<I", 0x66B92E45)  # cbytes
    good[16:20] = struct.pack("<I", 0x1B000000 + struct.unpack("<I", good[16:20])[0])  # bstarts[0]
    return bytes(good)


def shard(
    inner: dict[tuple[int, ...], bytes | None],
    per_shard: tuple[int, ...],
    *,
    index_at_start: bool = False,
    index_crc: bool = True,
    entries_override: dict[tuple[int, ...], tuple[int, int]] | None = None,
) -> bytes:
    """A shard holding encoded inner chunks in C order, with its index."""
    index_nbytes = math.prod(per_shard) * 16 + (4 if index_crc else 0)
    entries = np.full((*per_shard, 2), EMPTY, dtype="<u8")
    position = index_nbytes if index_at_start else 0
    pieces = []
    for index in np.ndindex(*per_shard):
        data = inner.get(index)
        if data is None:
            continue
        entries[index] = (position, len(data))
        pieces.append(data)
        position += len(data)
    for index, entry in (entries_override or {}).items():
        entries[index] = entry
    raw_index = entries.tobytes()
    if index_crc:
        raw_index += crc(raw_index)
    body = b"".join(pieces)
    return raw_index + body if index_at_start else body + raw_index


# A chunk case: its zarr.json document and every chunk file (key -> bytes), and the bad keys.
ChunkCase = tuple[Doc, dict[str, bytes], list[str]]


def key(index: tuple[int, ...]) -> str:
    return "/".join(["c", *map(str, index)])


def plain_case(
    codecs: list[Doc],
    encode: Callable[[np.ndarray], bytes],
    bad: bytes,
    *,
    data_type: str = "int32",
    fill_value: Any = 0,
    shape: tuple[int, int] = (8, 8),
    chunk: tuple[int, int] = (4, 4),
) -> ChunkCase:
    """An array (8x8 of 4x4 chunks unless told) with every chunk encoded with `encode` except
    c/1/0, which is `bad`."""
    doc = base_doc(
        shape=list(shape),
        chunk_grid=grid(list(chunk)),
        data_type=data_type,
        fill_value=fill_value,
        codecs=codecs,
    )
    array = values(shape, data_type)
    files = {key(i): encode(b) for i, b in blocks(array, chunk).items()}
    files["c/1/0"] = bad
    return doc, files, ["c/1/0"]


def chunk_bytes(chunk: np.ndarray) -> bytes:
    return np.ascontiguousarray(chunk).astype(chunk.dtype.newbyteorder("<")).tobytes()


def good_chunk(index: tuple[int, ...] = (1, 0), data_type: str = "int32") -> bytes:
    return chunk_bytes(blocks(values((8, 8), data_type), (4, 4))[index])


def flip(data: bytes, position: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 0xFF
    return bytes(out)


def sharded_case(
    bad: Callable[[dict[tuple[int, ...], bytes]], bytes],
    *,
    inner_codecs: list[Doc] | None = None,
    inner_encode: Callable[[bytes], bytes] = lambda b: b,
    index_at_start: bool = False,
    index_crc: bool = True,
) -> ChunkCase:
    """16x8 array of 8x8 shards of 4x4 inner chunks: shard c/0/0 good, c/1/0 made by `bad`
    from the inner chunks it should hold."""
    extra = {"index_location": "start"} if index_at_start else {}
    codec = sharding(
        codecs=inner_codecs,
        index_codecs=[BYTES, CRC32C] if index_crc else [BYTES],
        **extra,
    )
    doc = base_doc(shape=[16, 8], chunk_grid=grid([8, 8]), codecs=[codec])
    array = values((16, 8), "int32")
    files = {}
    for shard_index, shard_values in blocks(array, (8, 8)).items():
        inner = {i: inner_encode(chunk_bytes(b)) for i, b in blocks(shard_values, (4, 4)).items()}
        if shard_index == (1, 0):
            files[key(shard_index)] = bad(inner)
        else:
            files[key(shard_index)] = shard(
                dict(inner), (2, 2), index_at_start=index_at_start, index_crc=index_crc
            )
    return doc, files, ["c/1/0"]


def chunk_cases() -> dict[str, ChunkCase]:
    raw = good_chunk()
    zstd_codecs = [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}]
    zstd_sum = [BYTES, {"name": "zstd", "configuration": {"level": 3, "checksum": True}}]
    crc_codecs = [BYTES, CRC32C]
    gzip_codecs = [BYTES, {"name": "gzip", "configuration": {"level": 6}}]
    blosc_codecs = [BYTES, {"name": "blosc", "configuration": BLOSC_CONFIG}]

    def gz(b: np.ndarray | bytes) -> bytes:
        data = b if isinstance(b, bytes) else chunk_bytes(b)
        return gzip.compress(data, 6, mtime=0)

    def zs(b: np.ndarray) -> bytes:
        return zstd(chunk_bytes(b))

    def zs_sum(b: np.ndarray) -> bytes:
        return zstd(chunk_bytes(b), checksum=True)

    def with_crc(b: np.ndarray) -> bytes:
        return chunk_bytes(b) + crc(chunk_bytes(b))

    def bl(b: np.ndarray) -> bytes:
        return blosc(chunk_bytes(b))

    per = (2, 2)
    cases: dict[str, ChunkCase] = {
        # zstd
        "zstd_not_a_frame": plain_case(zstd_codecs, zs, b"this is not a zstd frame at all!" * 2),
        "zstd_truncated_frame": plain_case(zstd_codecs, zs, zstd(raw)[: len(zstd(raw)) // 2]),
        "zstd_corrupt_blocks": plain_case(
            zstd_codecs, zs, zstd(raw)[:6] + bytes([0xFF]) * (len(zstd(raw)) - 6)
        ),
        "zstd_checksum_mismatch": plain_case(zstd_sum, zs_sum, flip(zstd(raw, checksum=True), -1)),
        "zstd_bomb_header": plain_case(zstd_codecs, zs, zstd_bomb(8 << 30)),
        "zstd_bomb_outer": plain_case(
            [BYTES, CRC32C, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
            lambda b: zstd(with_crc(b)),
            zstd_bomb(8 << 30),
        ),
        "zstd_no_size_oversized": plain_case(
            zstd_codecs, zs, zstd_without_content_size(bytes(1 << 20))
        ),
        "zstd_wrong_decoded_size": plain_case(zstd_codecs, zs, zstd(raw[:32])),
        "zstd_empty_file": plain_case(zstd_codecs, zs, b""),
        # crc32c
        "crc32c_mismatch": plain_case(crc_codecs, with_crc, flip(raw + crc(raw), 5)),
        "crc32c_too_short": plain_case(crc_codecs, with_crc, b"\x01\x02\x03"),
        "crc32c_wrong_size": plain_case(crc_codecs, with_crc, raw[:60] + crc(raw[:60])),
        # gzip
        "gzip_truncated": plain_case(gzip_codecs, gz, gz(raw)[:-12]),
        "gzip_not_gzip": plain_case(gzip_codecs, gz, b"\x1f\x8b" + bytes(40)),
        "gzip_bomb": plain_case(gzip_codecs, gz, gzip.compress(bytes(16 << 20), 9, mtime=0)),
        "gzip_wrong_decoded_size": plain_case(gzip_codecs, gz, gz(raw + raw)),
        # blosc
        "blosc_bomb_header": plain_case(blosc_codecs, bl, blosc_header_claiming(1 << 31)),
        "blosc_bomb_outer": plain_case(
            [BYTES, CRC32C, {"name": "blosc", "configuration": BLOSC_CONFIG}],
            lambda b: blosc(with_crc(b)),
            blosc_header_claiming(1 << 31),
        ),
        # The header says the compressed buffer is far longer than the object and the first
        # block starts past its real end: c-blosc trusts the header and reads out of bounds
        # (numcodecs 0.16 dies with SIGSEGV on this one).
        "blosc_cbytes_beyond_buffer": plain_case(
            blosc_codecs, bl, blosc_lying_cbytes(), shape=(32, 16), chunk=(16, 16)
        ),
        "blosc_short_header": plain_case(blosc_codecs, bl, b"\x02\x01\x21"),
        "blosc_wrong_decoded_size": plain_case(blosc_codecs, bl, blosc(raw[:32])),
        # bytes
        "bool_byte_2": plain_case(
            [{"name": "bytes"}],
            lambda b: chunk_bytes(b),
            bytes([0, 1, 2, 0]) + bytes(12),
            data_type="bool",
            fill_value=False,
        ),
        "bytes_too_short": plain_case([BYTES], chunk_bytes, raw[:60]),
        "bytes_too_long": plain_case([BYTES], chunk_bytes, raw + b"\0\0\0\0"),
        "bytes_empty_file": plain_case([BYTES], chunk_bytes, b""),
        # sharding
        "shard_truncated": sharded_case(lambda inner: shard(inner, per)[:100]),
        "shard_truncated_no_index_crc": sharded_case(
            lambda inner: shard(inner, per, index_crc=False)[: 4 * 64 + 40], index_crc=False
        ),
        "shard_truncated_index_start": sharded_case(
            lambda inner: shard(inner, per, index_at_start=True)[:-70], index_at_start=True
        ),
        "shard_shorter_than_index": sharded_case(lambda inner: shard(inner, per)[-10:]),
        "shard_empty_file": sharded_case(lambda inner: b""),
        "shard_index_crc_mismatch": sharded_case(lambda inner: flip(shard(inner, per), -10)),
        "shard_entry_outside": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 1): (4 * 64, 64)})
        ),
        "shard_entry_huge_offset": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): ((1 << 63) + 5, 64)})
        ),
        "shard_entry_overflowing_end": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (64, EMPTY - 1)})
        ),
        "shard_entries_overlap": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (32, 64)})
        ),
        "shard_half_empty_entry": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 0): (EMPTY, 64)})
        ),
        "shard_half_empty_size": sharded_case(
            lambda inner: shard(inner, per, entries_override={(1, 0): (128, EMPTY)})
        ),
        "shard_entry_wrong_size": sharded_case(
            lambda inner: shard(inner, per, entries_override={(0, 1): (64, 60)})
        ),
        "shard_inner_corrupt": sharded_case(
            lambda inner: shard({**inner, (1, 1): b"\x28\xb5\x2f\xfd" + bytes(20)}, per),
            inner_codecs=zstd_codecs,
            inner_encode=zstd,
        ),
        "shard_inner_bomb": sharded_case(
            lambda inner: shard({**inner, (0, 0): zstd_bomb(8 << 30)}, per),
            inner_codecs=zstd_codecs,
            inner_encode=zstd,
        ),
    }
    return cases


# -- Zarr v2 and v1 --------------------------------------------------------------------------

# name -> (files: key -> bytes, expected outcome)
FormatCase = tuple[dict[str, bytes], Doc]

# The arange arrays of the chunk cases: int32 rows of 4 KiB, two chunks of 4 rows each (keys
# "0.0" and "1.0"), so that a chunk's region of `data` is whole pages.
OLD_SHAPE = (8, 1024)
OLD_CHUNKS = (4, 1024)


def dumps_v2(doc: Any) -> bytes:
    """JSON as zarr-python 2 writes it (indent 4, sorted keys)."""
    return json.dumps(doc, indent=4, sort_keys=True, ensure_ascii=True).encode()


def v2_doc(**changes: Any) -> Doc:
    doc: Doc = {
        "zarr_format": 2,
        "shape": list(OLD_SHAPE),
        "chunks": list(OLD_CHUNKS),
        "dtype": "<i4",
        "compressor": {"id": "zlib", "level": 1},
        "fill_value": 0,
        "order": "C",
        "filters": None,
    }
    doc.update(changes)
    return doc


def v1_doc(**changes: Any) -> Doc:
    doc: Doc = {
        "zarr_format": 1,
        "shape": list(OLD_SHAPE),
        "chunks": list(OLD_CHUNKS),
        "dtype": "<i4",
        "compression": "zlib",
        "compression_opts": 1,
        "fill_value": 0,
        "order": "C",
    }
    doc.update(changes)
    return doc


def refused(version: int, *fragments: list[str]) -> Doc:
    return {"kind": "refused", "format": version, "fragments": [list(f) for f in fragments]}


QUOTED_X = ["'X'", '"X"']


def old_chunks(doc: Doc, compress: Callable[[bytes], bytes]) -> dict[str, bytes]:
    """Every chunk of arange(prod(shape)) as int32, in the doc's dtype and order, compressed."""
    array = values(tuple(doc["shape"]), "int32").astype(doc["dtype"])
    return {
        ".".join(map(str, index)): compress(block.tobytes(order=doc["order"]))
        for index, block in blocks(array, tuple(doc["chunks"])).items()
    }


def v2_chunk_case(doc: Doc, compress: Callable[[bytes], bytes], bad: Callable[[bytes], bytes]) -> FormatCase:
    """A valid v2 array whose chunk "1.0" is `bad` (given the raw chunk bytes)."""
    files = {".zarray": dumps_v2(doc), **old_chunks(doc, compress)}
    raw = values(OLD_SHAPE, "int32").astype(doc["dtype"])[4:].tobytes(order=doc["order"])
    files["1.0"] = bad(raw)
    return files, {"kind": "bad_chunk", "format": 2, "bad_keys": ["1.0"], "data": "arange"}


def v1_chunk_case(doc: Doc, compress: Callable[[bytes], bytes], bad: Callable[[bytes], bytes]) -> FormatCase:
    files = {"meta": dumps_v2(doc), "attrs": b"{}", **old_chunks(doc, compress)}
    raw = values(OLD_SHAPE, "int32").astype(doc["dtype"])[4:].tobytes(order=doc["order"])
    files["1.0"] = bad(raw)
    return files, {"kind": "bad_chunk", "format": 1, "bad_keys": ["1.0"], "data": "arange"}


def v2_cases() -> dict[str, FormatCase]:
    def meta(raw: bytes, *fragments: list[str]) -> FormatCase:
        return {".zarray": raw}, refused(2, *fragments)

    def zl(raw: bytes) -> bytes:
        return zlib.compress(raw, 1)

    def blosc4(raw: bytes) -> bytes:
        return bytes(Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE, typesize=4).encode(raw))

    blosc_compressor = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    return {
        "zarray_not_json": meta(b'{"zarr_format": 2, "shape": [8, 1024],\n', [".zarray"], ["JSON"]),
        "compressor_unknown_id": meta(
            dumps_v2(v2_doc(compressor={"id": "nosuchcodec", "level": 1})),
            ["compressor.id", "compressor"], ["nosuchcodec"],
        ),
        "object_dtype_without_codec": meta(
            dumps_v2(v2_doc(dtype="|O", compressor=None, fill_value=None)),
            ["dtype", "filters"], ["|O", "object"],
        ),
        "order_x": meta(dumps_v2(v2_doc(order="X")), ["order"], QUOTED_X),
        "dtype_bad_string": meta(dumps_v2(v2_doc(dtype="<z7")), ["dtype"], ["<z7"]),
        "shape_negative": meta(dumps_v2(v2_doc(shape=[-8, 1024])), ["shape"], ["-8", "negative"]),
        "chunks_zero": meta(dumps_v2(v2_doc(chunks=[0, 1024])), ["chunks"], ["0", "positive"]),
        "filter_unknown_id": meta(
            dumps_v2(v2_doc(filters=[{"id": "nosuchfilter"}])), ["filters"], ["nosuchfilter"]
        ),
        "dimension_separator_bad": meta(
            dumps_v2(v2_doc(dimension_separator="-")), ["dimension_separator"], ["'-'", '"-"']
        ),
        "fill_value_string": meta(dumps_v2(v2_doc(fill_value="abc")), ["fill_value"], ["abc"]),
        "zarr_format_3": meta(dumps_v2(v2_doc(zarr_format=3)), ["zarr_format"], ["3"]),
        "compressor_not_object": meta(dumps_v2(v2_doc(compressor="zlib")), ["compressor"], ["zlib"]),
        "chunks_missing": meta(
            dumps_v2({k: v for k, v in v2_doc().items() if k != "chunks"}), ["chunks"], ["missing"]
        ),
        "chunks_rank_mismatch": meta(dumps_v2(v2_doc(chunks=[4])), ["chunks"], ["rank", "1"]),
        # Codec configurations numcodecs cannot encode with: refused on opening, as v3 codec
        # configurations are, not accepted and then failing every write-back with EIO.
        "blosc_unknown_cname": meta(
            dumps_v2(v2_doc(compressor={**blosc_compressor, "cname": "nope"})),
            ["compressor.cname", "compressor"], ["nope"],
        ),
        "zlib_level_string": meta(
            dumps_v2(v2_doc(compressor={"id": "zlib", "level": "high"})),
            ["compressor.level", "compressor"], ["high"],
        ),
        "zlib_wrong_decoded_size": v2_chunk_case(v2_doc(), zl, lambda raw: zl(raw[: len(raw) // 2])),
        "zlib_not_zlib": v2_chunk_case(v2_doc(), zl, lambda raw: b"not a zlib stream" * 4),
        "blosc_wrong_decoded_size": v2_chunk_case(
            v2_doc(compressor=blosc_compressor), blosc4, lambda raw: blosc4(raw + raw)
        ),
        "uncompressed_too_short_big_endian_order_f": v2_chunk_case(
            v2_doc(dtype=">i4", order="F", compressor=None), lambda raw: raw, lambda raw: raw[:-4]
        ),
    }


def v1_cases() -> dict[str, FormatCase]:
    def meta(raw: bytes, *fragments: list[str]) -> FormatCase:
        return {"meta": raw, "attrs": b"{}"}, refused(1, *fragments)

    def zl(raw: bytes) -> bytes:
        return zlib.compress(raw, 1)

    def bz(raw: bytes) -> bytes:
        return bz2.compress(raw, 1)

    return {
        "meta_not_json": meta(b'{"zarr_format": 1, "shape": [8, 1024]', ["meta"], ["JSON"]),
        "compression_unknown": meta(dumps_v2(v1_doc(compression="lzw")), ["compression"], ["lzw"]),
        "order_x": meta(dumps_v2(v1_doc(order="X")), ["order"], QUOTED_X),
        "dtype_bad_string": meta(dumps_v2(v1_doc(dtype="<z7")), ["dtype"], ["<z7"]),
        "compression_opts_string": meta(
            dumps_v2(v1_doc(compression_opts="high")), ["compression_opts"], ["high"]
        ),
        "blosc_opts_not_object": meta(
            dumps_v2(v1_doc(compression="blosc", compression_opts=5)),
            ["compression_opts"], ["blosc", "object"],
        ),
        "blosc_unknown_cname": meta(
            dumps_v2(v1_doc(compression="blosc",
                            compression_opts={"cname": "nope", "clevel": 5, "shuffle": 1})),
            ["compression_opts.cname", "compression_opts", "cname"], ["nope"],
        ),
        "zarr_format_2": meta(dumps_v2(v1_doc(zarr_format=2)), ["zarr_format"], ["2"]),
        "shape_negative": meta(dumps_v2(v1_doc(shape=[-8, 1024])), ["shape"], ["-8", "negative"]),
        "fill_value_string": meta(dumps_v2(v1_doc(fill_value="abc")), ["fill_value"], ["abc"]),
        "order_missing": meta(
            dumps_v2({k: v for k, v in v1_doc().items() if k != "order"}), ["order"], ["missing"]
        ),
        "zlib_wrong_decoded_size": v1_chunk_case(v1_doc(), zl, lambda raw: zl(raw + b"\0" * 8)),
        "bz2_wrong_decoded_size": v1_chunk_case(
            v1_doc(compression="bz2", compression_opts=1), bz, lambda raw: bz(raw[:100])
        ),
        "none_too_short_order_f": v1_chunk_case(
            v1_doc(compression="none", compression_opts=None, order="F"),
            lambda raw: raw,
            lambda raw: raw[:-8],
        ),
    }


# -- writing ---------------------------------------------------------------------------------


def write(out: Path) -> dict[str, Doc]:
    if out.exists():
        shutil.rmtree(out)
    expected: dict[str, Doc] = {}
    for name, (raw, member) in metadata_cases().items():
        case = out / "metadata" / name
        case.mkdir(parents=True)
        (case / "zarr.json").write_bytes(raw)
        expected[f"metadata/{name}"] = (
            {"kind": "ok"} if member is None else {"kind": "metadata", "member": member}
        )
    for name, (doc, files, bad_keys) in chunk_cases().items():
        case = out / "chunks" / name
        case.mkdir(parents=True)
        (case / "zarr.json").write_bytes(dumps(doc))
        for chunk_key, data in sorted(files.items()):
            path = case / chunk_key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        expected[f"chunks/{name}"] = {"kind": "chunk", "bad_keys": bad_keys, "data": "arange"}
    for version, format_cases in (("v2", v2_cases()), ("v1", v1_cases())):
        for name, (format_files, outcome) in format_cases.items():
            case = out / version / name
            case.mkdir(parents=True)
            for file_key, data in sorted(format_files.items()):
                (case / file_key).write_bytes(data)
            expected[f"{version}/{name}"] = outcome
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    # Byte-exact files: no end-of-line conversion by git, whatever a clone's settings.
    (out / ".gitattributes").write_text("* -text\n")
    return expected


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS
    cases = write(target)
    print(f"wrote {len(cases)} cases to {target}")
