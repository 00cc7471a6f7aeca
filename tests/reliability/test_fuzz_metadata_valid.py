"""Property-based fuzzing of `parse_metadata`, the positive controls and the mutations.

A parser that refused everything would pass "parses or raises" checks: valid documents and
harmless mutations of them must be accepted with the right values (and the codec pipeline built
from what they return); mutated valid documents either parse, surviving a round trip through
`to_json`, or raise MetadataError, and the test counts what it accepted.

tests/fuzz/ is the other half: coverage-guided atheris harnesses (scripts/fuzz) over every
input zarrfs parses, blosc and reference sets included, checking only that nothing but
zarrfs's own errors escapes; their corpus (seeded with VALID_DOCS) is replayed there.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.fuzz_documents import (
    BYTES,
    FUZZ,
    JSON,
    SPECIAL_INTS,
    SPECIAL_SCALARS,
    VALID,
    VALID_DOCS,
    doc,
    open_fully,
)
from zarrfs.formats.v3 import parse_metadata


def without(member: str, **changes: Any) -> dict[str, Any]:
    document = doc(**changes)
    del document[member]
    return document


# Changes to the first valid document that keep it valid: each must be accepted, with the
# values checked by `check_parsed`, so a parser that refuses too much fails here.
HARMLESS: dict[str, tuple[dict[str, Any], bytes]] = {
    "nested attributes": (
        doc(attributes={"nested": {"list": [None, True, 1.5, "x", {"deep": []}]}, "": 0}),
        np.int16(0).tobytes(),
    ),
    "no attributes": (without("attributes"), np.int16(0).tobytes()),
    "no dimension names": (without("dimension_names"), np.int16(0).tobytes()),
    "a null dimension name": (doc(dimension_names=[None, "x"]), np.int16(0).tobytes()),
    "negative fill": (doc(fill_value=-7), np.int16(-7).tobytes()),
    "integral float fill": (doc(fill_value=3.0), np.int16(3).tobytes()),
    "largest fill": (doc(fill_value=32767), np.int16(32767).tobytes()),
    "big endian": (
        doc(codecs=[{"name": "bytes", "configuration": {"endian": "big"}}]),
        np.int16(0).tobytes(),
    ),
    "chunks not dividing the shape": (
        doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [3, 5]}}),
        np.int16(0).tobytes(),
    ),
    "chunks larger than the shape": (
        doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [20, 30]}}),
        np.int16(0).tobytes(),
    ),
    "dot separator": (
        doc(chunk_key_encoding={"name": "default", "configuration": {"separator": "."}}),
        np.int16(0).tobytes(),
    ),
    "zero length": (doc(shape=[0, 12]), np.int16(0).tobytes()),
    "extension that need not be understood": (
        {**doc(), "my_extension": {"must_understand": False, "x": [1]}},
        np.int16(0).tobytes(),
    ),
    "empty storage transformers": (doc(storage_transformers=[]), np.int16(0).tobytes()),
    "gzip level 9": (
        doc(codecs=[BYTES, {"name": "gzip", "configuration": {"level": 9}}]),
        np.int16(0).tobytes(),
    ),
    "float NaN payload in hex": (doc(data_type="float32", fill_value="0x7f800001"),
                                 (0x7F800001).to_bytes(4, "little")),
    "float fill word": (doc(data_type="float64", fill_value="-Infinity"),
                        np.float64(-np.inf).tobytes()),
}


def check_parsed(document: dict[str, Any], fill: bytes) -> None:
    """`document` is accepted, and parses to what it says."""
    raw = json.dumps(document)
    assert open_fully(raw), f"refused a valid document: {raw}"
    meta = parse_metadata(raw)
    assert meta.shape == tuple(document["shape"])
    assert meta.chunk_shape == tuple(document["chunk_grid"]["configuration"]["chunk_shape"])
    assert meta.data_type.name == document["data_type"]
    assert meta.fill_value == fill, (meta.fill_value, fill)
    assert [c.name for c in meta.codecs] == [c["name"] for c in document["codecs"]]
    encoding = document["chunk_key_encoding"]
    assert meta.chunk_key_encoding.name == encoding["name"]
    assert meta.chunk_key_encoding.separator == encoding["configuration"]["separator"]
    names = document.get("dimension_names")
    assert meta.dimension_names == (None if names is None else tuple(names))
    assert dict(meta.attributes) == document.get("attributes", {})


@pytest.mark.parametrize("which", range(len(VALID)))
def test_valid_documents_parse(which: int) -> None:
    check_parsed(*VALID[which])


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_harmless_changes_to_a_valid_document_are_accepted(name: str) -> None:
    check_parsed(*HARMLESS[name])


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document (the root included)."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


# JSON without NaN or infinities, for values that must leave a document valid wherever it is
# (strict JSON has no such numbers, and a parser may fairly refuse them).
FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children,
                                                                      max_size=4),
    max_leaves=16,
)


def mutate(document: Any, data: st.DataObject) -> tuple[Any, bool]:
    """`document` changed in one place; and whether the change keeps a valid document valid
    (set an attribute, or add an extension member that need not be understood)."""
    action = data.draw(
        st.sampled_from(["replace", "delete", "insert", "special", "attribute", "extension"]),
        label="action",
    )
    if action == "attribute" and isinstance(document.get("attributes"), dict):
        key = data.draw(st.text(max_size=6), label="attribute")
        document["attributes"][key] = data.draw(FINITE_JSON, label="attribute value")
        return document, True
    if action == "extension":
        name = "x-" + data.draw(st.text(max_size=6), label="extension")
        config = data.draw(st.dictionaries(st.text(max_size=6), FINITE_JSON, max_size=3))
        document[name] = {**config, "must_understand": False}
        return document, True
    target = data.draw(st.sampled_from(paths(document)[1:]), label="path")
    parent = document
    for step in target[:-1]:
        parent = parent[step]
    last = target[-1]
    if action == "delete":
        del parent[last]
    elif action == "insert":
        if isinstance(parent, list):
            parent.insert(last, data.draw(JSON))
        else:
            parent[data.draw(st.text(max_size=6), label="new key")] = data.draw(JSON)
    elif action == "special":
        parent[last] = data.draw(SPECIAL_SCALARS | st.sampled_from(SPECIAL_INTS), label="special")
    else:
        parent[last] = data.draw(JSON, label="value")
    return document, False


def test_parse_metadata_mutated_valid_documents() -> None:
    outcomes: Counter[str] = Counter()

    @FUZZ
    @given(st.sampled_from(range(len(VALID_DOCS))), st.integers(1, 3), st.data())
    def run(which: int, count: int, data: st.DataObject) -> None:
        document = json.loads(json.dumps(VALID_DOCS[which]))
        harmless = True
        for _ in range(count):
            if not paths(document)[1:]:
                break
            document, kept_valid = mutate(document, data)
            harmless = harmless and kept_valid
        accepted = open_fully(json.dumps(document))
        assert accepted or not harmless, f"refused a harmless change: {document!r}"
        outcomes["cases"] += 1
        outcomes["harmless"] += harmless
        outcomes["accepted"] += accepted

    run()
    # About a fifth are only harmless changes and more are accepted; a parser that refuses
    # everything (or a strategy that stopped making valid documents) fails here.
    assert outcomes["harmless"] >= 10, outcomes
    assert outcomes["accepted"] >= outcomes["cases"] // 10, outcomes
