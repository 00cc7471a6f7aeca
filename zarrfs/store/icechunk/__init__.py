"""Icechunk repositories (`icechunk://`): a snapshot's keys (`filesystem`), the following of a
branch (`branches`), writes as commits (`writes`), the versions below `/.versions/`
(`versions`) and the virtual chunk containers a mount reads from (`containers`). They are
imported only when a mount opens a repository (the icechunk client is heavy): this face holds
the driver and the options (`options`) alone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .driver import IcechunkDriver
from .options import COMMIT, OPTIONS, REF

if TYPE_CHECKING:
    import fsspec

    from ..settings import SourceOptions

__all__ = ["COMMIT", "OPTIONS", "REF", "IcechunkDriver", "open_filesystem"]


def open_filesystem(url: str, options: dict[str, Any],
                    settings: SourceOptions) -> tuple[fsspec.AbstractFileSystem, str]:
    """The repository at `url` (`versions.open_filesystem`), its client imported only now: this
    face is imported on every mount, for the options above."""
    from .versions import open_filesystem as open_repository

    return open_repository(url, options, settings)
