"""No class name is defined in two modules of zarrfs/ (issue 96): a reader who meets a class by
its name knows which one it is. Read from the source with ast, nothing imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

PACKAGE = Path(__file__).resolve().parents[2] / "zarrfs"


def classes_defined_twice(package: Path) -> dict[str, list[str]]:
    """Each class name defined in more than one module under `package` (nested classes
    included), with those modules' paths from `package`."""
    defined: dict[str, set[str]] = defaultdict(set)
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                defined[node.name].add(path.relative_to(package).as_posix())
    return {name: sorted(modules) for name, modules in defined.items() if len(modules) > 1}


def test_no_class_name_is_defined_twice() -> None:
    assert classes_defined_twice(PACKAGE) == {}


def test_a_name_defined_twice_is_found(tmp_path: Path) -> None:
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "a.py").write_text("class Dataset:\n    class Inner:\n        pass\n")
    (tmp_path / "b.py").write_text("def f():\n    class Inner(Exception):\n        pass\n"
                                   "class Dataset:\n    pass\nclass Once:\n    pass\n")
    assert classes_defined_twice(tmp_path) == {"Dataset": ["b.py", "views/a.py"],
                                                "Inner": ["b.py", "views/a.py"]}
