"""pyfuse3's ERROR for a release the kernel dropped before its answer is logged at DEBUG; any
other failed reply stays an ERROR (zarrfs.fuse.late_replies)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from zarrfs.fuse import quiet_late_release_replies

pytestmark = pytest.mark.fast


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@pytest.fixture
def kept() -> Iterator[Kept]:
    logger, root = logging.getLogger("pyfuse3"), logging.getLogger()
    handler, filters, level = Kept(), list(logger.filters), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    quiet_late_release_replies()
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logger.filters[:] = filters


def test_a_dropped_release_is_no_error(kept: Kept) -> None:
    log = logging.getLogger("pyfuse3")
    log.error("fuse_release(): fuse_reply_* failed with %s", "No such file or directory")
    log.error("fuse_releasedir(): fuse_reply_* failed with %s", "No such file or directory")
    assert kept.lines == []


def test_other_failed_replies_stay_errors(kept: Kept) -> None:
    log = logging.getLogger("pyfuse3")
    log.error("fuse_read(): fuse_reply_* failed with %s", "No such file or directory")
    log.error("fuse_release(): fuse_reply_* failed with %s", "Invalid argument")
    assert kept.lines == ["ERROR fuse_read(): fuse_reply_* failed with No such file or directory",
                          "ERROR fuse_release(): fuse_reply_* failed with Invalid argument"]
