"""The daemon's last write-back: a bug in it (not a store fault) is logged with its traceback
and reported as a failed exit, and the caller still closes everything (it returns)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from zarrfs.daemon.served import final_flush


class Broken:
    def flush(self) -> None:
        raise RuntimeError("a bug in the write-back")


def test_a_bug_in_the_final_flush_is_logged_and_returned(caplog: pytest.LogCaptureFixture) -> None:
    tree = SimpleNamespace(opened_arrays=lambda: [Broken()],
                           shared=SimpleNamespace(cache=SimpleNamespace(dirty_bytes=4096)))
    with caplog.at_level(logging.ERROR):
        assert final_flush(tree) is False  # type: ignore[arg-type]
    assert "4096 dirty bytes not written" in caplog.text
    assert "RuntimeError: a bug in the write-back" in caplog.text
