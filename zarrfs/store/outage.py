"""An outage of a store, as a check with it met one (the disk cache's checks of its entries;
its users' close-to-open rechecks, `Store.outage`, which the mount and the server ask): a
check the store did not answer within its bound (`settings.CHECK_SECONDS` for the disk
cache's, and the mount's) or answered with a fault makes the caller serve what it has, and
not ask again for `settings.OUTAGE_SECONDS`. Each
outage is said once in the log, and so is its end. What the caller serves meanwhile, and how
it says so to its users (an errno, an HTTP status), is the caller's."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..errors import ZarrfsError
from .settings import OUTAGE_SECONDS

log = logging.getLogger(__name__)


class Outage:
    """Whether the store is taken as not answering now, and until when."""

    def __init__(self, what: str) -> None:
        self._what = what  # (what is served unchecked meanwhile, for the log)
        self._until = 0.0
        self._down = False
        self._lock = threading.Lock()

    @property
    def until(self) -> float:
        """The `time.monotonic()` until which the store is not asked (past: it is asked)."""
        return self._until

    def ongoing(self) -> bool:
        return time.monotonic() < self._until

    def began(self, problem: str) -> None:
        """The store did not answer a check (`problem`): not asked again for a while."""
        with self._lock:
            self._until = time.monotonic() + OUTAGE_SECONDS
            said, self._down = self._down, True
        if not said:
            log.warning("the store is not answering (%s): %s served unchecked until it does", problem,
                        self._what)

    def ended(self) -> None:
        """The store answered a check."""
        with self._lock:
            said, self._down = self._down, False
        if said:
            log.warning("the store answers again: %s checked again", self._what)

    def ask(self, question: Callable[[], bool], about: str) -> bool:
        """A recheck's answer, `question()` on what `about` names; False while the store is not
        answering, or when it fails to (the outage begins)."""
        if self.ongoing():
            return False
        try:
            answer = question()
        except (OSError, ZarrfsError) as e:
            self.check_failed(about, str(e))
            return False
        self.ended()
        return answer

    def check_failed(self, about: str, problem: str) -> None:
        """A recheck of what `about` names got no answer (`problem`)."""
        self.began(f"could not check {about} for changes by other writers: {problem}")
