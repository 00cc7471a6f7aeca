"""Write the bad-input corpus: ``python -m tests.helpers.make_corpus [OUTDIR]`` (from the repository's
root). The cases are made by corpus_metadata.py and corpus_codec_metadata.py (zarr.json),
corpus_chunks.py (chunks) and corpus_old_formats.py (Zarr v2 and v1), of corpus_docs.py's pieces.

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

import json
import shutil
import sys
from pathlib import Path

from tests.helpers.corpus_chunks import chunk_cases
from tests.helpers.corpus_docs import Doc, dumps
from tests.helpers.corpus_metadata import metadata_cases
from tests.helpers.corpus_old_formats import v1_cases, v2_cases

CORPUS = Path(__file__).resolve().parents[1] / "reliability" / "corpus"  # (test_corpus.py's)


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
