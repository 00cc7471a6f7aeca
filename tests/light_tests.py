"""The fast tier's modules that need no heavy oracle: what `scripts/release-check --tests` runs
under a second interpreter (`scripts/test`'s whole run: pyenv's newest Python), from the
unpacked sdist against the installed wheel, in a venv holding only the wheel with `[s3]`, the
`LIGHT_REQUIREMENTS` of the test extra and the `LIGHT_EXTRAS`: no TensorStore, h5py, netCDF4, xarray, GDAL,
moto, ... whose install would cost CI minutes (docs/development.md, "Other Pythons").

A module is light when it and the test helpers it imports import only the standard library,
zarrfs, the packages of `LIGHT_IMPORTS` and those of the test extra named here.
`tests/test_light_tests.py` (fast tier) checks that `MODULES` is exactly the fast tier's light
modules but those of `LEFT_OUT`, so the list grows with the fast tier.

    python tests/light_tests.py                  # the modules, as paths from the repository
    python tests/light_tests.py --requirements   # the requirements they need beyond zarrfs[s3]
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

# What zarrfs and its [s3] extra install, by import name; then what the tests need of the test
# extra (by distribution name in LIGHT_REQUIREMENTS, by import name here).
LIGHT_IMPORTS = {
    "numpy", "trio", "pyfuse3", "numcodecs", "zstandard", "fsspec", "ml_dtypes", "google_crc32c",
    "tqdm", "prometheus_client", "pyproj", "s3fs", "aiohttp", "obstore",
    "pytest", "_pytest", "xdist", "hypothesis", "zarr",
}
LIGHT_REQUIREMENTS = ("pytest", "pytest-xdist", "hypothesis", "zarr")
# Extras whose packages the tests need though they import none, installed whole: the codecs
# of the corpora's arrays (numcodecs loads them), fsspec's reference sets (jinja2).
LIGHT_EXTRAS = ("codecs", "references")

# Light by their imports, not run under the second interpreter, and why.
LEFT_OUT = {
    "test_check_layers.py": "checks the checkout's source (scripts/check_layers.py), not an installation",
    "test_user_option.py": "its reader runs this Python as nobody: not one in root's home (pyenv's)",
}

MODULES = [
    "fuzz/test_findings.py", "fuzz/test_replay.py", "interop/test_zarrs_corpus.py",
    "reliability/test_faulty_fs.py", "test_api.py", "test_deadlines.py", "test_decoding_pool.py",
    "test_early_writes.py", "test_engine_properties.py", "test_format_registry.py", "test_install_system.py",
    "test_keyed_locks.py", "test_late_replies.py", "test_light_tests.py", "test_loader_pool.py",
    "test_local_writes.py", "test_make_room.py", "test_masks.py", "test_memory.py", "test_metrics.py",
    "test_page_cache.py", "test_readahead.py", "test_readahead_cost.py", "test_rectilinear.py",
    "test_sharded_streams.py", "test_statfs.py", "test_store_errors.py", "test_store_stats.py",
    "test_stored_tiles.py", "test_systemd.py", "test_tree.py", "test_writeback_memory.py",
    "test_written_back_during_load.py", "test_written_reads.py", "test_zstd_codec.py",
]


def third_party_imports(path: Path, seen: set[Path] | None = None) -> set[str]:
    """The top-level names of what the module at `path` imports, anywhere in it, that are
    neither the standard library nor zarrfs, following the tests' own helper modules."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "zarrfs":
                continue
            helper = _helper(name, path)
            if helper is None:
                found.add(top)
            else:
                found |= third_party_imports(helper, seen)
    return found


def _helper(name: str, importer: Path) -> Path | None:
    """The file of a test helper module `name` (`mounting`, `tests.reliability.s3_server`,
    `fuzz.targets`), as the tests import them; None for anything else."""
    parts = name.split(".")
    parts = parts[1:] if parts[0] == "tests" else parts
    for base in (TESTS, importer.parent):
        for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if parts and candidate.is_file():
                return candidate
    return None


def requirements() -> list[str]:
    """The test extra's requirements of LIGHT_REQUIREMENTS, then those of LIGHT_EXTRAS, as
    pyproject.toml spells them."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0].lower(): spec for spec in extras["test"]}
    light = [named[name] for name in LIGHT_REQUIREMENTS]
    return light + [spec for extra in LIGHT_EXTRAS for spec in extras[extra]]


if __name__ == "__main__":
    lines = requirements() if sys.argv[1:] == ["--requirements"] else [f"tests/{m}" for m in MODULES]
    print("\n".join(lines))
