#!/usr/bin/env python3
"""Check the layering of the zarrfs package: no import cycles, each layer imports only what
the rules below allow (a view family no other family; a room of the array layer no other in a
circle), subpackages entered through their faces, no branching on the Zarr format's number
outside `formats/`, no question of which backend a store is outside `store/` (nor, inside it,
outside its drivers and registry), no store driver importing another (nor the store's shared
modules and adapters a driver: only the registry does), nothing the server (`zarrfs serve`)
runs reaching pyfuse3, no file over 400 lines (docs/development.md, "The layering check").

Every import counts: module-level, inside functions and under TYPE_CHECKING. `from . import x`
and `from .pkg import y` import the module they name (x, or pkg.y when y is a module, else
pkg); importing a package imports its `__init__`.

Violations print one a line. Those listed in the allowlist (scripts/layers-known.txt: lines
exactly as printed here; # comments) are the ones the code had when the check came in: they
are only counted, as a reminder. A cycle is known when all its modules are in one known
cycle, so a cycle that shrinks or splits stays known. Exit status 1 if any violation is new.

    python scripts/check_layers.py                  # the check CI runs
    python scripts/check_layers.py --all            # every violation, known or not: the
                                                    #   allowlist, once they are all wanted
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from import_graph import cycles, imports_of, modules_of  # (beside this script)

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 400

# A layer (the first name under the package) -> the only other layers it may import; -> the
# layers it must not import.
# The two faces of the tree, the mount's (fuse/) and the server's (serve/), side by side: each
# imports only the tree, the views and what they share, never the other.
ONLY: dict[str, set[str]] = {"fuse": {"tree", "views", "options", "errors"},
                             "serve": {"tree", "views", "options", "errors"}}
NEVER: dict[str, set[str]] = {
    "views": {"fuse", "serve", "tree", "cli", "daemon"},
    "array": {"views", "tree", "fuse", "serve", "cli", "daemon"},
    "codecs": {"array", "views", "tree", "fuse", "serve", "store", "cli", "daemon"},
    "store": {"array", "views", "tree", "fuse", "serve", "codecs", "formats", "cli", "daemon"},
    "formats": {"array", "views", "tree", "fuse", "serve", "store", "cli", "daemon"},
    "tree": {"fuse", "serve", "cli", "daemon"},
    "options": {"array", "tree", "fuse", "serve", "cli", "daemon"},
}
# What runs `zarrfs serve` (the serve layer, and the daemon's module that runs it) works where
# nothing can mount: none of it, nor anything it imports (every import counts), imports these.
FUSE_FREE = ("zarrfs.serve", "zarrfs.daemon.serving")
FUSE_PACKAGES = {"pyfuse3"}
# A layer -> the layers it enters only through their face (the package's `__init__`).
# Every layer above the array layer enters it through `zarrfs.array`, never one of its rooms.
THROUGH_FACES: dict[str, set[str]] = {"cli": {"formats", "codecs", "store", "array"}, "views": {"array"},
                                      "tree": {"array"}, "daemon": {"array"}, "array_metadata": {"array"}}
# A layer -> {another layer: the only modules of it the first may import}. The array layer
# takes an array's description from formats, never its documents (opening, writing, editing
# metadata is done above it: zarrfs.array_metadata).
ONLY_MODULES: dict[str, dict[str, set[str]]] = {"array": {"formats": {"zarrfs.formats.description"}}}
# The view contract: the modules at the top of zarrfs.views and its subpackages named here.
# Every other subpackage of zarrfs.views is a view family (hdf5/, tiff/, ...), found as such:
# a new family needs no line here. A family imports the contract and the layers below, never
# another family; of the contract only these modules import families (they assemble them).
# The array layer's rooms: every subpackage of zarrfs.array (cache/, stored/, reads/, ...), found
# as such, a new room needing no line here. Each is entered through its face (`face_violations`,
# even before it has an `__init__`), and the rooms import each other in no circle.
ARRAY = "zarrfs.array"
VIEWS = "zarrfs.views"
CONTRACT = {"placement"}
ASSEMBLERS = {"zarrfs.views", "zarrfs.views.registry", "zarrfs.views.array_dir"}
# The layers that name no view family: what they need of one they take from the registry, the
# one module naming every family, so a new family is its subpackage and its registry line.
NO_FAMILIES = {"tree", "fuse", "serve"}
# Lines that ask what only one layer may ask: (the pattern, the layer, what a violation says).
# A comparison with the format's number: outside formats/, code asks the node's Format instead.
# Which backend a store is: outside store/, code reads the store's capabilities instead.
LINE_RULES = [
    (re.compile(r"\bzarr_format\s*(==|!=|(not\s+)?in\b)"), "formats",
     "format branch: {shown}:{number} compares zarr_format (ask the node's Format)"),
    (re.compile(r"\.is_(local|s3|gcs|azure)\b"), "store",
     "backend question: {shown}:{number} asks which backend the store is (read store.capabilities)"),
]
# Inside the store layer, as TensorStore's kvstore/: the contract and the shared machinery at
# its top, one folder per driver (every subpackage of zarrfs.store but the adapters named here,
# found as such: a new driver needs no line here), and one registry mapping a source to its
# driver. Only the drivers and the registry name a backend: its flag, its class, a protocol.
# A driver imports no other driver, nor an adapter: what two share lives at the top of store/;
# the top and the adapters import no driver but through the registry (the package's face aside).
STORE = "zarrfs.store"
STORE_ADAPTERS = {"disk_cache"}
STORE_REGISTRY = "zarrfs.store.sources"
BACKEND_NAMED = re.compile(r"\.is_(local|s3|gcs|azure)\b|\bis_(s3|gcs|azure)\(|\bLocalFileSystem\b"
                           r"|\bprotocols?\s*(==|!=|(not\s+)?in\b)|\b[A-Z][a-z0-9]*Driver\b")


def layer_of(module: str) -> str:
    """The layer (first name under the package) a module belongs to; "" for the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, set[str]]) -> Iterator[str]:
    for module in sorted(graph):
        layer = layer_of(module)
        for target in sorted(graph[module]):
            other = layer_of(target)
            if other == layer:
                continue
            only_modules = ONLY_MODULES.get(layer, {}).get(other)
            if only_modules is not None and target not in only_modules:
                allowed = ", ".join(sorted(only_modules))
                yield f"layer: {module} imports {target} ({layer}/ may import of {other}/ only {allowed})"
            elif layer in ONLY and other not in ONLY[layer]:
                allowed = ", ".join(sorted(ONLY[layer]))
                yield f"layer: {module} imports {target} ({layer}/ may import only {allowed})"
            elif other in NEVER.get(layer, set()):
                yield f"layer: {module} imports {target} ({layer}/ must not import {other})"
            elif other in THROUGH_FACES.get(layer, set()) and target != f"zarrfs.{other}":
                yield f"face: {module} imports {target} ({layer}/ enters {other}/ through zarrfs.{other})"


def array_rooms(modules: dict[str, Path]) -> set[str]:
    """The rooms of the array layer: its subpackages, by their directory (with or without an
    `__init__` yet)."""
    return {".".join(name.split(".")[:3]) for name, path in modules.items()
            if name.startswith(ARRAY + ".") and (name.count(".") >= 3 or path.name == "__init__.py")}


def room_cycles(graph: dict[str, set[str]], modules: dict[str, Path]) -> Iterator[str]:
    """The rooms of the array layer that import each other in a circle (through their faces
    or not), each circle once with all its rooms."""
    rooms = array_rooms(modules)

    def room_of(module: str) -> str | None:
        return next((r for r in rooms if module == r or module.startswith(r + ".")), None)

    between: dict[str, set[str]] = {room: set() for room in rooms}
    for module, targets in graph.items():
        own = room_of(module)
        for target in targets:
            other = room_of(target)
            if own is not None and other is not None and other != own:
                between[own].add(other)
    for component in cycles(between):
        yield f"room cycle: {' <-> '.join(component)}"


def face_violations(graph: dict[str, set[str]], modules: dict[str, Path]) -> Iterator[str]:
    """A subpackage inside a layer (zarrfs.store.objects, a room of zarrfs.array) is entered
    through its face, its `__init__`: a module outside it imports the subpackage, never one of
    its modules."""
    faces = {name for name, path in modules.items()
             if path.name == "__init__.py" and name.count(".") >= 2} | array_rooms(modules)
    for module in sorted(graph):
        for target in sorted(graph[module]):
            face = next((f for f in faces if target.startswith(f + ".")), None)
            if face is not None and module != face and not module.startswith(face + "."):
                yield f"face: {module} imports {target} (enter {face} through its __init__)"


def view_families(modules: dict[str, Path]) -> set[str]:
    """The view families: the subpackages of zarrfs.views but those of the contract."""
    return {name for name, path in modules.items()
            if path.name == "__init__.py" and name.rpartition(".")[0] == VIEWS
            and name.rpartition(".")[2] not in CONTRACT}


def family_violations(graph: dict[str, set[str]], modules: dict[str, Path]) -> Iterator[str]:
    """No view family imports another (not even its face); no module of the view contract
    imports a family but the assemblers (the registry, the array directory, the package's
    `__init__`); the tree and the fuse layer (`NO_FAMILIES`) import none, taking what they need
    of one from the registry. Elsewhere, families are entered through their faces
    (`face_violations`)."""
    families = view_families(modules)

    def family_of(module: str) -> str | None:
        return next((f for f in families if module == f or module.startswith(f + ".")), None)

    assemblers = ", ".join(sorted(ASSEMBLERS))
    for module in sorted(graph):
        own = family_of(module)
        in_contract = own is None and (module == VIEWS or module.startswith(VIEWS + "."))
        for target in sorted(graph[module]):
            other = family_of(target)
            if other is None or other == own:
                continue
            if own is not None:
                yield (f"family: {module} imports {target} ({own} must not import another view "
                       f"family, {other})")
            elif in_contract and module not in ASSEMBLERS:
                yield (f"family: {module} imports {target} (of the view contract only "
                       f"{assemblers} import view families)")
            elif layer_of(module) in NO_FAMILIES:
                yield (f"family: {module} imports {target} ({layer_of(module)}/ names no view "
                       f"family: it takes what it needs of {other} from {VIEWS}.registry)")


def third_party(path: Path) -> set[str]:
    """The top-level names of what a module imports from outside the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def fuse_violations(graph: dict[str, set[str]], modules: dict[str, Path]) -> Iterator[str]:
    """A module that what runs the server reaches (`FUSE_FREE`, and every module below
    them) and that imports pyfuse3: each once, with the path it is reached by."""
    starts = [m for m in sorted(graph) if any(m == f or m.startswith(f + ".") for f in FUSE_FREE)]
    reached: dict[str, list[str]] = {m: [m] for m in starts}
    queue = list(starts)
    while queue:
        module = queue.pop(0)
        for target in sorted(graph[module]):
            if target not in reached:
                reached[target] = [*reached[module], target]
                queue.append(target)
    for module, path in sorted(reached.items()):
        for package in sorted(third_party(modules[module]) & FUSE_PACKAGES):
            yield f"fuse: {' -> '.join(path)} imports {package} (the server runs without FUSE)"


def long_files(modules: dict[str, Path], root: Path, max_lines: int) -> Iterator[str]:
    for path in sorted(modules.values()):
        if len(path.read_text().splitlines()) > max_lines:
            shown = path.relative_to(root.parent).as_posix()
            yield f"long file: {shown} (over {max_lines} lines)"


def line_rule_violations(modules: dict[str, Path], root: Path) -> Iterator[str]:
    for name, path in sorted(modules.items()):
        lines = path.read_text().splitlines()
        for pattern, layer, message in LINE_RULES:
            if layer_of(name) == layer:
                continue
            for number, line in enumerate(lines, 1):
                if pattern.search(line.split("#", 1)[0]):
                    yield message.format(shown=path.relative_to(root.parent).as_posix(), number=number)


def backend_names(modules: dict[str, Path], root: Path) -> Iterator[str]:
    """Lines of the store layer's shared modules (its top, its adapters) that name a backend."""
    for name, path in sorted(modules.items()):
        if not _store_shared(name, path):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if BACKEND_NAMED.search(line.split("#", 1)[0]):
                shown = path.relative_to(root.parent).as_posix()
                yield (f"backend named: {shown}:{number} names a backend outside its driver "
                       f"(drivers: the subpackages of store/; the registry: {STORE_REGISTRY})")


def store_family_of(module: str, modules: dict[str, Path]) -> str | None:
    """The subpackage of the store layer `module` is in (a driver's or an adapter's), or None."""
    if not module.startswith(STORE + "."):
        return None
    family = ".".join(module.split(".")[:3])
    return family if modules.get(family, Path()).name == "__init__.py" else None


def driver_violations(graph: dict[str, set[str]], modules: dict[str, Path]) -> Iterator[str]:
    """A driver of the store layer that imports another subpackage of it (a driver, an
    adapter) or the registry; a shared module or an adapter that imports a driver (the
    registry alone maps sources to drivers, and the package's face re-exports them)."""
    adapters = {f"{STORE}.{name}" for name in STORE_ADAPTERS}
    for module in sorted(graph):
        own = store_family_of(module, modules)
        if module in (STORE, STORE_REGISTRY) or not module.startswith(STORE + "."):
            continue
        for target in sorted(graph[module]):
            other = store_family_of(target, modules)
            if own is not None and own not in adapters and other != own and (
                    other is not None or target == STORE_REGISTRY):
                yield (f"driver: {module} imports {target} (a driver imports no other subpackage of "
                       f"store/: what drivers share lives at its top)")
            elif (own is None or own in adapters) and other is not None and other not in adapters:
                yield (f"driver: {module} imports {target} (store/'s shared modules and adapters reach "
                       f"a driver only through the registry, {STORE_REGISTRY})")


def _store_shared(name: str, path: Path) -> bool:
    """Whether module `name` is of the store layer's contract, machinery or adapters."""
    if not name.startswith(STORE + ".") or name == STORE_REGISTRY:
        return False
    inside = name[len(STORE) + 1 :].split(".")
    is_package = path.name == "__init__.py"
    return (len(inside) == 1 and not is_package) or inside[0] in STORE_ADAPTERS


def violations(root: Path, max_lines: int = MAX_LINES) -> list[str]:
    modules = modules_of(root)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    found = [f"cycle: {' <-> '.join(component)}" for component in cycles(graph)]
    found += layer_violations(graph)
    found += room_cycles(graph, modules)
    found += face_violations(graph, modules)
    found += family_violations(graph, modules)
    found += line_rule_violations(modules, root)
    found += backend_names(modules, root)
    found += driver_violations(graph, modules)
    found += fuse_violations(graph, modules)
    found += long_files(modules, root, max_lines)
    return found


def read_known(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def is_known(violation: str, known: Iterable[str]) -> bool:
    if violation.startswith("cycle: "):
        members = set(violation.removeprefix("cycle: ").split(" <-> "))
        return any(line.startswith("cycle: ")
                   and members <= set(line.removeprefix("cycle: ").split(" <-> "))
                   for line in known)
    return violation in known


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO / "zarrfs", help="the package directory")
    parser.add_argument("--known", type=Path, default=REPO / "scripts" / "layers-known.txt",
                        help="the allowlist of violations that exist already")
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument("--all", action="store_true", help="print every violation, known or not")
    args = parser.parse_args(argv)

    found = violations(args.root, args.max_lines)
    if args.all:
        print("\n".join(found))
        return 1 if found else 0
    known = read_known(args.known)
    new = [v for v in found if not is_known(v, known)]
    gone = [line for line in known if not any(is_known(v, [line]) for v in found)]
    for violation in new:
        print(violation)
    if gone:
        print(f"check_layers: {len(gone)} known violations are gone; remove them from "
              f"{args.known}:", *(f"  {line}" for line in gone), sep="\n")
    print(f"check_layers: {len(found) - len(new)} known violations remain ({args.known}), "
          f"{len(new)} new")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
