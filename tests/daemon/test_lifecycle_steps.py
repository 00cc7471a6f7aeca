"""Each step of the life cycle of what a front end serves (a mount, a server) is taken in one
module, zarrfs/daemon/lifecycle.py: read from the source, every call of a step (or a step
handed on to be called later, as `stack.callback(store.close)`) outside it is named."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIFECYCLE = "zarrfs/daemon/lifecycle.py"
# The steps, as a use names them: a name, or the end of an attribute chain (`self.identity.act`
# is `identity.act`), read in zarrfs/daemon/; no module elsewhere imports one from there.
STEPS = ("Identity.named", "preload.before_acting", "decoding", "identity.act", "preload.as_user",
         "bound_malloc", "opened_store", "store.prepare", "shared_of", "open_tree", "Trimmer",
         "identity.drop", "remove_temporaries", "final_flush", "store.close", "shared.close", "tree.close")
# The front end's own ends: the mount's.
OWNED = {"pyfuse3.close": "zarrfs/daemon/run.py", "watchdog.stop": "zarrfs/daemon/run.py"}


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` of a name or an attribute chain (None for anything else: a call's result...)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def uses(source: str) -> set[str]:
    """Every name and attribute chain the code reads (calls, and callables handed on)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = dotted(node)
            if name is not None:
                found.add(name)
    return found


def names_step(used: str, step: str) -> bool:
    return used == step or used.endswith("." + step)


def takers(root: Path, steps: tuple[str, ...]) -> dict[str, set[str]]:
    """Step -> the modules of zarrfs/daemon/ under `root` that take it."""
    found: dict[str, set[str]] = {step: set() for step in steps}
    for path in sorted((root / "zarrfs" / "daemon").rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for used in uses(path.read_text()):
            for step in steps:
                if names_step(used, step):
                    found[step].add(module)
    return found


def imported_steps(root: Path) -> list[str]:
    """The steps modules outside zarrfs/daemon/ import from it."""
    names = {step.rsplit(".", 1)[-1] for step in STEPS}
    wrong = []
    for path in sorted((root / "zarrfs").rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module.startswith("zarrfs/daemon/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and "daemon" in (node.module or ""):
                wrong += [f"{module} imports {a.name} (only {LIFECYCLE} may take it)"
                          for a in node.names if a.name in names]
    return wrong


def strays(root: Path) -> list[str]:
    """What takes a step of the life cycle outside the module that owns it."""
    wrong = imported_steps(root)
    for step, modules in takers(root, (*STEPS, *OWNED)).items():
        home = OWNED.get(step, LIFECYCLE)
        wrong += [f"{module} takes {step} (only {home} may)" for module in sorted(modules - {home})]
    return wrong


@pytest.mark.fast
def test_each_step_of_the_life_cycle_is_taken_in_one_module() -> None:
    assert strays(ROOT) == []
    taken = takers(ROOT, STEPS)
    missing = [step for step, modules in taken.items() if LIFECYCLE not in modules]
    assert missing == [], "steps the life cycle no longer takes: the check would see nothing"


@pytest.mark.fast
def test_the_check_names_a_step_taken_twice(tmp_path: Path) -> None:
    daemon = tmp_path / "zarrfs" / "daemon"
    daemon.mkdir(parents=True)
    (daemon / "lifecycle.py").write_text("store = opened_store(s)\nstack.callback(store.close)\n")
    (daemon / "serving.py").write_text(
        "def serve(life):\n    life.tree.close()\n    final_flush(life.tree)\n"
        "    stack.callback(self.identity.drop)\n")
    (tmp_path / "zarrfs" / "api.py").write_text("from .daemon.served import open_tree\n")
    assert strays(tmp_path) == [
        "zarrfs/api.py imports open_tree (only zarrfs/daemon/lifecycle.py may take it)",
        "zarrfs/daemon/serving.py takes identity.drop (only zarrfs/daemon/lifecycle.py may)",
        "zarrfs/daemon/serving.py takes final_flush (only zarrfs/daemon/lifecycle.py may)",
        "zarrfs/daemon/serving.py takes tree.close (only zarrfs/daemon/lifecycle.py may)",
    ]
