"""The pyfuse3 side of a mount: request handlers (`operations`), errno mapping (`boundary`),
kernel cache invalidation (`kernel`)."""

from .operations import ZarrOperations

__all__ = ["ZarrOperations"]
