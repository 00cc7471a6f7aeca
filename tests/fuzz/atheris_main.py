"""One target under atheris: `python -m fuzz.atheris_main TARGET [libFuzzer options] [CORPUS...]`
(with tests/ on the path; scripts/fuzz runs it). zarrfs is instrumented for coverage; the
libraries below it mostly not (they would slow every execution, and they are not ours to fix)."""

from __future__ import annotations

import importlib
import sys

import atheris

# zarrfs, and the one library module whose branches decide what reaches zarrfs's checks of a
# reference set (fsspec's reference filesystem: templates, `gen`, inline data).
INSTRUMENTED = ["zarrfs", "fsspec.implementations.reference"]


def main() -> None:
    """`--self PATH` (the launcher scripts/fuzz writes) is given to libFuzzer as argv[0]: its
    -merge runs argv[0] again, and a module run with python -m cannot be."""
    target, options = sys.argv[1], sys.argv[2:]
    argv0 = sys.argv[0]
    if options[:1] == ["--self"]:
        argv0, options = options[1], options[2:]
    with atheris.instrument_imports(include=INSTRUMENTED):
        from .common import harness_module, quiet_logging

        module = importlib.import_module(harness_module(target))
    quiet_logging()
    atheris.Setup([argv0, *options], module.fuzz_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
