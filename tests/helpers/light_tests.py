"""The fast tier's modules that need no heavy oracle: what `scripts/release-check --tests` runs
under a second interpreter (`scripts/test`'s whole run: pyenv's newest Python), from the
unpacked sdist against the installed wheel, in a venv holding only the wheel with `[s3]`, the
`LIGHT_REQUIREMENTS` of the test extra and the `LIGHT_EXTRAS`: no TensorStore, h5py, netCDF4, xarray, GDAL,
moto, ... whose install would cost CI minutes (docs/development.md, "Other Pythons").

A module is light when it and the test helpers it imports import only the standard library,
zarrfs, the packages of `LIGHT_IMPORTS` and those of the test extra named here.
`tests/scripts/test_light_tests.py` (fast tier) checks that `MODULES` is exactly the fast tier's light
modules but those of `LEFT_OUT`, so the list grows with the fast tier.

    python tests/helpers/light_tests.py                  # the modules, as paths from the repository
    python tests/helpers/light_tests.py --requirements   # the requirements they need beyond zarrfs[s3]
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
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
# of the corpora's arrays (numcodecs loads them), fsspec's reference sets (jinja2), the server
# that `zarrfs serve` runs (WsgiDAV, cheroot: pure Python).
LIGHT_EXTRAS = ("codecs", "references", "serve")

# Light by their imports, not run under the second interpreter, and why.
LEFT_OUT = {
    **dict.fromkeys(
        ["scripts/test_check_layers_basics.py", "scripts/test_check_layers_rules.py",
         "scripts/test_check_layers_rooms.py"],
        "checks the checkout's source (scripts/check_layers.py), not an installation"),
    **dict.fromkeys(["daemon/test_lifecycle_steps.py", "scripts/test_class_names.py",
                     "scripts/test_test_imports.py"],
                    "checks the checkout's source (zarrfs/, tests/), not an installation"),
    "daemon/test_user_option.py": "its reader runs this Python as nobody: not one in root's home (pyenv's)",
    "scripts/test_light_tests.py":
        "checks this list against pytest's collection of the fast tier, which imports every test module",
}

MODULES = [
    "array/cache/test_keyed_locks.py", "array/cache/test_masks.py", "array/cache/test_pieces.py",
    "array/decoding/test_chunk_files.py",
    "array/decoding/test_decoding_pool.py", "array/decoding/test_encoding_jobs.py",
    "array/reads/test_decode_policy.py", "array/reads/test_readahead_bands.py",
    "array/reads/test_readahead_memory.py", "array/reads/test_readahead_slabs.py",
    "array/reads/test_readahead_stale.py",
    "array/reads/test_readahead_cost.py", "array/reads/test_sharded_streams.py",
    "array/stored/test_stored_keys.py",
    "array/test_engine_properties_model.py", "array/test_engine_properties_reads.py",
    "array/test_loader_pool.py", "array/test_stored_reads_seen.py",
    "array/test_written_back_during_load.py",
    "array/test_written_reads.py", "array/writes/test_early_writes_chunks.py",
    "array/writes/test_early_writes_memory.py", "array/writes/test_make_room.py",
    "array/writes/test_writeback_memory.py", "cli/test_install_system.py", "cli/test_systemd.py",
    "cli/test_option_help.py",
    "codecs/test_zstd_codec.py", "daemon/test_memory.py", "daemon/test_metrics.py",
    "formats/test_format_registry.py", "fuse/test_late_replies.py", "fuse/test_statfs.py",
    "fuse/test_store_errors.py", "fuzz/test_findings.py", "fuzz/test_replay.py",
    "interop/test_zarrs_corpus.py", "reliability/test_faulty_fs_array.py",
    "reliability/test_faulty_fs_store.py",
    "serve/test_directory_page.py", "serve/test_grid_requests.py",
    "serve/test_hosts.py", "serve/test_http.py", "serve/test_origins.py", "serve/test_plain_http.py",
    "serve/test_upload_locks.py", "serve/test_uploads.py", "serve/test_write_clients.py",
    "serve/test_writes.py",
    "store/disk_cache/test_disk_cache_entries.py", "store/local/test_local_writes.py",
    "store/test_deadlines.py", "store/test_page_cache.py",
    "store/test_store_stats.py", "test_api.py", "test_api_options.py", "test_rectilinear.py",
    "tree/test_file_revisions.py",
    "test_declared.py", "test_options.py",
    "tree/test_tree.py",
    "views/tiff/test_stored_tiles.py",
]


def third_party_imports(path: Path, seen: set[Path] | None = None, *,
                        at_import: bool = False) -> set[str]:
    """The top-level names of what the module at `path` imports, anywhere in it (`at_import`:
    in the statements at its top only, what importing it runs), that are neither the standard
    library nor zarrfs, following the tests' own helper modules (so)."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in (tree.body if at_import else ast.walk(tree)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            # (`from tests.helpers import docs_remote`: the helper module is followed too)
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names
                                   if _helper(f"{node.module}.{alias.name}", path) is not None)]
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
                found |= third_party_imports(helper, seen, at_import=at_import)
    return found


def conftest_imports(module: Path, root: Path = TESTS) -> set[str]:
    """What the conftest.py files pytest loads for the test module at `module` (its folder's and
    each one's above it, up to `root`) import at their top level, as `third_party_imports` says of
    each such import: a conftest that imports TensorStore there fails every module below it where
    there is none, whatever the module imports (a fixture's own imports run only where it is used)."""
    found: set[str] = set()
    folder = module.parent
    while folder == root or root in folder.parents:
        conftest = folder / "conftest.py"
        if conftest.is_file():
            found |= third_party_imports(conftest, at_import=True)
        folder = folder.parent
    return found


def _helper(name: str, importer: Path) -> Path | None:
    """The file of a test helper module `name` (`tests.helpers.mounting`,
    `tests.helpers.s3_server`), as the tests import them; None for anything else."""
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
