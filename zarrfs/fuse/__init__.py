"""The pyfuse3 side of a mount: request handlers (`operations`), errno mapping (`boundary`),
kernel cache invalidation (`kernel`)."""

from .late_replies import quiet_late_release_replies
from .operations import ZarrOperations

__all__ = ["ZarrOperations", "quiet_late_release_replies"]
