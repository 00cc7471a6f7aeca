"""The `zarrfs` and `mount.zarrfs` commands: arguments in, lines out; the work is done by
`zarrfs.cli.commands`.

    zarrfs mount SOURCE MOUNTPOINT [-o OPTIONS] [-f]
    zarrfs serve SOURCE [--listen HOST:PORT] [-o OPTIONS] [--token-file F]
                 [--users-file F --tls-cert F --tls-key F] [--allow-plain-http]
                 [--allow-host NAME] [--allow-origin ORIGIN]
    zarrfs SOURCE MOUNTPOINT -o OPTIONS          (the form mount.fuse3 uses for fuse.zarrfs)
    mount.zarrfs SOURCE MOUNTPOINT [-n -s -v] -o OPTIONS   (mount -t zarrfs)
    zarrfs info SOURCE
    zarrfs create SOURCE --shape 100,200 --dtype uint16 --chunks 10,20 [...]
    zarrfs check SOURCE [--jobs N]
    zarrfs import RAW DEST --shape 100,200 --dtype uint16 --chunks 10,20 [--order F] [...]
    zarrfs install-system [--prefix DIR]
    zarrfs options [NAME ...] [--markdown]

Errors are one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import ZarrfsError
from ..options import MountOptions, TreeOptions
from . import commands, option_help

COMMANDS = ("mount", "serve", "info", "create", "check", "import", "resize", "stats", "install-system",
            "options")


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

    mount = commands.add_parser("mount", help="mount an array or a group on a directory",
                                epilog=option_help.synopsis(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    mount.add_argument("source", help="a path or an fsspec URL (s3://, gcs://, memory://, ...)")
    mount.add_argument("mountpoint")
    mount.add_argument("-o", dest="options", action="append", default=[],
                       help="comma-separated mount options (ro, cache=1G, endian=big, ...)")
    mount.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    mount.set_defaults(run=_run_mount)

    serve = commands.add_parser("serve", help="serve the tree a mount shows over WebDAV and HTTP (no FUSE)",
                                epilog=option_help.synopsis(serving=True),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("source", help="a path or an fsspec URL, as for mount")
    serve.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                       help="where to listen (default 127.0.0.1:8080; any other host needs credentials)")
    serve.add_argument("-o", dest="options", action="append", default=[],
                       help="comma-separated options, as for mount (ro, rw, cache=1G, user=, ...)")
    serve.add_argument("--users-file",
                       help="basic auth: a file of USER:PASSWORD lines (off loopback: needs TLS)")
    serve.add_argument("--token-file",
                       help="a file holding a token (a bearer token, or any user's password; off "
                            "loopback: needs TLS)")
    serve.add_argument("--tls-cert", help="the server's certificate (PEM): serve HTTPS")
    serve.add_argument("--tls-key", help="the certificate's private key (PEM)")
    serve.add_argument("--allow-plain-http", action="store_true",
                       help="serve credentials over plain HTTP off 127.0.0.1 (where anyone on the way "
                            "can read them; the log warns): without it they need --tls-cert")
    serve.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                       help="a name the server answers to (repeatable); besides it only loopback "
                            "addresses, localhost and the --listen host (against DNS rebinding)")
    serve.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                       help="answer CORS for web pages of ORIGIN, scheme://host[:port] (repeatable; "
                            "not *): they read; they write only when credentials are asked")
    serve.add_argument("--client-timeout", type=_positive, default=30, metavar="SECONDS",
                       help="drop a client silent this long in the middle of a request, or whose "
                            "request's headers take longer, or whose body then comes at less than "
                            "500 bytes a second (default 30)")
    serve.set_defaults(run=_run_serve)

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
    resize.add_argument("--force", action="store_true",
                        help="resize even while a zarrfs mount serves it (its daemon is not told)")
    resize.add_argument("-o", dest="options", action="append", default=[],
                        help="store options, as for mount (endpoint_url=, anon, profile=)")
    resize.set_defaults(run=_run_resize)

    stats = commands.add_parser("stats", help="the counters of a mounted zarrfs")
    stats.add_argument("mountpoint")
    stats.add_argument("--json", action="store_true", help="one JSON object")
    stats.set_defaults(run=_run_stats)

    system = commands.add_parser("install-system",
                                 help="link /sbin/mount.zarrfs and install the systemd units (as root)")
    system.add_argument("--prefix", default="/", help="install below this directory (default: /)")
    system.set_defaults(run=_run_install_system)

    options = commands.add_parser("options", help="what each option of mount and serve (-o) does")
    options.add_argument("names", nargs="*", metavar="NAME", help="these options only (default: all)")
    options.add_argument("--markdown", action="store_true", help="all of them as docs/usage.md's table")
    options.set_defaults(run=_run_options)
    return parser


def _add_creation_options(create: argparse.ArgumentParser) -> None:
    create.add_argument("-o", dest="options", action="append", default=[],
                        help="store options, as for mount (endpoint_url=, anon, profile=)")
    create.add_argument("--shape", required=True, type=_int_list)
    create.add_argument("--dtype", required=True, choices=commands.DATA_TYPE_NAMES, metavar="DTYPE")
    create.add_argument("--chunks", type=_int_list, help="chunk (inner chunk) shape (default: about 1 MiB)")
    create.add_argument("--shards", type=_int_list, help="shard shape: chunks are then inner chunks")
    create.add_argument("--codec", default="zstd:3",
                        help="zstd[:LEVEL], gzip[:LEVEL], blosc[:CNAME][:LEVEL] or none (as -o new_codec=)")
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


# -- the commands (`commands` does the work) ----------------------------------------------


def _run_mount(args: argparse.Namespace) -> int:
    options = MountOptions.parse(args.options)
    return commands.mount(args.source, args.mountpoint, options, foreground=args.foreground)


def _run_serve(args: argparse.Namespace) -> int:
    options = TreeOptions.parse(args.options)
    return commands.serve(args.source, args.listen, options, users_file=args.users_file,
                          token_file=args.token_file, certificate=args.tls_cert, key=args.tls_key,
                          allow_hosts=args.allow_host, allow_origins=args.allow_origin,
                          allow_plain_http=args.allow_plain_http, client_timeout=args.client_timeout)


def _run_info(args: argparse.Namespace) -> int:
    print("\n".join(commands.info(args.source, TreeOptions.parse(args.options))))
    return 0


def _run_check(args: argparse.Namespace) -> int:
    report = commands.check(args.source, TreeOptions.parse(args.options), jobs=args.jobs)
    for problem in report.problems:
        print(f"{args.source.rstrip('/')}/{problem.key}: {problem.text}")
    verdict = "sound" if report.sound else _count(len(report.problems), "problem")
    print(f"zarrfs check: {verdict}: {_count(report.arrays, 'array')}, "
          f"{_count(report.chunks, 'stored chunk')}, {report.nbytes} bytes", file=sys.stderr)
    return 0 if report.sound else 1


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _run_import(args: argparse.Namespace) -> int:
    metadata, stored = commands.import_raw(args.raw, args.source, TreeOptions.parse(args.options),
                                           _new_array(args), order=args.order, endian=args.endian,
                                           jobs=args.jobs)
    print(f"imported {args.raw} into {args.source}: {commands.dims(metadata.shape)} "
          f"{metadata.data_type.name}, {stored} chunks stored")
    return 0


def _run_resize(args: argparse.Namespace) -> int:
    groups = commands.resize(args.source, TreeOptions.parse(args.options), tuple(args.shape),
                             force=args.force)
    also = f" (and the consolidated metadata of {', '.join(groups)})" if groups else ""
    print(f"resized {args.source} to {commands.dims(args.shape)}{also}")
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    counters = commands.stats(args.mountpoint)
    if args.json:
        print(json.dumps(counters))
    else:
        for name, value in counters.items():
            shown = f"{value:.3f}" if isinstance(value, float) else str(value)
            print(f"{name + ':':<16} {shown}")
    return 0


def _run_install_system(args: argparse.Namespace) -> int:
    for line in commands.install_system(args.prefix):
        print(line)
    if args.prefix == "/":
        print("then: systemctl daemon-reload")
    return 0


def _run_options(args: argparse.Namespace) -> int:
    print(option_help.markdown_table() if args.markdown else "\n".join(option_help.described(args.names)))
    return 0


def _run_create(args: argparse.Namespace) -> int:
    metadata = commands.create(args.source, TreeOptions.parse(args.options), _new_array(args))
    print(f"created {args.source}: {commands.dims(metadata.shape)} {metadata.data_type.name}")
    return 0


def _new_array(args: argparse.Namespace) -> commands.NewArray:
    return commands.NewArray(tuple(args.shape), args.dtype, args.chunks, args.shards, args.codec,
                             args.fill_value, args.dimension_names, args.key_separator)

