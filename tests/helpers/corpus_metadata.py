"""The corpus's zarr.json cases (make_corpus.py): each refused, naming the member at fault, or
valid (`ok_*`); the codecs' and sharding's are corpus_codec_metadata.py's."""

from __future__ import annotations

from tests.helpers.corpus_codec_metadata import codec_metadata_cases
from tests.helpers.corpus_docs import MetadataCase, base_doc, dumps, grid, without


def metadata_cases() -> dict[str, MetadataCase]:
    """Name -> (zarr.json bytes, the member at fault or None when valid)."""
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
    }
    return cases | codec_metadata_cases()
