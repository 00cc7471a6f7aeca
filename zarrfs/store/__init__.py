"""The store layer: a thin key/value layer over fsspec (see `core`)."""

from .core import ANY, ByteRange, Capabilities, Expect, RetryPolicy, Store, SuffixRange, one_line
from .fetching import opened
from .local import TEMP_PREFIX, Opened, temporary_owner_alive
from .values import Versioned

__all__ = ["ANY", "TEMP_PREFIX", "ByteRange", "Capabilities", "Expect", "Opened", "RetryPolicy", "Store",
           "SuffixRange", "Versioned", "one_line", "opened", "temporary_owner_alive"]
