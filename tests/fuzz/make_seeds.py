"""Write the seed corpus of every target: ``python tests/fuzz/make_seeds.py`` (tests/ on the
path). Seeds are `tests/fuzz/corpus/TARGET/seed-*`, committed; run this again only to change
them. They are real documents and chunks: written by zarr-python and TensorStore, kerchunk's
references of an h5py file, the tests' own documents (tests/helpers/fuzz_documents.py's valid
documents, tests/reliability's bad-input corpus), and each harness chain's own encoding of a sample."""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .common import CORPUS, selector, write_seed

TESTS = Path(__file__).resolve().parent.parent
RELIABILITY = TESTS / "reliability" / "corpus"


def files_of(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path.relative_to(root).as_posix(), path


def written_stores(root: Path) -> dict[str, Path]:
    """Stores written by zarr-python (v3 and v2: arrays, groups, consolidated) and TensorStore."""
    import tensorstore as ts
    import zarr
    from numcodecs import Blosc, Zlib

    values = np.arange(60, dtype="<i4").reshape(6, 10)
    stores: dict[str, Path] = {}
    for version in (3, 2):
        group = zarr.open_group(root / f"zp{version}", mode="w", zarr_format=version,
                                attributes={"title": "seed"})
        kwargs = ({"compressors": Blosc("lz4", 5, 1)} if version == 2 else
                  {"shards": (6, 10), "compressors": zarr.codecs.ZstdCodec(level=1)})
        array = group.create_array("a", shape=(6, 10), chunks=(3, 5), dtype="<i4", fill_value=0,
                                   dimension_names=["y", "x"] if version == 3 else None, **kwargs)
        array[...] = values
        sub = group.create_group("sub", attributes={"n": 1})
        sub.create_array("b", shape=(4,), chunks=(2,), dtype="f8", fill_value=float("nan"),
                         **({"compressors": Zlib(1)} if version == 2 else {}))[...] = 1.5
        zarr.consolidate_metadata(root / f"zp{version}")
        stores[f"zp{version}"] = root / f"zp{version}"
    for driver in ("zarr3", "zarr"):
        spec = {"driver": driver, "kvstore": {"driver": "file", "path": str(root / f"ts-{driver}")},
                "metadata": {"shape": [6, 10], "data_type" if driver == "zarr3" else "dtype":
                             "uint16" if driver == "zarr3" else "<u2"}, "create": True}
        if driver == "zarr3":
            spec["metadata"]["codecs"] = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [2, 3], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}]}}]
            spec["metadata"]["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": [4, 6]}}
        ts.open(spec).result().write(values.astype("u2")).result()
        stores[f"ts-{driver}"] = root / f"ts-{driver}"
    return stores


def metadata_seeds(stores: dict[str, Path]) -> None:
    from . import fuzz_metadata as target
    from .nodes import SEPARATOR

    def seed(name: str, names: tuple[str, ...], *documents: bytes) -> None:
        write_seed("metadata", name, selector(target.CASES, names) + SEPARATOR.join(documents))

    for store, root in stores.items():
        for relative, path in files_of(root):
            folder, _, name = relative.rpartition("/")
            attrs = path.with_name(".zattrs")
            if name == "zarr.json":
                seed(f"{store}-{folder or 'root'}", ("zarr.json",), path.read_bytes())
            elif name in (".zarray", ".zgroup") and attrs.exists():
                seed(f"{store}-{folder or 'root'}", (name, ".zattrs"), path.read_bytes(), attrs.read_bytes())
            elif name == ".zarray":
                seed(f"{store}-{folder or 'root'}", (".zarray",), path.read_bytes())
    from tests.helpers.fuzz_documents import VALID_DOCS

    for i, document in enumerate(VALID_DOCS):
        seed(f"test_fuzz-valid-{i}", ("zarr.json",), json.dumps(document).encode())
    for case in ("ok_sharded_all_codecs", "fill_float_hex_width", "data_type_numpy_str",
                 "extension_must_understand", "json_invalid_utf8", "chunk_too_large"):
        seed(f"corpus-{case}", ("zarr.json",), (RELIABILITY / "metadata" / case / "zarr.json").read_bytes())
    # Every other case of v2's and v1's (the corpus of a target stays under 50 files).
    for relative, path in [*files_of(RELIABILITY / "v2")][::2]:
        if relative.endswith("/.zarray"):
            seed(f"corpus-v2-{relative.split('/')[0]}", (".zarray",), path.read_bytes())
    for relative, path in [f for f in files_of(RELIABILITY / "v1") if f[0].endswith("/meta")][::2]:
        if relative.endswith("/meta"):
            attrs = path.with_name("attrs")
            names = ("meta", "attrs") if attrs.exists() else ("meta",)
            seed(f"corpus-v1-{relative.split('/')[0]}", names, path.read_bytes(),
                 *([attrs.read_bytes()] if attrs.exists() else []))


def consolidated_seeds(stores: dict[str, Path]) -> None:
    from . import fuzz_consolidated as target
    from .nodes import SEPARATOR

    v3 = (stores["zp3"] / "zarr.json").read_bytes()
    v2 = (stores["zp2"] / ".zmetadata").read_bytes()
    write_seed("consolidated", "zp3", selector(target.CASES, ("zarr.json",)) + v3)
    write_seed("consolidated", "zp2", selector(target.CASES, (".zmetadata",)) + v2)
    zgroup = (stores["zp2"] / ".zgroup").read_bytes()
    write_seed("consolidated", "zp2-beside-zgroup",
               selector(target.CASES, (".zgroup", ".zmetadata")) + zgroup + SEPARATOR + v2)


def shard_seeds(stores: dict[str, Path]) -> None:
    from . import fuzz_shard as target

    for name, codec in target.CODECS.items():
        write_seed("shard", name, selector(target.NAMES, name) + bytes(codec.encode(target.sample(name))))
    shard = (stores["ts-zarr3"] / "c" / "0" / "0").read_bytes()  # TensorStore's, as "end-crc"
    write_seed("shard", "tensorstore", selector(target.NAMES, "end-crc") + shard)
    shard = (stores["zp3"] / "a" / "c" / "0" / "0").read_bytes()  # zarr-python's, zstd inside
    write_seed("shard", "zarr-python", selector(target.NAMES, "zstd") + shard)


def codec_seeds(stores: dict[str, Path]) -> None:
    from . import fuzz_codecs as target

    for name, pipeline in target.PIPELINES.items():
        encoded = bytes(pipeline.encode(target.sample(name)))
        write_seed("codecs", name.replace(".", "_"), selector(target.NAMES, name) + encoded)


def reference_seeds(root: Path) -> None:
    from tests.helpers.references_fixtures import kerchunk_references, write_hdf5

    write_hdf5(root / "data.h5")
    references = kerchunk_references(root / "data.h5", "data.bin")  # the harness's data file
    refs = references["refs"]
    small = {key: refs[key] for key in sorted(refs) if not key.startswith(("cube", "contiguous"))}
    write_seed("references", "kerchunk-h5", json.dumps({**references, "refs": small}).encode())
    zarray = json.dumps({"zarr_format": 2, "shape": [8], "chunks": [4], "dtype": "<u1",
                         "compressor": None, "filters": None, "fill_value": 0, "order": "C"})
    hand = {".zgroup": '{"zarr_format": 2}', "x/.zarray": zarray, "x/.zattrs": "{}",
            "x/0": "base64:" + base64.b64encode(bytes(range(4))).decode(), "x/1": ["data.bin", 4, 4]}
    write_seed("references", "v0-inline-and-range", json.dumps(hand).encode())
    generated = {"version": 1, "templates": {"u": "data.bin"},
                 "gen": [{"key": "x/{{i}}", "url": "{{u}}", "offset": "{{i * 4}}", "length": "4",
                          "dimensions": {"i": {"stop": 2}}}],
                 "refs": {".zgroup": '{"zarr_format": 2}', "x/.zarray": zarray}}
    write_seed("references", "v1-templates-gen", json.dumps(generated).encode())
    outside = {"version": 1, "refs": {".zgroup": '{"zarr_format": 2}', "x/.zarray": zarray,
                                      "x/0": ["/etc/passwd", 0, 4], "x/1": ["s3://b/k", 0, 4]}}
    write_seed("references", "v1-outside", json.dumps(outside).encode())


def zip_seeds(root: Path) -> None:
    from tests.helpers.zip_fixtures import ome_image, ozx, zipped_folder, zipstore_array, zipstore_group

    write_seed("zip", "zipstore-v3-deflated", zipstore_array(root / "a.zip").read_bytes())
    write_seed("zip", "zipstore-v2-group", zipstore_group(root / "g.zip", zarr_format=2).read_bytes())
    image = ome_image(root / "source" / "cells.ome.zarr")
    write_seed("zip", "ozx-zip64", ozx(image, root / "cells.ozx").read_bytes())
    write_seed("zip", "folder-python", zipped_folder(image, root / "f.zip", "python").read_bytes())


def main() -> None:
    for folder in CORPUS.glob("*/"):
        for old in folder.glob("seed-*"):
            old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        stores = written_stores(Path(tmp))
        metadata_seeds(stores)
        consolidated_seeds(stores)
        shard_seeds(stores)
        codec_seeds(stores)
        reference_seeds(Path(tmp))
        zip_seeds(Path(tmp))


if __name__ == "__main__":
    sys.path[:0] = [str(TESTS), str(TESTS.parent)]  # (`fuzz`, and the helpers as `tests.helpers`)
    main()
