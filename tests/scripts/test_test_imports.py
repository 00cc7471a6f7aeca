"""No test module imports another test module (issue 96): what tests share lives in
tests/helpers/ (and in conftest.py fixtures), so a test module can be moved, split or run alone
without carrying another's tests along. Read from the source with ast, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

TESTS = Path(__file__).resolve().parents[1]


def is_test_module(path: Path) -> bool:
    """A module pytest collects tests from (`test_*.py`, as pytest's default `python_files`)."""
    return path.name.startswith("test_") and path.suffix == ".py"


def imported_files(path: Path, root: Path) -> set[Path]:
    """The files under `root` (the tests' package) that the module at `path` imports, anywhere
    in it: `import tests.x.y`, `from tests.x import y`, `from .y import z`, each as the module
    file it names (or, for `from package import name`, the module file `name` too)."""
    found: set[Path] = set()
    package = path.parent.relative_to(root.parent).parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [tuple(alias.name.split(".")) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = (*base, *(node.module or "").split(".")) if node.module else base
            names = [module, *((*module, alias.name) for alias in node.names)]
        else:
            continue
        for parts in names:
            if parts and parts[0] == root.name:
                candidate = root.parent.joinpath(*parts).with_suffix(".py")
                if candidate.is_file():
                    found.add(candidate)
    return found


def importers_of_test_modules(root: Path) -> list[str]:
    """`importer -> imported` for each test module under `root` importing another."""
    return sorted(f"{module.relative_to(root)} -> {imported.relative_to(root)}"
                  for module in root.rglob("*.py") if is_test_module(module)
                  for imported in imported_files(module, root)
                  if is_test_module(imported) and imported != module)


def test_no_test_module_imports_another() -> None:
    assert importers_of_test_modules(TESTS) == []


def test_an_import_of_a_test_module_is_found(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    for name in ("helpers/shared.py", "a/test_a.py", "a/test_b.py", "a/test_c.py", "a/test_d.py",
                 "b/test_e.py", "a/conftest.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "a" / "test_b.py").write_text("from tests.a.test_a import helper\n")
    (root / "a" / "test_c.py").write_text("from tests.helpers.shared import x\n"
                                          "from tests.a import conftest\n")
    (root / "a" / "test_d.py").write_text("def f():\n    from .test_a import helper\n")
    (root / "b" / "test_e.py").write_text("import tests.a.test_a\nfrom tests.a import test_d\n")
    assert importers_of_test_modules(root) == [
        "a/test_b.py -> a/test_a.py", "a/test_d.py -> a/test_a.py",
        "b/test_e.py -> a/test_a.py", "b/test_e.py -> a/test_d.py"]
