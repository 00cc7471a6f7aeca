"""An outage of a remote store, as the close-to-open checks met it: a check the store did not
answer within `settings.CHECK_SECONDS` (or answered with a fault) makes the mount serve what it
has, its disk cache's entries included, and not ask again for `settings.OUTAGE_SECONDS`."""

from __future__ import annotations

import logging
import threading
import time

from .settings import OUTAGE_SECONDS

log = logging.getLogger(__name__)


class Outage:
    """Whether the store is taken as not answering now; each outage is said once in the log."""

    def __init__(self, what: str) -> None:
        self._what = what  # (what is served unchecked meanwhile, for the log)
        self._until = 0.0
        self._down = False
        self._lock = threading.Lock()

    def ongoing(self) -> bool:
        return time.monotonic() < self._until

    def began(self, problem: str) -> None:
        with self._lock:
            self._until = time.monotonic() + OUTAGE_SECONDS
            said, self._down = self._down, True
        if not said:
            log.warning("the store is not answering (%s): %s served unchecked until it does", problem,
                        self._what)

    def ended(self) -> None:
        with self._lock:
            said, self._down = self._down, False
        if said:
            log.warning("the store answers again: %s checked again", self._what)
