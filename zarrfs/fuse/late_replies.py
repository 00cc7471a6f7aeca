"""pyfuse3 logs an ERROR when the kernel no longer knows a request it answers. For a release
(of a file or a directory) that is no error: the kernel sends it after the closer has gone
on, waits for no answer, and may drop it before the answer comes (seen at unmount under
load, where it failed tests that check the log for errors). Those lines go to DEBUG."""

from __future__ import annotations

import logging

_RELEASES = ("fuse_release(): fuse_reply_", "fuse_releasedir(): fuse_reply_")
_FORGOTTEN = "No such file or directory"  # (ENOENT: no request of that id in the kernel)


class LateReleaseReplies(logging.Filter):
    """Lowers pyfuse3's failed replies to releases the kernel dropped to DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            message = record.getMessage()
            if message.startswith(_RELEASES) and message.endswith(_FORGOTTEN):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def quiet_late_release_replies() -> None:
    logging.getLogger("pyfuse3").addFilter(LateReleaseReplies())
