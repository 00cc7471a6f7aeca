"""The layering check (scripts/check_layers.py), run as CI runs it on small package trees:
import cycles, layer violations and long files fail it, allowlisted ones are only counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_layers.py"


def _package(root: Path, files: dict[str, str]) -> Path:
    """A package `zarrfs` under `root` with these files (path -> source); every directory
    gets an __init__.py."""
    package = root / "zarrfs"
    for name, source in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in [path.parent, *path.parent.parents]:
            if parent == root:
                break
            (parent / "__init__.py").touch()
        path.write_text(source)
    return package


def _summary(root: Path, known: int, new: int) -> str:
    return f"check_layers: {known} known violations remain ({root / 'known.txt'}), {new} new"


def _check(package: Path, known: list[str] | None = None) -> tuple[int, list[str]]:
    allowlist = package.parent / "known.txt"
    allowlist.write_text("".join(f"{line}\n" for line in ["# a comment", *(known or [])]))
    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(package),
                           "--known", str(allowlist)], capture_output=True, text=True, timeout=60)
    assert not done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


CLEAN = {
    "errors.py": "class ZarrfsError(Exception): ...\n",
    "store/core.py": "from ..errors import ZarrfsError\n",
    "codecs/base.py": "from zarrfs.formats import description\n",
    "formats/description.py": "import json\n",
    "array/core.py": "from ..codecs import base\nfrom ..store.core import ZarrfsError\n",
    "views/files.py": "from zarrfs.array import ZarrArray\n",
    "fuse/operations.py": "from .. import errors, options\nfrom ..views.files import x\n",
    "options.py": "",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    status, out = _check(_package(tmp_path, CLEAN))
    assert (status, out) == (0, [_summary(tmp_path, 0, 0)])


def test_a_cycle_is_reported_once_with_all_its_modules(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "formats/v3.py": "from . import nodes\n",
                                  "formats/nodes.py": "def f():\n    from .children import c\n",
                                  "formats/children.py": ("from typing import TYPE_CHECKING\n"
                                                          "if TYPE_CHECKING:\n"
                                                          "    from zarrfs.formats.v3 import M\n")})
    status, out = _check(package)
    assert status == 1
    assert out[0] == "cycle: zarrfs.formats.children <-> zarrfs.formats.nodes <-> zarrfs.formats.v3"
    assert out[1:] == [_summary(tmp_path, 0, 1)]


def test_importing_a_package_imports_its_init(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "store/__init__.py": "from .remote import Remote\n",
                                  "store/remote.py": "import zarrfs.store\n"})
    status, out = _check(package)
    assert status == 1
    assert out[0] == "cycle: zarrfs.store <-> zarrfs.store.remote"


def test_layer_violations_name_the_import_and_the_rule(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "fuse/operations.py": "from ..array.core import ZarrArray\n",
                                  "store/local.py": "def f():\n    from zarrfs.codecs import base\n",
                                  "views/files.py": "from ..tree import nodes\n",
                                  "tree/nodes.py": ""})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "layer: zarrfs.fuse.operations imports zarrfs.array.core "
        "(fuse/ may import only errors, options, tree, views)",
        "layer: zarrfs.store.local imports zarrfs.codecs.base (store/ must not import codecs)",
        "layer: zarrfs.views.files imports zarrfs.tree.nodes (views/ must not import tree)",
    ]


def test_the_server_sits_beside_fuse_and_reaches_no_pyfuse3(tmp_path: Path) -> None:
    """serve/ imports only what fuse/ may; nothing the server runs (serve/, daemon.serving and
    whatever they import, at any depth) imports pyfuse3."""
    package = _package(tmp_path, {**CLEAN,
                                  "serve/site.py": ("from ..tree import nodes\n"
                                                    "from ..fuse import operations\n"),
                                  "tree/nodes.py": "def f():\n    from ..views import helpers\n",
                                  "views/helpers.py": "import pyfuse3.extra\n",
                                  "daemon/serving.py": "from ..serve import site\n",
                                  "daemon/run.py": "import pyfuse3\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "layer: zarrfs.serve.site imports zarrfs.fuse.operations (serve/ may import only errors, "
        "options, tree, views)",
        "fuse: zarrfs.serve.site -> zarrfs.tree.nodes -> zarrfs.views.helpers imports pyfuse3 "
        "(the server runs without FUSE)",
    ]


def test_a_subpackage_is_entered_through_its_face(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "store/objects/__init__.py": "from .s3 import s3_read\n",
                                  "store/objects/s3.py": "from .signing import sign\n",
                                  "store/objects/signing.py": "def sign(): ...\n",
                                  "store/core.py": "from .objects import s3_read\n",
                                  "store/fetching.py": "from .objects.s3 import s3_read\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == ["face: zarrfs.store.fetching imports zarrfs.store.objects.s3 "
                        "(enter zarrfs.store.objects through its __init__)",
                        # (and store/'s top reaches a driver through the registry alone)
                        f"driver: zarrfs.store.core imports zarrfs.store.objects {THROUGH_THE_REGISTRY}",
                        f"driver: zarrfs.store.fetching imports zarrfs.store.objects.s3 "
                        f"{THROUGH_THE_REGISTRY}"]


def test_commands_enter_other_layers_through_their_faces(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "formats/__init__.py": "from .nodes import discover\n",
                                  "formats/nodes.py": "def discover(): ...\n",
                                  "cli/info.py": "from ..formats import discover\n",
                                  "cli/check.py": "from ..formats.nodes import discover\n",
                                  "options.py": "from .daemon import mountpoint\n",
                                  "daemon/mountpoint.py": ""})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.cli.check imports zarrfs.formats.nodes (cli/ enters formats/ through zarrfs.formats)",
        "layer: zarrfs.options imports zarrfs.daemon.mountpoint (options/ must not import daemon)",
    ]


def test_a_file_over_400_lines_is_reported(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN, "tree/big.py": "x = 1\n" * 401,
                                  "tree/fits.py": "x = 1\n" * 400})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == ["long file: zarrfs/tree/big.py (over 400 lines)"]


def test_allowlisted_violations_are_only_counted(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "views/files.py": "from .readahead import R\n",
                                  "views/readahead.py": "from .files import F\n",
                                  "tree/big.py": "x = 1\n" * 401})
    known = ["cycle: zarrfs.views.files <-> zarrfs.views.readahead",
             "long file: zarrfs/tree/big.py (over 400 lines)"]
    status, out = _check(package, known)
    assert (status, out) == (0, [_summary(tmp_path, 2, 0)])


def test_a_new_violation_fails_beside_known_ones_and_fixed_ones_are_pointed_out(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "cli.py": "from . import info\n",
                                  "info.py": "from . import cli\n",
                                  "codecs/base.py": "from ..store import core\n"})
    known = ["cycle: zarrfs.cli <-> zarrfs.info <-> zarrfs.daemon",  # shrank: still known
             "long file: zarrfs/tree/big.py (over 400 lines)"]  # fixed
    status, out = _check(package, known)
    assert status == 1
    assert out == [
        "layer: zarrfs.codecs.base imports zarrfs.store.core (codecs/ must not import store)",
        f"check_layers: 1 known violations are gone; remove them from {tmp_path / 'known.txt'}:",
        "  long file: zarrfs/tree/big.py (over 400 lines)",
        _summary(tmp_path, 1, 1),
    ]



def test_the_array_layer_takes_only_the_description_from_formats(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "array/core.py": "from ..formats.description import ArrayDescription\n",
                                  "array/open.py": "from ..formats.nodes import discover\n",
                                  "formats/nodes.py": ""})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == ["layer: zarrfs.array.open imports zarrfs.formats.nodes "
                        "(array/ may import of formats/ only zarrfs.formats.description)"]


def test_comparing_the_format_number_outside_formats_is_reported(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "tree/edits.py": "name = 'a' if node.zarr_format == 2 else 'b'\n"
                                                   "ok = node.zarr_format  # zarr_format != 3 in a comment\n"
                                                   "x = 1 if n.zarr_format not in (1, 2) else 0\n",
                                  "formats/v2_format.py": "if doc.zarr_format != 2: pass\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "format branch: zarrfs/tree/edits.py:1 compares zarr_format (ask the node's Format)",
        "format branch: zarrfs/tree/edits.py:3 compares zarr_format (ask the node's Format)",
    ]


def test_the_layers_above_enter_the_array_layer_through_zarrfs_array(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "array/cache/__init__.py": "from .held import HeldBytes\n",
                                  "array/cache/held.py": "",
                                  "views/text.py": "from ..array.cache import HeldBytes\n",
                                  "tree/tree.py": "from zarrfs.array import core\n"
                                                  "from ..array import ZarrArray\n",
                                  "daemon/run.py": "from ..array import ZarrArray\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.tree.tree imports zarrfs.array.core (tree/ enters array/ through zarrfs.array)",
        "face: zarrfs.views.text imports zarrfs.array.cache (views/ enters array/ through zarrfs.array)",
    ]


def test_asking_which_backend_a_store_is_outside_the_store_layer_is_reported(tmp_path: Path) -> None:
    package = _package(tmp_path, {**CLEAN,
                                  "array/io.py": "remote = not store.is_local\n"
                                                 "ok = store.capabilities.round_trips  # store.is_s3 here\n"
                                                 "batch = self.store.is_s3 or store.is_azure\n",
                                  "store/objects/driver.py": "if store.is_local or store.is_gcs: pass\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        "backend question: zarrfs/array/io.py:1 asks which backend the store is (read store.capabilities)",
        "backend question: zarrfs/array/io.py:3 asks which backend the store is (read store.capabilities)",
    ]


def test_naming_a_backend_inside_the_store_layer_outside_its_drivers_is_reported(tmp_path: Path) -> None:
    # The drivers (every subpackage of store/ but the adapters) and the registry may name a
    # backend; the contract, the shared machinery and the adapters read the driver's data.
    package = _package(tmp_path, {**CLEAN,
                                  "store/many.py": "if store.is_local or store.is_gcs: pass\n"
                                                   "lists = store.driver.lists_prefixes  # store.is_s3\n",
                                  "store/core.py": "from .objects import S3Driver\n"
                                                   "driver = Driver(fs)\n",
                                  "store/disk_cache/opening.py": "if fs.protocol == 'gs': pass\n",
                                  "store/sources.py": "if protocol in ('s3', 'gs'): d = S3Driver(fs)\n",
                                  "store/objects/__init__.py": "from .driver import S3Driver\n",
                                  "store/objects/driver.py": "def is_s3(fs): return 's3' in fs.protocol\n",
                                  "store/local/driver.py": "local = isinstance(fs, LocalFileSystem)\n"})
    status, out = _check(package)
    assert status == 1
    named = "names a backend outside its driver (drivers: the subpackages of store/; the registry: " \
            "zarrfs.store.sources)"
    assert out[:-1] == [
        f"backend named: zarrfs/store/core.py:1 {named}",
        f"backend named: zarrfs/store/disk_cache/opening.py:1 {named}",
        f"backend named: zarrfs/store/many.py:1 {named}",
        f"driver: zarrfs.store.core imports zarrfs.store.objects {THROUGH_THE_REGISTRY}",
    ]


THROUGH_THE_REGISTRY = ("(store/'s shared modules and adapters reach a driver only through the registry, "
                        "zarrfs.store.sources)")
NO_OTHER_DRIVER = "(a driver imports no other subpackage of store/: what drivers share lives at its top)"


def test_a_store_driver_imports_no_other_and_the_shared_modules_none(tmp_path: Path) -> None:
    # Each driver stands alone: what two share lives at the top of store/ (the registry alone
    # maps a source to its driver, and the package's face re-exports what the layers above use).
    package = _package(tmp_path, {**CLEAN,
                                  "store/__init__.py": "from .local import open_below\n",
                                  "store/targets.py": "class TargetPolicy: ...\n",
                                  "store/sources.py": "from .local import LocalDriver\n"
                                                      "from .zipfiles import Zip\n",
                                  "store/base.py": "from .local import TEMP_PREFIX\n",
                                  "store/opening.py": "from .disk_cache import DiskCachedStore\n",
                                  "store/disk_cache/__init__.py": "from ..sources import endpoint\n",
                                  "store/disk_cache/reads.py": "from ..objects import signed\n",
                                  "store/local/__init__.py": "from .confined import open_below\n",
                                  "store/local/confined.py": "from ..references import TargetPolicy\n"
                                                             "from ..targets import TargetPolicy\n",
                                  "store/objects/__init__.py": "",
                                  "store/objects/s3.py": "from ..sources import endpoint\n",
                                  "store/references/__init__.py": "from ..targets import TargetPolicy\n",
                                  "store/http/__init__.py": "from ..disk_cache import DiskCachedStore\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        f"driver: zarrfs.store.base imports zarrfs.store.local {THROUGH_THE_REGISTRY}",
        f"driver: zarrfs.store.disk_cache.reads imports zarrfs.store.objects {THROUGH_THE_REGISTRY}",
        f"driver: zarrfs.store.http imports zarrfs.store.disk_cache {NO_OTHER_DRIVER}",
        f"driver: zarrfs.store.local.confined imports zarrfs.store.references {NO_OTHER_DRIVER}",
        f"driver: zarrfs.store.objects.s3 imports zarrfs.store.sources {NO_OTHER_DRIVER}",
    ]


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
    package = _package(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/hdf5/__init__.py": "from .array_file import h5_file\n",
                                  "views/hdf5/array_file.py": "from ..placement import Placement\n"
                                                              "from ..tiff import tiff_file\n",
                                  "views/hdf5/strings.py": "from zarrfs.views.tiff.layout import L\n"
                                                           "from .array_file import h5_file\n"})
    status, out = _check(package)
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
    package = _package(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/__init__.py": "from .text import TEXT_NAME\n",
                                  "views/registry.py": "from .text import TEXT_NAME\n"
                                                       "from .tiff import tiff_file\n",
                                  "views/array_dir.py": "from . import registry, tiff\n",
                                  "views/xattrs.py": "from .text import TEXT_NAME\n",
                                  "views/placement/geozarr.py": "def f():\n"
                                                                "    from ..tiff import tiff_file\n"})
    status, out = _check(package)
    assert status == 1
    assert out[:-1] == [
        f"family: zarrfs.views.placement.geozarr imports zarrfs.views.tiff {CONTRACT_ONLY}",
        f"family: zarrfs.views.xattrs imports zarrfs.views.text {CONTRACT_ONLY}",
    ]


def test_the_tree_and_the_fuse_layer_take_view_families_from_the_registry(tmp_path: Path) -> None:
    """They name no family (not even its face): a new family is its subpackage and its line in
    the registry, which the tree and the fuse layer read."""
    package = _package(tmp_path, {**CLEAN, **FAMILIES,
                                  "views/registry.py": "from .text import TEXT_NAME\n"
                                                       "from .tiff import tiff_file\n",
                                  "tree/group_views.py": "from ..views.tiff import tiff_file\n",
                                  "tree/string_arrays.py": "from ..views.registry import TEXT_NAME\n"
                                                           "from ..views.text.file import TEXT_NAME\n",
                                  "fuse/file_ops.py": "def f():\n"
                                                      "    from ..views import text\n"})
    status, out = _check(package)
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
    package = _package(tmp_path, {**CLEAN, **ROOMS,
                                  "array/reads/streams.py": "from ..cache.held import HeldBytes\n",
                                  "array/shared.py": "from .cache.cache import ChunkCache\n",
                                  "array/decoding/worker.py": "from .wire import send\n",
                                  "array/decoding/wire.py": "def send(): ...\n",
                                  "array/recheck.py": "from .decoding.wire import send\n",
                                  "views/files.py": "from ..array import ZarrArray\n"
                                                    "from ..array.cache import HeldBytes\n"
                                                    "from ..array.reads.loader import ChunkLoader\n"})
    (package / "array" / "decoding" / "__init__.py").unlink()  # a room being written: no face yet
    status, out = _check(package)
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
    package = _package(tmp_path, {**CLEAN, **ROOMS,
                                  "array/cache/__init__.py": "from .cache import ChunkCache\n",
                                  "array/cache/cache.py": "from ..geometry import Geometry\n",
                                  "array/cache/held.py": "def f():\n    from ..writes import WriteBack\n",
                                  "array/writes/__init__.py": "from .back import WriteBack\n",
                                  "array/writes/back.py": "from ..reads import ChunkLoader\n",
                                  "array/stored/__init__.py": "from .io import PlainIO\n",
                                  "array/stored/io.py": "from ..cache import ChunkCache\n"})
    status, out = _check(package)  # no module is in a cycle: the cache's face imports no `held`
    assert status == 1
    assert out[:-1] == ["room cycle: zarrfs.array.cache <-> zarrfs.array.reads <-> zarrfs.array.writes"]
