"""Icechunk repositories (`icechunk://`): a snapshot's keys (`filesystem`), the following of a
branch (`branches`), writes as commits (`writes`), the versions below `/.versions/`
(`versions`) and the virtual chunk containers a mount reads from (`containers`). Imported
only when a mount asks for one (the icechunk client is heavy)."""

from .driver import IcechunkDriver
from .versions import open_filesystem

__all__ = ["IcechunkDriver", "open_filesystem"]
