"""Fixtures shared by the whole suite: mounting arrays for real, in a temporary directory;
the threads that decode streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest
from mounting import Mount, mounted

from zarrfs.array import chunk_io, streaming

MountFactory = Callable[..., Mount]


@pytest.fixture
def mount_array(tmp_path: Path) -> Iterator[MountFactory]:
    """mount_array(source, options=(), **kwargs) -> Mount; unmounted at the end of the test,
    whether it passed or failed."""
    with ExitStack() as stack:
        count = 0

        def mount(source: str | Path, options: Sequence[str] = (), **kwargs: object) -> Mount:
            nonlocal count
            count += 1
            return stack.enter_context(
                mounted(source, tmp_path / f"mnt{count}", options, **kwargs)  # type: ignore[arg-type]
            )

        yield mount


@pytest.fixture(params=["loaders", "small-chunk lane"])
def stream_threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Streams decoded by the loader threads, then by the one-thread lane for small chunks
    that decode cheaply (zarrfs.array.streaming.SMALL_CHUNK_BYTES, chunk_io's measure)."""
    lane = request.param == "small-chunk lane"
    monkeypatch.setattr(streaming, "SMALL_CHUNK_BYTES", 1 << 40 if lane else 0)
    monkeypatch.setattr(chunk_io, "MEASURED_DECODES", 0)
    monkeypatch.setattr(chunk_io, "CHEAP_DECODE_SECONDS", 1e9)
    return str(request.param)
