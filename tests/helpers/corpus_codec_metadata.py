"""The corpus's zarr.json cases of the codecs list and sharding (make_corpus.py), with the
other members' and the valid documents (`ok_*`) the corpus must not over-reject."""

from __future__ import annotations

from tests.helpers.corpus_docs import BYTES, CRC32C, MetadataCase, base_doc, dumps, grid, sharding, without


def codec_metadata_cases() -> dict[str, MetadataCase]:
    sharded = {"shape": [16, 16], "chunk_grid": grid([8, 8])}
    cases: dict[str, MetadataCase] = {
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
