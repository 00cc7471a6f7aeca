"""Fixtures shared by the whole suite: mounting arrays for real, in a temporary directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest
from mounting import Mount, mounted

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
