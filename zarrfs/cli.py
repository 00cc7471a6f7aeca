"""The `zarrfs` and `mount.zarrfs` commands.

    zarrfs mount SOURCE MOUNTPOINT [-o OPTIONS] [-f]
    zarrfs SOURCE MOUNTPOINT -o OPTIONS          (the form mount.fuse3 uses for fuse.zarrfs)
    mount.zarrfs SOURCE MOUNTPOINT [-n -s -v] -o OPTIONS   (mount -t zarrfs)
    zarrfs info SOURCE
    zarrfs create SOURCE --shape 100,200 --dtype uint16 --chunks 10,20 [...]
    zarrfs check SOURCE [--jobs N]
    zarrfs import RAW DEST --shape 100,200 --dtype uint16 --chunks 10,20 [--order F] [...]

Errors are one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from . import __version__
from .array import ZarrArray
from .codecs import ShardingCodec
from .errors import ZarrfsError
from .formats import ArrayDescription, ChunkKeyEncoding, CodecSpec, fill_value_to_json, parse_user_fill_value
from .formats.dtypes import DATA_TYPES
from .formats.v3 import METADATA_KEY
from .info import describe_tree
from .options import MountOptions
from .store import Store

COMMANDS = ("mount", "info", "create", "check", "import", "resize", "stats")


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] not in COMMANDS and not args[0].startswith("-") and len(args) >= 2:
        args.insert(0, "mount")  # `zarrfs SOURCE MOUNTPOINT -o ...`, as mount.fuse3 calls it
    parsed = _parser().parse_args(args)
    try:
        return int(parsed.run(parsed))
    except ZarrfsError as e:
        print(f"zarrfs: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def mount_helper_main(argv: Sequence[str] | None = None) -> int:
    """`mount -t zarrfs SOURCE DIR -o OPTS` runs `mount.zarrfs SOURCE DIR [-sfnv] -o OPTS`."""
    parser = _Parser(prog="mount.zarrfs")
    parser.add_argument("source")
    parser.add_argument("mountpoint")
    parser.add_argument("-o", dest="options", action="append", default=[])
    for flag in ("-n", "-s", "-v", "-f"):  # no mtab, sloppy, verbose, fake: nothing for us
        parser.add_argument(flag, action="store_true")
    parsed = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if parsed.f:
        return 0
    return main(["mount", parsed.source, parsed.mountpoint, *_option_args(parsed.options)])


def _option_args(groups: list[str]) -> list[str]:
    return [arg for group in groups for arg in ("-o", group)]


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="zarrfs", description="Mount Zarr arrays and groups (v3, v2, v1) as files.")
    parser.add_argument("--version", action="version", version=f"zarrfs {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    mount = commands.add_parser("mount", help="mount an array or a group on a directory")
    mount.add_argument("source", help="a path or an fsspec URL (s3://, gcs://, memory://, ...)")
    mount.add_argument("mountpoint")
    mount.add_argument("-o", dest="options", action="append", default=[],
                       help="comma-separated mount options (ro, cache=1G, endian=big, ...)")
    mount.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    mount.set_defaults(run=_run_mount)

    info = commands.add_parser("info", help="describe an array, or the tree of a group")
    info.add_argument("source")
    info.add_argument("-o", dest="options", action="append", default=[],
                      help="store options, as for mount (endpoint_url=, anon, profile=)")
    info.set_defaults(run=_run_info)

    create = commands.add_parser("create", help="create a new, empty array")
    create.add_argument("source")
    _add_creation_options(create)
    create.set_defaults(run=_run_create)

    check = commands.add_parser("check", help="decode every stored chunk and report the damaged ones")
    check.add_argument("source")
    check.add_argument("-o", dest="options", action="append", default=[],
                       help="store options, as for mount (endpoint_url=, anon, profile=)")
    check.add_argument("--jobs", type=_positive, help="decoding threads (default: one per CPU)")
    check.set_defaults(run=_run_check)

    load = commands.add_parser("import", help="create a new array holding the elements of a raw file")
    load.add_argument("raw", help="the raw file of elements, or - for standard input")
    load.add_argument("source", metavar="dest")
    load.add_argument("--order", choices=("C", "F"), default="C", help="element order of RAW")
    load.add_argument("--endian", choices=("little", "big"), default="little", help="byte order of RAW")
    load.add_argument("--jobs", type=_positive, help="encoding threads (default: one per CPU)")
    _add_creation_options(load)
    load.set_defaults(run=_run_import)

    resize = commands.add_parser("resize", help="change the shape of an array (not mounted)")
    resize.add_argument("source")
    resize.add_argument("--shape", required=True, type=_int_list)
    resize.add_argument("-o", dest="options", action="append", default=[],
                        help="store options, as for mount (endpoint_url=, anon, profile=)")
    resize.set_defaults(run=_run_resize)

    stats = commands.add_parser("stats", help="the counters of a mounted zarrfs")
    stats.add_argument("mountpoint")
    stats.add_argument("--json", action="store_true", help="one JSON object")
    stats.set_defaults(run=_run_stats)
    return parser


def _add_creation_options(create: argparse.ArgumentParser) -> None:
    create.add_argument("-o", dest="options", action="append", default=[],
                        help="store options, as for mount (endpoint_url=, anon, profile=)")
    create.add_argument("--shape", required=True, type=_int_list)
    create.add_argument("--dtype", required=True, choices=sorted(DATA_TYPES), metavar="DTYPE")
    create.add_argument("--chunks", type=_int_list, help="chunk (inner chunk) shape (default: about 1 MiB)")
    create.add_argument("--shards", type=_int_list, help="shard shape: chunks are then inner chunks")
    create.add_argument("--codec", default="zstd:3", help="zstd:LEVEL, gzip:LEVEL, blosc:CNAME:LEVEL or none")
    create.add_argument("--fill-value", default="0")
    create.add_argument("--dimension-names", type=lambda text: text.split(","))
    create.add_argument("--key-separator", choices=("/", "."), default="/")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",")) if text else ()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


# -- mount -----------------------------------------------------------------------------------


def _run_mount(args: argparse.Namespace) -> int:
    from .daemon import mount  # imports pyfuse3 and trio: only for this command

    options = MountOptions.parse(args.options)
    return mount(args.source, args.mountpoint, options, foreground=args.foreground)


# -- info ------------------------------------------------------------------------------------


def _run_info(args: argparse.Namespace) -> int:
    options = MountOptions.parse(args.options)
    store = Store.open(args.source, options.storage_options, read_only=True, settings=options.source)
    tree = describe_tree(store)
    if tree is not None:
        print("\n".join(tree))
        return 0
    array = ZarrArray.open(store)
    try:
        for name, value in describe(array):
            print(f"{name + ':':<19} {value}")
    finally:
        array.close()
    return 0


def describe(array: ZarrArray) -> list[tuple[str, str]]:
    meta = array.metadata
    sharding = array.pipeline.array_to_bytes
    sharded = isinstance(sharding, ShardingCodec)
    rows = [
        ("zarr format", str(meta.zarr_format)),
        ("shape", dims(meta.shape)),
        ("data type", meta.data_type.name),
        ("chunk shape", dims(meta.chunk_shape) + (" (shards)" if sharded else "")),
    ]
    if isinstance(sharding, ShardingCodec):
        rows.append(("inner chunk shape", dims(sharding.inner_shape)))
    rows += [
        ("codecs", " -> ".join(codec_text(c) for c in meta.codecs)),
        ("fill value", str(fill_value_to_json(meta.fill_value, meta.data_type))),
        ("dimension names", ", ".join(str(n) for n in meta.dimension_names) if meta.dimension_names else "-"),
        ("chunk key encoding", f"{meta.chunk_key_encoding.name} ({meta.chunk_key_encoding.separator!r})"),
        ("flat view element", meta.data_type.storage.newbyteorder("<").str),
        ("flat view size", f"{meta.nbytes} bytes"),
        ("stored chunks", f"{array.stored_chunk_count()} of {math.prod(meta.grid_shape)}"),
    ]
    return rows


def dims(shape: Sequence[int]) -> str:
    return " x ".join(map(str, shape)) if shape else "() (scalar)"


def codec_text(spec: CodecSpec) -> str:
    config = spec.configuration
    if spec.name == "sharding_indexed":
        inner = " -> ".join(codec_text(CodecSpec(c["name"], c.get("configuration", {}), ""))
                            for c in config.get("codecs", []))
        return f"sharding_indexed(index at {config.get('index_location', 'end')}; {inner})"
    if not config:
        return spec.name
    return f"{spec.name}(" + ", ".join(f"{k}={v}" for k, v in config.items()) + ")"


# -- check and import -------------------------------------------------------------------------


def _run_check(args: argparse.Namespace) -> int:
    from .check import check

    options = MountOptions.parse(args.options)
    store = Store.open(args.source, options.storage_options, read_only=True, settings=options.source)
    report = check(store, jobs=args.jobs)
    for problem in report.problems:
        print(f"{args.source.rstrip('/')}/{problem.key}: {problem.text}")
    verdict = "sound" if report.sound else _count(len(report.problems), "problem")
    print(f"zarrfs check: {verdict}: {_count(report.arrays, 'array')}, "
          f"{_count(report.chunks, 'stored chunk')}, {report.nbytes} bytes", file=sys.stderr)
    return 0 if report.sound else 1


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _run_import(args: argparse.Namespace) -> int:
    from .importer import import_raw

    metadata = creation_metadata(args)
    storage = MountOptions.parse(args.options).storage_options
    stored = import_raw(args.raw, args.source, storage, metadata, order=args.order, endian=args.endian,
                        jobs=args.jobs)
    print(f"imported {args.raw} into {args.source}: {dims(metadata.shape)} {metadata.data_type.name}, "
          f"{stored} chunks stored")
    return 0


# -- resize and stats ------------------------------------------------------------------------


def _run_resize(args: argparse.Namespace) -> int:
    from .resize import resize_offline

    storage = MountOptions.parse(args.options).storage_options
    groups = resize_offline(args.source, storage, tuple(args.shape))
    also = f" (and the consolidated metadata of {', '.join(groups)})" if groups else ""
    print(f"resized {args.source} to {dims(args.shape)}{also}")
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    import json
    import os

    try:
        counters = json.loads(os.getxattr(args.mountpoint, "user.zarrfs.stats"))
    except OSError as e:
        raise ZarrfsError(f"{args.mountpoint}: not a zarrfs mount ({e.strerror})") from None
    if args.json:
        print(json.dumps(counters))
    else:
        for name, value in counters.items():
            shown = f"{value:.3f}" if isinstance(value, float) else str(value)
            print(f"{name + ':':<16} {shown}")
    return 0


# -- create ----------------------------------------------------------------------------------


def _run_create(args: argparse.Namespace) -> int:
    metadata = creation_metadata(args)
    store = Store.open(args.source, MountOptions.parse(args.options).storage_options)
    if store.exists(METADATA_KEY):
        raise ZarrfsError(f"{args.source} already holds an array or group (zarr.json exists)")
    ZarrArray.create(store, metadata).close()
    print(f"created {args.source}: {dims(metadata.shape)} {metadata.data_type.name}")
    return 0


def creation_metadata(args: argparse.Namespace) -> ArrayDescription:
    from .formats.creation import auto_chunks
    from .formats.v3 import metadata_from_json

    data_type = DATA_TYPES[args.dtype]
    rank = len(args.shape)
    if args.chunks is None:  # (import always gives them)
        if args.shards:
            raise ZarrfsError("--shards needs --chunks")
        args.chunks = auto_chunks(args.shape, data_type.itemsize)
    for name, shape in (("--chunks", args.chunks), ("--shards", args.shards)):
        if shape is not None and len(shape) != rank:
            raise ZarrfsError(f"{name} needs {rank} numbers, like --shape")
    inner = [_bytes_codec(data_type.itemsize), *_compressor(args.codec, data_type.itemsize)]
    codecs: list[dict[str, Any]] = inner
    if args.shards:
        codecs = [{
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": list(args.chunks),
                "codecs": inner,
                "index_codecs": [_bytes_codec(8), {"name": "crc32c"}],
                "index_location": "end",
            },
        }]
    fill_bits = parse_user_fill_value(args.fill_value, data_type)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(args.shape),
        "data_type": data_type.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(args.shards or args.chunks)}},
        "chunk_key_encoding": ChunkKeyEncoding("default", args.key_separator).to_json(),
        "fill_value": fill_value_to_json(fill_bits, data_type),
        "codecs": codecs,
        "attributes": {},
    }
    if args.dimension_names is not None:
        doc["dimension_names"] = args.dimension_names
    return metadata_from_json(doc)


def _bytes_codec(itemsize: int) -> dict[str, Any]:
    if itemsize == 1:
        return {"name": "bytes"}
    return {"name": "bytes", "configuration": {"endian": "little"}}


def _compressor(text: str, itemsize: int) -> list[dict[str, Any]]:
    name, _, rest = text.partition(":")
    try:
        if name == "none":
            return []
        if name == "zstd":
            return [{"name": "zstd", "configuration": {"level": int(rest or 3), "checksum": False}}]
        if name == "gzip":
            return [{"name": "gzip", "configuration": {"level": int(rest or 6)}}]
        if name == "blosc":
            cname, _, level = rest.partition(":")
            return [{"name": "blosc", "configuration": {
                "cname": cname or "lz4", "clevel": int(level or 5), "shuffle": "shuffle",
                "typesize": itemsize, "blocksize": 0}}]
    except ValueError:
        pass
    raise ZarrfsError(f"--codec {text!r}: expected zstd:LEVEL, gzip:LEVEL, blosc:CNAME:LEVEL or none")


if __name__ == "__main__":
    sys.exit(main())
