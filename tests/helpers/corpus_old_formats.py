"""The corpus's Zarr v2 and v1 cases (make_corpus.py): arrays whose metadata must be refused,
and valid arrays of `arange` values whose bad chunks do not decode."""

from __future__ import annotations

import bz2
import json
import zlib
from collections.abc import Callable
from typing import Any

from numcodecs import Blosc

from tests.helpers.corpus_chunks import blocks, values
from tests.helpers.corpus_docs import Doc

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
