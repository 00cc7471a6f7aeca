"""What the harnesses share: the one contract they check, and how an input picks a case.

The contract: any input either parses/decodes or raises one of zarrfs's own typed errors
(`ZarrfsError`: MetadataError, CodecError, ChunkError, StoreError...). Anything else escaping
`fuzz_one` -- IndexError, KeyError, TypeError, a ValueError not ours, RecursionError,
MemoryError -- is a finding: atheris reports it and saves the input.

An input is one selector byte (which case: a file name, a codec chain) then the payload, so
every corpus file replays the same way without atheris.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from zarrfs.errors import ZarrfsError

EXPECTED: tuple[type[BaseException], ...] = (ZarrfsError,)
CORPUS = Path(__file__).parent / "corpus"
T = TypeVar("T")


def split(data: bytes, cases: Sequence[T]) -> tuple[T, bytes]:
    """The case an input's first byte selects, and the rest of the input."""
    if not data:
        return cases[0], b""
    return cases[data[0] % len(cases)], data[1:]


def selector(cases: Sequence[T], case: T) -> bytes:
    """The first byte of an input selecting `case` (for seeds)."""
    return bytes([list(cases).index(case)])


def expect_typed(run: Callable[[], object]) -> bool:
    """Run one case; True when it succeeded, False when it raised a typed error of ours."""
    try:
        run()
    except EXPECTED:
        return False
    return True


def corpus_files(target: str) -> list[Path]:
    """The committed inputs of a target (seeds, what fuzzing found, crashes), sorted."""
    folder = CORPUS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def write_seed(target: str, name: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{name.replace('/', '-')}").write_bytes(data)


TARGETS = ("metadata", "consolidated", "shard", "references", "codecs", "zip")


def harness_module(target: str) -> str:
    """The harness's module, in this package as it was imported (`fuzz` under the runner,
    `tests.fuzz` under pytest)."""
    return f"{__package__}.fuzz_{target}"


def quiet_logging() -> None:
    """The harnesses exercise code that logs what it skips; a fuzz run must not print it."""
    import logging

    logging.disable(logging.CRITICAL)
    os.environ.setdefault("ZARRFS_FUZZ", "1")
