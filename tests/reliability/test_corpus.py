"""The bad-input corpus (see make_corpus.py): every case is refused the way expected.json says.

Metadata cases run in this process. Chunk cases decode in child processes
(decode_worker.py), because a C decoder given hostile bytes may crash the process rather than
raise; a crash is then reported against the case instead of taking the test run down.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fsspec.implementations.local import LocalFileSystem

from tests.helpers import make_corpus
from tests.helpers.faulty_fs import child_env
from zarrfs.array_metadata import open_array
from zarrfs.codecs import ChunkSpec, Pipeline
from zarrfs.errors import MetadataError
from zarrfs.formats.v3 import parse_metadata
from zarrfs.grid import Box
from zarrfs.store import Store

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS = HERE / "corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())
METADATA_CASES = sorted(c for c, e in EXPECTED.items() if e["kind"] in ("metadata", "ok"))
OK_CASES = sorted(c for c, e in EXPECTED.items() if e["kind"] == "ok")
CHUNK_CASES = sorted(c for c, e in EXPECTED.items() if e["kind"] == "chunk")
# What one decode of a 64-byte chunk may allocate (Python-visible); bombs claim gigabytes.
MAX_PEAK = 16 << 20

Item = tuple[str, str]


def chunk_keys(case: str) -> list[str]:
    root = CORPUS / case
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and path.name != "zarr.json"
    )


def open_fully(raw: bytes) -> None:
    """Everything that validates metadata: parse it and build its codec pipeline."""
    meta = parse_metadata(raw)
    Pipeline.build(meta.codecs, ChunkSpec(meta.chunk_shape, meta.data_type, meta.fill_value))


def check_metadata_outcome(case: str, attempt: Any) -> None:
    expected = EXPECTED[case]
    if expected["kind"] == "ok":
        attempt()
        return
    try:
        attempt()
    except MetadataError as e:
        assert e.member == expected["member"], f"{case}: wrong member in {e}"
    except Exception as e:
        pytest.fail(f"{case}: raised {type(e).__name__} instead of MetadataError: {e}")
    else:
        pytest.fail(f"{case}: accepted; expected MetadataError({expected['member']!r})")


@pytest.mark.parametrize("case", METADATA_CASES)
def test_metadata_is_refused_naming_the_member(case: str) -> None:
    raw = (CORPUS / case / "zarr.json").read_bytes()
    check_metadata_outcome(case, lambda: open_fully(raw))


@pytest.mark.parametrize("case", METADATA_CASES)
def test_array_open_refuses_metadata_naming_the_member(case: str) -> None:
    store = Store(LocalFileSystem(), str(CORPUS / case), read_only=True)

    def attempt() -> None:
        open_array(store, threads=1).close()

    check_metadata_outcome(case, attempt)


def fill_bits(document: dict[str, Any]) -> bytes:
    """The raw bits (native order) the document's fill value stands for."""
    dtype = np.dtype(document["data_type"])
    fill = document["fill_value"]
    if isinstance(fill, str) and fill.startswith("0x"):
        return int(fill, 16).to_bytes(dtype.itemsize, "little")
    return np.array(float(fill) if isinstance(fill, str) else fill, dtype=dtype).tobytes()


@pytest.mark.parametrize("case", OK_CASES)
def test_valid_metadata_opens_and_reads_as_its_fill_value(case: str) -> None:
    """The positive control of the metadata cases: the valid ones are not just "not refused"
    but open as what they say, and (storing no chunk) read as their fill value throughout."""
    document = json.loads((CORPUS / case / "zarr.json").read_bytes())
    meta = parse_metadata((CORPUS / case / "zarr.json").read_bytes())
    assert meta.shape == tuple(document["shape"])
    assert meta.data_type.name == document["data_type"]
    assert meta.chunk_shape == tuple(document["chunk_grid"]["configuration"]["chunk_shape"])
    assert [c.name for c in meta.codecs] == [c["name"] for c in document["codecs"]]
    assert meta.fill_value == fill_bits(document)
    store = Store(LocalFileSystem(), str(CORPUS / case), read_only=True)
    array = open_array(store, threads=1)
    try:
        assert array.shape == meta.shape
        got = np.asarray(array.read(Box((0,) * len(meta.shape), meta.shape)))
    finally:
        array.close()
    assert got.shape == meta.shape
    assert got.tobytes() == meta.fill_value * math.prod(meta.shape)


# -- chunks, in child processes ---------------------------------------------------------------


def run_worker(level: str, items: list[Item]) -> dict[Item, dict[str, Any]]:
    """Decode `items` in decode_worker processes; a crash is recorded against its item and a
    new worker carries on with the rest."""
    env = child_env(MALLOC_ARENA_MAX="2")
    results: dict[Item, dict[str, Any]] = {}
    remaining = list(items)
    while remaining:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.helpers.decode_worker", str(CORPUS), level],
            input=json.dumps(remaining),
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
            timeout=120,
            check=False,
        )
        begun: Item | None = None
        for line in proc.stdout.splitlines():
            record = json.loads(line)
            if "begin" in record:
                begun = (record["begin"][0], record["begin"][1])
            else:
                results[(record["end"][0], record["end"][1])] = record
                begun = None
        if proc.returncode == 0:
            break
        if begun is None:
            raise RuntimeError(f"decode worker failed (exit {proc.returncode}):\n{proc.stderr}")
        results[begun] = {
            "outcome": f"crashed the process (exit status {proc.returncode})",
            "stderr": proc.stderr[-2000:],
        }
        remaining = [item for item in remaining if item not in results]
    return results


def ordered_items(with_whole_array: bool) -> list[Item]:
    """Every chunk of every case, bad keys first, so the good ones also show recovery."""
    items: list[Item] = []
    for case in CHUNK_CASES:
        bad = EXPECTED[case]["bad_keys"]
        items += [(case, key) for key in bad]
        items += [(case, key) for key in chunk_keys(case) if key not in bad]
        if with_whole_array:
            items.append((case, ""))
    return items


@pytest.fixture(scope="module")
def codec_results() -> dict[Item, dict[str, Any]]:
    return run_worker("codec", ordered_items(with_whole_array=False))


@pytest.fixture(scope="module")
def array_results() -> dict[Item, dict[str, Any]]:
    return run_worker("array", ordered_items(with_whole_array=True))


def describe(result: dict[str, Any]) -> str:
    text = f"{result['outcome']}: {result.get('message', '')}"
    if "stderr" in result:
        text += f"\n--- stderr ---\n{result['stderr']}"
    return text


@pytest.mark.parametrize("case", CHUNK_CASES)
def test_codec_refuses_corrupt_chunk(case: str, codec_results: dict[Item, dict[str, Any]]) -> None:
    bad = EXPECTED[case]["bad_keys"]
    problems = []
    for key in chunk_keys(case):
        result = codec_results[(case, key)]
        if key in bad and result["outcome"] != "CodecError":
            problems.append(f"{key}: expected CodecError, got {describe(result)}")
        if key not in bad and not (result["outcome"] == "ok" and result["match"]):
            problems.append(
                f"{key} (good): {describe(result)}, values match: {result.get('match')}"
            )
        if result.get("peak", 0) > MAX_PEAK:
            problems.append(f"{key}: decoding allocated {result['peak']} bytes")
    assert not problems, f"{case}:\n" + "\n".join(problems)


@pytest.mark.parametrize("case", CHUNK_CASES)
def test_array_read_names_corrupt_chunk(
    case: str, array_results: dict[Item, dict[str, Any]]
) -> None:
    bad = EXPECTED[case]["bad_keys"]
    problems = []
    for key in [*chunk_keys(case), ""]:
        result = array_results[(case, key)]
        where = key or "whole array"
        if key in bad or not key:
            if result["outcome"] != "ChunkError":
                problems.append(
                    f"{where}: expected ChunkError, got {describe(result)}"
                    + (" (wrong values returned)" if result.get("match") is False else "")
                )
            elif result["key"] not in bad:
                problems.append(f"{where}: ChunkError names {result['key']!r}, not one of {bad}")
        elif not (result["outcome"] == "ok" and result["match"]):
            problems.append(
                f"{where} (good, read after the bad one): {describe(result)}, "
                f"values match: {result.get('match')}"
            )
        if result.get("peak", 0) > MAX_PEAK:
            problems.append(f"{where}: reading allocated {result['peak']} bytes")
    assert not problems, f"{case}:\n" + "\n".join(problems)


# -- the corpus itself ------------------------------------------------------------------------


def test_every_case_directory_is_listed() -> None:
    on_disk = {
        f"{group}/{path.name}"
        for group in ("metadata", "chunks", "v2", "v1")
        for path in (CORPUS / group).iterdir()
        if path.is_dir()
    }
    assert on_disk == set(EXPECTED)
    # The valid documents are the metadata tests' positive controls: there must be some.
    assert len(OK_CASES) >= 5, OK_CASES
    for case in CHUNK_CASES:
        keys = chunk_keys(case)
        assert set(EXPECTED[case]["bad_keys"]) <= set(keys), case
        assert len(keys) > len(EXPECTED[case]["bad_keys"]), f"{case}: no good chunk to compare"


def test_committed_corpus_is_what_the_script_writes(tmp_path: Path) -> None:
    """The committed files are make_corpus.py's output. Compared: the case list, every
    zarr.json, and every chunk file's name and bytes (compressed chunks come from the installed
    numcodecs; if a new version encodes differently, regenerate and commit)."""
    fresh = tmp_path / "corpus"
    make_corpus.write(fresh)
    assert (fresh / "expected.json").read_text() == (CORPUS / "expected.json").read_text()
    committed = {p.relative_to(CORPUS): p for p in CORPUS.rglob("*") if p.is_file()}
    written = {p.relative_to(fresh): p for p in fresh.rglob("*") if p.is_file()}
    assert sorted(map(str, written)) == sorted(map(str, committed))
    differ = [
        str(rel) for rel, p in written.items() if p.read_bytes() != committed[rel].read_bytes()
    ]
    assert not differ, f"regenerate the corpus (python -m {make_corpus.__name__}): {differ}"
