"""Small package trees for the tests of the layering check (tests/scripts/test_check_layers_*.py),
and scripts/check_layers.py run on them as CI runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_layers.py"


def package_tree(root: Path, files: dict[str, str]) -> Path:
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


def run_check(package: Path, known: list[str] | None = None) -> tuple[int, list[str]]:
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
