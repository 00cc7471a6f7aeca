"""The layering check (scripts/check_layers.py), run as CI runs it on small package trees:
import cycles and long files fail it, allowlisted violations are only counted, new ones fail
beside them and fixed ones are pointed out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.layer_trees import CLEAN, package_tree, run_check

pytestmark = pytest.mark.fast


def _summary(root: Path, known: int, new: int) -> str:
    return f"check_layers: {known} known violations remain ({root / 'known.txt'}), {new} new"


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    status, out = run_check(package_tree(tmp_path, CLEAN))
    assert (status, out) == (0, [_summary(tmp_path, 0, 0)])


def test_a_cycle_is_reported_once_with_all_its_modules(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "formats/v3.py": "from . import nodes\n",
                                  "formats/nodes.py": "def f():\n    from .children import c\n",
                                  "formats/children.py": ("from typing import TYPE_CHECKING\n"
                                                          "if TYPE_CHECKING:\n"
                                                          "    from zarrfs.formats.v3 import M\n")})
    status, out = run_check(package)
    assert status == 1
    assert out[0] == "cycle: zarrfs.formats.children <-> zarrfs.formats.nodes <-> zarrfs.formats.v3"
    assert out[1:] == [_summary(tmp_path, 0, 1)]


def test_importing_a_package_imports_its_init(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "store/__init__.py": "from .remote import Remote\n",
                                  "store/remote.py": "import zarrfs.store\n"})
    status, out = run_check(package)
    assert status == 1
    assert out[0] == "cycle: zarrfs.store <-> zarrfs.store.remote"


def test_a_file_over_400_lines_is_reported(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN, "tree/big.py": "x = 1\n" * 401,
                                  "tree/fits.py": "x = 1\n" * 400})
    status, out = run_check(package)
    assert status == 1
    assert out[:-1] == ["long file: zarrfs/tree/big.py (over 400 lines)"]


def test_allowlisted_violations_are_only_counted(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "views/files.py": "from .readahead import R\n",
                                  "views/readahead.py": "from .files import F\n",
                                  "tree/big.py": "x = 1\n" * 401})
    known = ["cycle: zarrfs.views.files <-> zarrfs.views.readahead",
             "long file: zarrfs/tree/big.py (over 400 lines)"]
    status, out = run_check(package, known)
    assert (status, out) == (0, [_summary(tmp_path, 2, 0)])


def test_a_new_violation_fails_beside_known_ones_and_fixed_ones_are_pointed_out(tmp_path: Path) -> None:
    package = package_tree(tmp_path, {**CLEAN,
                                  "cli.py": "from . import info\n",
                                  "info.py": "from . import cli\n",
                                  "codecs/base.py": "from ..store import core\n"})
    known = ["cycle: zarrfs.cli <-> zarrfs.info <-> zarrfs.daemon",  # shrank: still known
             "long file: zarrfs/tree/big.py (over 400 lines)"]  # fixed
    status, out = run_check(package, known)
    assert status == 1
    assert out == [
        "layer: zarrfs.codecs.base imports zarrfs.store.core (codecs/ must not import store)",
        f"check_layers: 1 known violations are gone; remove them from {tmp_path / 'known.txt'}:",
        "  long file: zarrfs/tree/big.py (over 400 lines)",
        _summary(tmp_path, 1, 1),
    ]
