"""The registry's codecs and zarrs' (zarrfs.codecs: bitround, packbits, reshape,
zarrs.squeeze, zfp, numcodecs.pcodec, cast_value, scale_offset) without a mount: round trips
through each class, byte-for-byte against numcodecs where it has the codec, against chunks
zarrs wrote (tests/data/zarrs), and the errors a bad configuration gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zfpy

from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.errors import MetadataError
from zarrfs.formats.v3 import metadata_from_json, parse_codec_list, parse_data_type

pytestmark = pytest.mark.fast

ZARRS = Path(__file__).parents[1] / "data" / "zarrs"
BYTES = {"name": "bytes", "configuration": {"endian": "little"}}


def pipeline(codecs: list[Any], dtype: str, shape: tuple[int, ...], fill: Any = None) -> Pipeline:
    data_type = parse_data_type(dtype)
    if fill is None:
        fill = False if dtype == "bool" else [0, 0] if dtype.startswith("complex") else 0
    doc = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shape)}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": fill, "codecs": codecs}
    meta = metadata_from_json(doc)
    return Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, data_type, meta.fill_value))


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    storage = parse_data_type(dtype).storage
    if storage.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if storage.kind in "iu":
        info = np.iinfo(storage)
        return rng.integers(info.min, info.max, shape, dtype=storage, endpoint=True)
    if storage.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(storage)
    return np.cumsum(rng.normal(size=shape), axis=-1).astype(storage)


LOSSLESS = [
    ([{"name": "packbits"}], ["bool", "int4", "int8", "uint16", "float32", "complex64", "float64"]),
    ([{"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}], ["bool", "int4", "uint8"]),
    ([{"name": "packbits", "configuration": {"padding_encoding": "last_byte"}}], ["bool", "int16"]),
    ([{"name": "reshape", "configuration": {"shape": [-1]}}, BYTES], ["bool", "int16", "float64"]),
    ([{"name": "reshape", "configuration": {"shape": [[0, 1], [2, 3]]}}, BYTES], ["uint32"]),
    ([{"name": "zarrs.squeeze"}, BYTES], ["int8", "complex128"]),
    ([{"name": "zfp", "configuration": {"mode": "reversible"}}],
     ["int8", "uint8", "int16", "uint16", "int32", "int64", "float32", "float64"]),
    ([{"name": "numcodecs.pcodec"}], ["uint16", "int32", "int64", "float32", "float64", "complex64"]),
    ([BYTES, {"name": "zarrs.gdeflate", "configuration": {"level": 5}}], ["uint8", "float64"]),
]


@pytest.mark.parametrize(("codecs", "dtype"), [(c, d) for c, types in LOSSLESS for d in types],
                         ids=lambda v: v if isinstance(v, str) else v[0]["name"])
def test_lossless_round_trip(codecs: list[Any], dtype: str) -> None:
    shape = (3, 1, 4, 5)
    chain = pipeline(codecs, dtype, shape)
    values = sample(dtype, shape)
    if dtype == "int4":
        values = (values.astype(np.int64) % 16 - 8).astype(np.int8)
    assert chain.decode(chain.encode(values)).tobytes() == values.tobytes()


@pytest.mark.parametrize(("first", "last", "dtype"), [(0, 3, "int16"), (2, 9, "int16"), (4, 11, "uint32")])
def test_packbits_keeps_a_bit_range_and_sign_extends(first: int, last: int, dtype: str) -> None:
    codec = {"name": "packbits", "configuration": {"first_bit": first, "last_bit": last}}
    chain = pipeline([codec], dtype, (40,))
    storage = parse_data_type(dtype).storage
    low = -(1 << (last - first)) if storage.kind == "i" else 0
    values = (np.arange(40) % (1 << (last - first)) + low).astype(storage) << first
    encoded = chain.encode(values)
    assert len(encoded) == (40 * (last - first + 1) + 7) // 8
    assert np.array_equal(chain.decode(encoded), values)


def test_packbits_bool_is_numcodecs_packbits_with_the_bits_of_each_byte_reversed() -> None:
    """The padding byte is numcodecs' (the registry's "first_byte"), but the registry (and
    zarrs, whose chunks tests/data/zarrs hold) put the first element in a byte's lowest bit,
    numcodecs in its highest."""
    values = sample("bool", (37,))
    codec = {"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}
    chain = pipeline([codec], "bool", (37,))
    theirs = np.frombuffer(numcodecs.PackBits().encode(values), dtype=np.uint8)
    reversed_bits = np.packbits(np.unpackbits(theirs[1:]), bitorder="little")
    assert bytes(chain.encode(values)) == theirs[:1].tobytes() + reversed_bits.tobytes()
    assert np.array_equal(chain.decode(theirs[:1].tobytes() + reversed_bits.tobytes()), values)


def test_packbits_reads_zarrs_whole_elements_without_their_padding_byte() -> None:
    """zarrs writes full-width byte-sized components as the bytes codec does, with no padding
    byte even when asked for one (packbits_codec.rs); the registry's text adds the byte."""
    values = sample("float32", (10,))
    codec = {"name": "packbits", "configuration": {"padding_encoding": "first_byte"}}
    chain = pipeline([codec], "float32", (10,))
    assert bytes(chain.encode(values)) == b"\0" + values.tobytes()
    assert chain.decode(values.tobytes()).tobytes() == values.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("keepbits", [0, 3, 10])
def test_bitround_floats_as_numcodecs(dtype: str, keepbits: int) -> None:
    values = sample(dtype, (200,)) * 1000
    chain = pipeline([{"name": "bitround", "configuration": {"keepbits": keepbits}}, BYTES], dtype, (200,))
    ours = chain.decode(chain.encode(values))
    theirs = numcodecs.BitRound(keepbits).encode(values)
    assert ours.tobytes() == np.asarray(theirs).tobytes()


def test_bitround_integers_from_the_highest_set_bit() -> None:
    # zarrs' own test of the codec (bitround.rs, codec_bitround_uint).
    values = np.array([0, 1024, 1280, 1664, 1685, 123145182, 4294967295], dtype=np.uint32)
    chain = pipeline([{"name": "bitround", "configuration": {"keepbits": 3}}, BYTES], "uint32", (7,))
    decoded = chain.decode(chain.encode(values))
    assert decoded.tolist() == [0, 1024, 1280, 1536, 1792, 117440512, 3758096384]


ZFP_LOSSY = [({"mode": "fixed_precision", "precision": 14}, {"mode": 3, "precision": 14}),
             ({"mode": "fixed_accuracy", "tolerance": 0.01}, {"mode": 4, "tolerance": 0.01}),
             ({"mode": "fixed_rate", "rate": 10.5}, {"mode": 2, "rate": 10.5})]


@pytest.mark.parametrize(("ours", "theirs"), ZFP_LOSSY, ids=lambda c: str(c["mode"]))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zfp_lossy_modes_decode_as_numcodecs_zfpy(ours: dict[str, Any], theirs: dict[str, Any],
                                                  dtype: str) -> None:
    shape = (6, 8, 5)  # 3 axes: zarrs' fixed rate counts bits as for 3-d blocks, as zfpy does here
    values = sample(dtype, shape)
    chain = pipeline([{"name": "zfp", "configuration": ours}], dtype, shape)
    stored = chain.encode(values)
    reference = numcodecs.ZFPY(**theirs)
    expected = reference.decode(reference.encode(values))
    assert chain.decode(stored).tobytes() == np.asarray(expected).tobytes()
    # Our stream is zfpy's without its header.
    args = {k: v for k, v in theirs.items() if k != "mode"}
    assert bytes(stored) == zfpy.compress_numpy(values, write_header=False, **args)


def test_zfp_fixed_rate_counts_bits_per_3d_block_in_2d() -> None:
    """zarrs sets the rate for 3 dimensions whatever the rank: a 2-d block of 16 values gets
    the bits a 3-d block of 64 would, `rate * 64`."""
    values = sample("float64", (8, 8))
    chain = pipeline([{"name": "zfp", "configuration": {"mode": "fixed_rate", "rate": 2}}], "float64", (8, 8))
    assert len(chain.encode(values)) == 4 * 128 // 8  # 4 blocks of 128 bits


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint16"])
def test_pcodec_is_numcodecs_pcodec(dtype: str) -> None:
    values = sample(dtype, (30, 7))
    chain = pipeline([{"name": "numcodecs.pcodec", "configuration": {"level": 5}}], dtype, (30, 7))
    theirs = numcodecs.PCodec(level=5).encode(values)
    assert bytes(chain.encode(values)) == bytes(theirs)
    assert chain.decode(bytes(theirs)).tobytes() == values.tobytes()


def _chunks(array: Path) -> dict[str, bytes]:
    return {str(p.relative_to(array)): p.read_bytes() for p in (array / "c").rglob("*") if p.is_file()}


CORPUS = sorted(p.name for p in ZARRS.iterdir() if p.is_dir() and not p.name.endswith("-bytes"))


@pytest.mark.parametrize("name", CORPUS)
def test_zarrs_chunks_decode_to_their_bytes_twin_and_encode_back(name: str) -> None:
    array = ZARRS / name
    twin = ZARRS / f"{name.split('-')[0]}-bytes"
    chains = []
    for path in (array, twin):
        doc = json.loads((path / "zarr.json").read_text())
        meta = metadata_from_json(doc)
        spec = ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value)
        chains.append(Pipeline.build(meta.codecs, spec))
    stored, expected = _chunks(array), _chunks(twin)
    assert set(stored) == set(expected) and stored
    for key, data in stored.items():
        decoded = chains[0].decode(data)
        assert decoded.tobytes() == chains[1].decode(expected[key]).tobytes(), key
        ours = bytes(chains[0].encode(decoded))
        if name.endswith("gdeflate"):  # zlib finds other matches than libdeflate: other bytes
            assert chains[0].decode(ours).tobytes() == decoded.tobytes()
        else:
            assert ours == data, key


def test_scale_offset_then_cast_value_as_numcodecs_fixedscaleoffset() -> None:
    """The registry's translation of numcodecs.fixedscaleoffset: scale_offset, then cast_value
    with out_of_range "wrap"."""
    values = np.linspace(-20, 60, 97).astype(np.float32)
    chain = pipeline([{"name": "scale_offset", "configuration": {"offset": 10, "scale": 0.1}},
                      {"name": "cast_value", "configuration": {"data_type": "uint8", "out_of_range": "wrap"}},
                      BYTES], "float32", (97,), fill=10.0)
    reference = numcodecs.FixedScaleOffset(offset=10, scale=0.1, dtype="<f4", astype="u1")
    assert bytes(chain.encode(values)) == bytes(reference.encode(values))
    stored = bytes(reference.encode(values))
    assert chain.decode(stored).tobytes() == np.asarray(reference.decode(stored)).tobytes()


def test_cast_value_maps_nan_and_keeps_the_fill() -> None:
    # The registry's example "Float64 to uint8 with NaN preservation".
    chain = pipeline([{"name": "scale_offset", "configuration": {"offset": -10, "scale": 0.1}},
                      {"name": "cast_value", "configuration": {
                          "data_type": "uint8", "rounding": "nearest-even",
                          "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
                      BYTES], "float64", (5,), fill="NaN")
    stored = bytes(chain.encode(np.array([0.0, 10.0, 2540.0, np.nan, 15.0])))
    assert list(stored) == [1, 2, 255, 0, 2]
    assert np.array_equal(chain.decode(stored), [0.0, 10.0, 2540.0, np.nan, 10.0], equal_nan=True)


@pytest.mark.parametrize(("out_of_range", "expected"), [("clamp", [127, -128, 5]), ("wrap", [-128, 127, 5])])
def test_cast_value_out_of_range(out_of_range: str, expected: list[int]) -> None:
    codec = {"name": "cast_value", "configuration": {"data_type": "int8", "out_of_range": out_of_range}}
    chain = pipeline([codec, BYTES], "int16", (3,))
    stored = bytes(chain.encode(np.array([128, -129, 5], dtype=np.int16)))
    assert np.frombuffer(stored, np.int8).tolist() == expected


def test_cast_value_without_out_of_range_refuses_to_write_what_does_not_fit() -> None:
    chain = pipeline([{"name": "cast_value", "configuration": {"data_type": "uint8"}}, BYTES], "int16", (2,))
    with pytest.raises(ValueError, match="range of uint8"):
        chain.encode(np.array([1, 300], dtype=np.int16))


def test_scale_offset_integers_exact() -> None:
    chain = pipeline([{"name": "scale_offset", "configuration": {"offset": 1000, "scale": 2}}, BYTES],
                     "uint16", (3,), fill=1000)
    stored = chain.encode(np.array([1000, 1010, 1255], dtype=np.uint16))
    assert np.frombuffer(bytes(stored), np.uint16).tolist() == [0, 20, 510]
    assert chain.decode(stored).tolist() == [1000, 1010, 1255]


BAD = [
    ({"name": "bitround", "configuration": {"keepbits": "x"}}, "float32", "configuration.keepbits"),
    ({"name": "bitround", "configuration": {"keepbits": 3, "x": 1}}, "float32", "configuration.x"),
    ({"name": "packbits", "configuration": {"padding_encoding": "middle"}}, "int8", "padding_encoding"),
    ({"name": "packbits", "configuration": {"last_bit": 8}}, "int8", "configuration.last_bit"),
    ({"name": "packbits", "configuration": {"first_bit": 5, "last_bit": 2}}, "int8",
     "configuration.last_bit"),
    ({"name": "reshape", "configuration": {"shape": [7]}}, "int8", "configuration.shape"),
    ({"name": "reshape", "configuration": {"shape": [[0], [0]]}}, "int8", "configuration.shape[1]"),
    ({"name": "zfp", "configuration": {"mode": "fast"}}, "float32", "configuration.mode"),
    ({"name": "zfp", "configuration": {"mode": "fixed_rate"}}, "float32", "configuration.rate"),
    ({"name": "zfp", "configuration": {"mode": "fixed_accuracy", "tolerance": 0.1}}, "int32", "codecs[0]"),
    ({"name": "zfp", "configuration": {"mode": "reversible"}}, "bool", "codecs[0]"),
    ({"name": "numcodecs.pcodec", "configuration": {"level": 99}}, "float32", "configuration.level"),
    ({"name": "numcodecs.pcodec", "configuration": {"delta_spec": "x"}}, "float32",
     "configuration.delta_spec"),
    ({"name": "cast_value", "configuration": {"data_type": "uint99"}}, "float32", "configuration.data_type"),
    ({"name": "cast_value", "configuration": {"data_type": "int8", "out_of_range": "x"}}, "float32",
     "configuration.out_of_range"),
    ({"name": "cast_value", "configuration": {"data_type": "float16", "rounding": "towards-zero"}}, "float32",
     "configuration.rounding"),
    ({"name": "scale_offset", "configuration": {"scale": "x"}}, "float32", "configuration.scale"),
    ({"name": "scale_offset", "configuration": {"scale": 0}}, "int32", "configuration.scale"),
    ({"name": "zarrs.gdeflate", "configuration": {"level": 13}}, "int8", "configuration.level"),
    ({"name": "numcodecs.zfpy", "configuration": {"mode": 9}}, "float64", "codecs[0].configuration"),
    ({"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.1}}, "int8", "codecs[0]"),
    ({"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.1, "compression_kwargs": [0.1]}},
     "float64", "configuration.compression_kwargs"),
    ({"name": "gdeflate_or_so"}, "int8", "codecs[0].name"),
]


@pytest.mark.parametrize(("codec", "dtype", "member"), BAD, ids=[f"{c['name']}-{m}" for c, _, m in BAD])
def test_a_bad_configuration_names_its_member(codec: dict[str, Any], dtype: str, member: str) -> None:
    array_to_bytes = ("packbits", "zfp", "numcodecs.pcodec", "numcodecs.zfpy")
    chain = [codec] if codec["name"] in array_to_bytes else [codec, BYTES]
    with pytest.raises(MetadataError) as error:
        pipeline(chain, dtype, (4, 6))
    assert error.value.member.startswith(member) or error.value.member.endswith(member), error.value


def test_gdeflate_pages_of_64_kib() -> None:
    """Several pages, the last one short; data that deflate stores, and data it compresses."""
    noise = np.random.default_rng(5).integers(0, 256, 150_000).astype(np.uint8)
    for data in (noise, np.repeat(np.arange(50, dtype=np.uint8), 3000)):
        codecs = [BYTES, {"name": "zarrs.gdeflate", "configuration": {"level": 5}}]
        chain = pipeline(codecs, "uint8", data.shape)
        stored = bytes(chain.encode(data))
        assert int.from_bytes(stored[8:16], "little") == 3
        assert np.array_equal(chain.decode(stored), data)


def test_unknown_codecs_still_fail_naming_themselves() -> None:
    specs = parse_codec_list([BYTES, {"name": "zarrs.gdeflate2", "configuration": {"level": 5}}], "codecs")
    with pytest.raises(MetadataError, match=r"unknown codec 'zarrs\.gdeflate2'"):
        Pipeline.build(specs, ChunkSpec((4,), parse_data_type("int8"), b"\0"))


CAST_SOURCES = {
    "float64": [0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, 126.5, 127.5, -128.5, 255.5, 1e10, -1e10, -0.0],
    "float32": [0, 0.5, 1.5, 2.5, -2.5, 3.7, 65504, 70000, 1e-8, -0.0],
    "int32": [0, 1, -1, 127, 128, -129, 255, 256, 70000, -70000, 2**24 + 1],
    "uint16": [0, 1, 127, 128, 255, 256, 65535],
}
ROUNDINGS = ["nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"]


@pytest.mark.parametrize("source", list(CAST_SOURCES))
def test_cast_value_as_zarr_pythons_cast_value_rs(source: str) -> None:
    """Every value, rounding and out_of_range zarrfs accepts casts as cast-value-rs (the
    backend of zarr-python 3.2's cast_value) casts it, errors included."""
    import cast_value_rs

    compared = 0
    for target in ["int8", "uint8", "int16", "int64", "float16", "float32", "float64"]:
        for rounding in ROUNDINGS:
            for out_of_range in [None, "clamp", "wrap"]:
                if out_of_range == "wrap" and target.startswith("float"):
                    continue
                config = {"data_type": target, "rounding": rounding, "out_of_range": out_of_range}
                try:
                    chain = pipeline([{"name": "cast_value", "configuration": {
                        k: v for k, v in config.items() if v is not None}}, BYTES], source, (1,))
                except MetadataError as e:  # only roundings numpy cannot do are refused
                    assert e.member.endswith("rounding") and rounding != "nearest-even"
                    continue
                for value in CAST_SOURCES[source]:
                    one = np.array([value], dtype=source)
                    try:
                        expected: bytes | None = cast_value_rs.cast_array(
                            one, target_dtype=np.dtype(target), rounding_mode=rounding,
                            out_of_range_mode=out_of_range, scalar_map_entries=None).tobytes()
                    except ValueError:
                        expected = None
                    if expected is None:
                        with pytest.raises(ValueError):
                            chain.encode(one)
                    else:
                        assert bytes(chain.encode(one)) == expected, (target, rounding, out_of_range, value)
                    compared += 1
    assert compared > 300


@pytest.mark.parametrize("inner", [
    [{"name": "zfp", "configuration": {"mode": "reversible"}}],
    [{"name": "packbits", "configuration": {"first_bit": 0, "last_bit": 11}}],
    [{"name": "bitround", "configuration": {"keepbits": 4}}, BYTES,
     {"name": "zarrs.gdeflate", "configuration": {"level": 5}}],
    [{"name": "zarrs.squeeze"}, {"name": "numcodecs.pcodec"}],
], ids=["zfp", "packbits", "bitround-gdeflate", "squeeze-pcodec"])
def test_inside_a_shard(inner: list[Any]) -> None:
    sharding = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": [1, 4, 5], "codecs": inner,
        "index_codecs": [BYTES, {"name": "crc32c"}], "index_location": "end"}}
    chain = pipeline([sharding], "int32", (2, 8, 10))
    values = (sample("int32", (2, 8, 10)) >> 20).astype(np.int32)  # 12 bits, as packbits keeps
    decoded = chain.decode(chain.encode(values))
    if inner[0]["name"] == "bitround":
        rounded = bytes(pipeline(inner[:2], "int32", values.shape).encode(values))  # what it keeps
        assert rounded != values.tobytes()
        values = np.frombuffer(rounded, dtype=np.int32).reshape(values.shape)
    assert decoded.tobytes() == values.tobytes()
