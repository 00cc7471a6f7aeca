"""The files of an array that has no flat view because its elements are strings or bytes of
no fixed size: its text and the other files the view families make of it
(`views.registry.string_array_files`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..array import VariableArray
from ..array_metadata import variable_array_of
from ..errors import ZarrfsError
from ..formats import NodeMetadata
from ..formats.variable import NotVariableError
from ..store import Store
from ..views import FileView
from ..views.registry import string_array_files
from ..views.xattrs import variable_attributes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StringFiles:
    """An array of strings or bytes and its files, by name."""

    array: VariableArray
    files: dict[str, FileView]
    source: Any  # (its strings as a group's data.h5 reads them too; None: it cannot)

    def xattrs(self) -> dict[str, bytes]:
        return variable_attributes(self.array.description)


def string_files(store: Store, node: NodeMetadata, problem: str,
                 views: frozenset[str]) -> tuple[StringFiles | None, str]:
    """The files of the array `node` of strings or bytes (None: it is no such array) and why
    it has no flat view (`problem`, what opening it said, or why its strings cannot be read)."""
    try:
        array = variable_array_of(store, node)
    except NotVariableError:
        return None, problem
    except ZarrfsError as e:
        return None, f"its strings cannot be read: {e}"
    files, source = string_array_files(array, views)
    log.info("array %s of strings or bytes is shown as %s", node.path or "/", " and ".join(files))
    return StringFiles(array, files, source), problem
