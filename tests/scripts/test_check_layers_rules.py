"""The layering check (scripts/check_layers.py), run as CI runs it on small package trees: its
rules between the layers (each entered through its face, the server beside fuse, the formats
layer's description for the array layer) and inside the store layer (backends and drivers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.layer_trees import CLEAN, package_tree, run_check

pytestmark = pytest.mark.fast


def test_layer_violations_name_the_import_and_the_rule(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "fuse/operations.py": "from ..array.core import ZarrArray\n",
                                  "store/local.py": "def f():\n    from zarrfs.codecs import base\n",
                                  "views/files.py": "from ..tree import nodes\n",
                                  "tree/nodes.py": ""})
    status, out = run_check(package)
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
    package = package_tree(tmp_path, {**CLEAN,
                                  "serve/site.py": ("from ..tree import nodes\n"
                                                    "from ..fuse import operations\n"),
                                  "tree/nodes.py": "def f():\n    from ..views import helpers\n",
                                  "views/helpers.py": "import pyfuse3.extra\n",
                                  "daemon/serving.py": "from ..serve import site\n",
                                  "daemon/run.py": "import pyfuse3\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "layer: zarrfs.serve.site imports zarrfs.fuse.operations (serve/ may import only errors, "
        "options, tree, views)",
        "fuse: zarrfs.serve.site -> zarrfs.tree.nodes -> zarrfs.views.helpers imports pyfuse3 "
        "(the server runs without FUSE)",
    ]


def test_a_subpackage_is_entered_through_its_face(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "store/objects/__init__.py": "from .s3 import s3_read\n",
                                  "store/objects/s3.py": "from .signing import sign\n",
                                  "store/objects/signing.py": "def sign(): ...\n",
                                  "store/core.py": "from .objects import s3_read\n",
                                  "store/fetching.py": "from .objects.s3 import s3_read\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == ["face: zarrfs.store.fetching imports zarrfs.store.objects.s3 "
                        "(enter zarrfs.store.objects through its __init__)",
                        # (and store/'s top reaches a driver through the registry alone)
                        f"driver: zarrfs.store.core imports zarrfs.store.objects {THROUGH_THE_REGISTRY}",
                        f"driver: zarrfs.store.fetching imports zarrfs.store.objects.s3 "
                        f"{THROUGH_THE_REGISTRY}"]


def test_commands_enter_other_layers_through_their_faces(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "formats/__init__.py": "from .nodes import discover\n",
                                  "formats/nodes.py": "def discover(): ...\n",
                                  "cli/info.py": "from ..formats import discover\n",
                                  "cli/check.py": "from ..formats.nodes import discover\n",
                                  "options.py": "from .daemon import mountpoint\n",
                                  "daemon/mountpoint.py": ""})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.cli.check imports zarrfs.formats.nodes (cli/ enters formats/ through zarrfs.formats)",
        "layer: zarrfs.options imports zarrfs.daemon.mountpoint (options/ must not import daemon)",
    ]


def test_the_array_layer_takes_only_the_description_from_formats(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "array/core.py": "from ..formats.description import ArrayDescription\n",
                                  "array/open.py": "from ..formats.nodes import discover\n",
                                  "formats/nodes.py": ""})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == ["layer: zarrfs.array.open imports zarrfs.formats.nodes "
                        "(array/ may import of formats/ only zarrfs.formats.description)"]


def test_comparing_the_format_number_outside_formats_is_reported(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "tree/edits.py": "name = 'a' if node.zarr_format == 2 else 'b'\n"
                                                   "ok = node.zarr_format  # zarr_format != 3 in a comment\n"
                                                   "x = 1 if n.zarr_format not in (1, 2) else 0\n",
                                  "formats/v2_format.py": "if doc.zarr_format != 2: pass\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "format branch: zarrfs/tree/edits.py:1 compares zarr_format (ask the node's Format)",
        "format branch: zarrfs/tree/edits.py:3 compares zarr_format (ask the node's Format)",
    ]


def test_the_layers_above_enter_the_array_layer_through_zarrfs_array(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "array/cache/__init__.py": "from .held import HeldBytes\n",
                                  "array/cache/held.py": "",
                                  "views/text.py": "from ..array.cache import HeldBytes\n",
                                  "tree/tree.py": "from zarrfs.array import core\n"
                                                  "from ..array import ZarrArray\n",
                                  "daemon/run.py": "from ..array import ZarrArray\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "face: zarrfs.tree.tree imports zarrfs.array.core (tree/ enters array/ through zarrfs.array)",
        "face: zarrfs.views.text imports zarrfs.array.cache (views/ enters array/ through zarrfs.array)",
    ]


def test_asking_which_backend_a_store_is_outside_the_store_layer_is_reported(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "array/io.py": "remote = not store.is_local\n"
                                                 "ok = store.capabilities.round_trips  # store.is_s3 here\n"
                                                 "batch = self.store.is_s3 or store.is_azure\n",
                                  "store/objects/driver.py": "if store.is_local or store.is_gcs: pass\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        "backend question: zarrfs/array/io.py:1 asks which backend the store is (read store.capabilities)",
        "backend question: zarrfs/array/io.py:3 asks which backend the store is (read store.capabilities)",
    ]


def test_naming_a_backend_inside_the_store_layer_outside_its_drivers_is_reported(tmp_path: Path) -> None:
    # The drivers (every subpackage of store/ but the adapters) and the registry may name a
    # backend; the contract, the shared machinery and the adapters read the driver's data.
    package = package_tree(tmp_path, {**CLEAN,
                                  "store/many.py": "if store.is_local or store.is_gcs: pass\n"
                                                   "lists = store.driver.lists_prefixes  # store.is_s3\n",
                                  "store/core.py": "from .objects import S3Driver\n"
                                                   "driver = Driver(fs)\n",
                                  "store/disk_cache/opening.py": "if fs.protocol == 'gs': pass\n",
                                  "store/sources.py": "if protocol in ('s3', 'gs'): d = S3Driver(fs)\n",
                                  "store/objects/__init__.py": "from .driver import S3Driver\n",
                                  "store/objects/driver.py": "def is_s3(fs): return 's3' in fs.protocol\n",
                                  "store/local/driver.py": "local = isinstance(fs, LocalFileSystem)\n"})
    status, out = run_check(package)
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
    package = package_tree(tmp_path, {**CLEAN,
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
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == [
        f"driver: zarrfs.store.base imports zarrfs.store.local {THROUGH_THE_REGISTRY}",
        f"driver: zarrfs.store.disk_cache.reads imports zarrfs.store.objects {THROUGH_THE_REGISTRY}",
        f"driver: zarrfs.store.http imports zarrfs.store.disk_cache {NO_OTHER_DRIVER}",
        f"driver: zarrfs.store.local.confined imports zarrfs.store.references {NO_OTHER_DRIVER}",
        f"driver: zarrfs.store.objects.s3 imports zarrfs.store.sources {NO_OTHER_DRIVER}",
    ]
