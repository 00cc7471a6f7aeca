"""The layering check (scripts/check_layers.py), run as CI runs it on small package trees: the
view families (none imports another; the registry and the array directory alone import them)
and the rooms of the array layer (each entered through its face, no circle between them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.layer_trees import CLEAN, package_tree, run_check

pytestmark = pytest.mark.fast


FAMILIES = {
    "views/placement/__init__.py": "from .core import Placement\n",
    "views/placement/core.py": "class Placement: ...\n",
    "views/tiff/__init__.py": "from .array_file import tiff_file\n",
    "views/tiff/array_file.py": "from ..files import x\nfrom ..placement import Placement\n",
    "views/tiff/layout.py": "",
    "views/text/__init__.py": "from .file import TEXT_NAME\n",
    "views/text/file.py": "from ..files import x\n",
}
CONTRACT_ONLY = ("(of the view contract only zarrfs.views, zarrfs.views.array_dir, "
                 "zarrfs.views.registry import view families)")


def test_a_view_family_imports_no_other_family(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/hdf5/__init__.py": "from .array_file import h5_file\n",
                                  "views/hdf5/array_file.py": "from ..placement import Placement\n"
                                                              "from ..tiff import tiff_file\n",
                                  "views/hdf5/strings.py": "from zarrfs.views.tiff.layout import L\n"
                                                           "from .array_file import h5_file\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.views.hdf5.strings imports zarrfs.views.tiff.layout "
        "(enter zarrfs.views.tiff through its __init__)",
        "family: zarrfs.views.hdf5.array_file imports zarrfs.views.tiff "
        "(zarrfs.views.hdf5 must not import another view family, zarrfs.views.tiff)",
        "family: zarrfs.views.hdf5.strings imports zarrfs.views.tiff.layout "
        "(zarrfs.views.hdf5 must not import another view family, zarrfs.views.tiff)",
    ]


def test_of_the_view_contract_only_the_registry_and_array_directory_import_families(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/__init__.py": "from .text import TEXT_NAME\n",
                                  "views/registry.py": "from .text import TEXT_NAME\n"
                                                       "from .tiff import tiff_file\n",
                                  "views/array_dir.py": "from . import registry, tiff\n",
                                  "views/xattrs.py": "from .text import TEXT_NAME\n",
                                  "views/placement/geozarr.py": "def f():\n"
                                                                "    from ..tiff import tiff_file\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        f"family: zarrfs.views.placement.geozarr imports zarrfs.views.tiff {CONTRACT_ONLY}",
        f"family: zarrfs.views.xattrs imports zarrfs.views.text {CONTRACT_ONLY}",
    ]


def test_the_tree_and_the_fuse_layer_take_view_families_from_the_registry(tmp_path: Path) -> None:
    """They name no family (not even its face): a new family is its subpackage and its line in
    the registry, which the tree and the fuse layer read."""
    package = package_tree(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/registry.py": "from .text import TEXT_NAME\n"
                                                       "from .tiff import tiff_file\n",
                                  "tree/group_views.py": "from ..views.tiff import tiff_file\n",
                                  "tree/string_arrays.py": "from ..views.registry import TEXT_NAME\n"
                                                           "from ..views.text.file import TEXT_NAME\n",
                                  "fuse/file_ops.py": "def f():\n"
                                                      "    from ..views import text\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.tree.string_arrays imports zarrfs.views.text.file "
        "(enter zarrfs.views.text through its __init__)",
        "family: zarrfs.fuse.file_ops imports zarrfs.views.text "
        "(fuse/ names no view family: it takes what it needs of zarrfs.views.text "
        "from zarrfs.views.registry)",
        "family: zarrfs.tree.group_views imports zarrfs.views.tiff "
        "(tree/ names no view family: it takes what it needs of zarrfs.views.tiff "
        "from zarrfs.views.registry)",
        "family: zarrfs.tree.string_arrays imports zarrfs.views.text.file "
        "(tree/ names no view family: it takes what it needs of zarrfs.views.text "
        "from zarrfs.views.registry)",
    ]


ROOMS = {
    "array/__init__.py": "from .core import ZarrArray\n",
    "array/core.py": "from .cache import ChunkCache\nfrom .reads import ChunkLoader\n",
    "array/cache/__init__.py": "from .cache import ChunkCache\nfrom .held import HeldBytes\n",
    "array/cache/cache.py": "from ..geometry import Geometry\nfrom .held import HeldBytes\n",
    "array/cache/held.py": "",
    "array/geometry.py": "",
    "array/reads/__init__.py": "from .loader import ChunkLoader\n",
    "array/reads/loader.py": "from ..cache import ChunkCache\nfrom .streams import S\n",
    "array/reads/streams.py": "",
}


def test_a_room_of_the_array_layer_is_entered_through_its_face(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN, **ROOMS,
                                  "array/reads/streams.py": "from ..cache.held import HeldBytes\n",
                                  "array/shared.py": "from .cache.cache import ChunkCache\n",
                                  "array/decoding/worker.py": "from .wire import send\n",
                                  "array/decoding/wire.py": "def send(): ...\n",
                                  "array/recheck.py": "from .decoding.wire import send\n",
                                  "views/files.py": "from ..array import ZarrArray\n"
                                                    "from ..array.cache import HeldBytes\n"
                                                    "from ..array.reads.loader import ChunkLoader\n"})
    (package / "array" / "decoding" / "__init__.py").unlink()  # a room being written: no face yet
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        # (the layers above enter the array layer through zarrfs.array: a room's face is no way in)
        "face: zarrfs.views.files imports zarrfs.array.cache (views/ enters array/ through zarrfs.array)",
        "face: zarrfs.views.files imports zarrfs.array.reads.loader "
        "(views/ enters array/ through zarrfs.array)",
        "face: zarrfs.array.reads.streams imports zarrfs.array.cache.held "
        "(enter zarrfs.array.cache through its __init__)",
        "face: zarrfs.array.recheck imports zarrfs.array.decoding.wire "
        "(enter zarrfs.array.decoding through its __init__)",
        "face: zarrfs.array.shared imports zarrfs.array.cache.cache "
        "(enter zarrfs.array.cache through its __init__)",
        "face: zarrfs.views.files imports zarrfs.array.reads.loader "
        "(enter zarrfs.array.reads through its __init__)",
    ]


def test_the_rooms_of_the_array_layer_import_each_other_in_no_circle(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN, **ROOMS,
                                  "array/cache/__init__.py": "from .cache import ChunkCache\n",
                                  "array/cache/cache.py": "from ..geometry import Geometry\n",
                                  "array/cache/held.py": "def f():\n    from ..writes import WriteBack\n",
                                  "array/writes/__init__.py": "from .back import WriteBack\n",
                                  "array/writes/back.py": "from ..reads import ChunkLoader\n",
                                  "array/stored/__init__.py": "from .io import PlainIO\n",
                                  "array/stored/io.py": "from ..cache import ChunkCache\n"})
    status, out = run_check(package)  # no module is in a cycle: the cache's face imports no `held`
    assert status == 1
    assert out[:-1] == ["room cycle: zarrfs.array.cache <-> zarrfs.array.reads <-> zarrfs.array.writes"]
