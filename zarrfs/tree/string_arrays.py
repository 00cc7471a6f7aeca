"""The files of an array that has no flat view because its elements are strings or bytes of
no fixed size: its text (`data.txt`), and for strings `data.h5` (`views.hdf5.strings`) when
the mount shows that view."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..array import VariableArray
from ..array_metadata import variable_array_of
from ..errors import ZarrfsError
from ..formats import NodeMetadata
from ..formats.variable import NotVariableError
from ..store import Store
from ..views import FileView
from ..views.hdf5 import H5_KIND, H5_NAME, StringSource, VariableStrings, shows_strings_h5, strings_h5_file
from ..views.text import TEXT_NAME, TextFile
from ..views.xattrs import variable_attributes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StringFiles:
    """An array of strings or bytes and its files, by name."""

    array: VariableArray
    files: dict[str, FileView]
    source: StringSource | None  # (strings a data.h5 shows, as the group's file reads them too)

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
    files: dict[str, FileView] = {TEXT_NAME: TextFile(array)}
    source = VariableStrings(array) if shows_strings_h5(array) else None
    if H5_KIND in views and source is not None:
        files[H5_NAME] = strings_h5_file(source)
    log.info("array %s of strings or bytes is shown as %s", node.path or "/", " and ".join(files))
    return StringFiles(array, files, source), problem
