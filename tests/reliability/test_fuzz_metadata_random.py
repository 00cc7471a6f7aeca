"""Property-based fuzzing of `parse_metadata` with random input: random bytes, random JSON
and random members of a document either parse or raise MetadataError, and what parses survives
a round trip through `to_json`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers.fuzz_documents import FUZZ, JSON, VALID_DOCS, doc, open_fully


def is_valid_document(value: Any) -> bool:
    return any(value == valid for valid in VALID_DOCS)


def examples(*values: Any) -> Callable[[Any], Any]:
    """`@example(v)` for each value: cases hypothesis always tries first."""

    def apply(test: Any) -> Any:
        for value in values:
            test = example(value)(test)
        return test

    return apply


# The positive controls of the fuzz tests below: the valid documents themselves, which each
# test is given first and must accept.


@FUZZ
@given(st.binary(max_size=200))
@examples(*(json.dumps(valid).encode() for valid in VALID_DOCS))
def test_parse_metadata_random_bytes(raw: bytes) -> None:
    accepted = open_fully(raw)
    try:
        valid = is_valid_document(json.loads(raw))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError)
        valid = False
    assert accepted or not valid, f"refused a valid document: {raw!r}"


@FUZZ
@given(JSON)
@examples(*VALID_DOCS)
def test_parse_metadata_random_json(value: Any) -> None:
    accepted = open_fully(json.dumps(value))
    assert accepted or not is_valid_document(value), f"refused a valid document: {value!r}"


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(sorted(doc())) | st.text(max_size=6),
        JSON,
        min_size=0,
        max_size=12,
    )
)
@examples(*({k: v for k, v in valid.items() if k not in ("zarr_format", "node_type")}
            for valid in VALID_DOCS))
def test_parse_metadata_random_members(members: dict[str, Any]) -> None:
    document = {"zarr_format": 3, "node_type": "array", **members}
    accepted = open_fully(json.dumps(document))
    assert accepted or not is_valid_document(document), f"refused a valid document: {document!r}"
