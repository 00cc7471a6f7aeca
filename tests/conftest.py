"""Fixtures shared by the whole suite: mounting arrays for real, in a temporary directory;
the threads that decode streams."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest
from mounting import Mount, mounted

from zarrfs.array import streaming

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
    (zarrfs.array.streaming.SMALL_CHUNK_BYTES decides which, by the chunks' size)."""
    monkeypatch.setattr(streaming, "SMALL_CHUNK_BYTES", 0 if request.param == "loaders" else 1 << 40)
    return str(request.param)
