"""tests/helpers/light_tests.py lists the fast tier's modules that need no heavy oracle (what runs
under a second interpreter in CI): exactly those, but the ones it leaves out with a reason. And
every room of tests has fast tests, or says why not."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import light_tests
from tests.helpers.fast_tier import fast_modules

pytestmark = pytest.mark.fast

TESTS = Path(__file__).resolve().parents[1]


def test_the_list_is_the_light_fast_modules(pytestconfig: pytest.Config) -> None:
    light = {m for m in fast_modules(pytestconfig)
             if light_tests.third_party_imports(TESTS / m) | light_tests.conftest_imports(TESTS / m)
             <= light_tests.LIGHT_IMPORTS}
    assert set(light_tests.MODULES) == light - set(light_tests.LEFT_OUT)
    assert set(light_tests.LEFT_OUT) <= light
    assert len(light_tests.MODULES) == len(set(light_tests.MODULES))


def test_every_room_has_fast_tests_or_says_why(pytestconfig: pytest.Config) -> None:
    """A folder of test modules has some in the fast tier, or its conftest.py says why not."""
    rooms = {path.parent for path in TESTS.rglob("test_*.py")}
    fast = {(TESTS / module).parent for module in fast_modules(pytestconfig)}
    silent = [room.relative_to(TESTS).as_posix() for room in sorted(rooms - fast)
              if "fast tier" not in _conftest_text(room)]
    assert not silent, f"rooms with no fast test that do not say why (in their conftest.py): {silent}"


def _conftest_text(room: Path) -> str:
    conftest = room / "conftest.py"
    return conftest.read_text() if conftest.is_file() else ""


def test_imports_are_followed_through_helpers() -> None:
    """test_api imports only zarrfs, numpy and zarr itself, and heavier things through no
    helper; test_mount_daemon reaches TensorStore; helpers' imports count (mounting, s3_server)."""
    assert light_tests.third_party_imports(TESTS / "test_api.py") <= light_tests.LIGHT_IMPORTS
    assert "tensorstore" in light_tests.third_party_imports(TESTS / "fuse" / "test_mount_daemon.py")
    assert "moto" in light_tests.third_party_imports(TESTS / "reliability" / "test_partition_reads.py")


def test_a_conftest_importing_a_heavy_package_at_its_top_makes_its_rooms_heavy(tmp_path: Path) -> None:
    """What a conftest imports at its top is loaded for every module below it (the light tests
    once failed so in CI: a conftest of the test split imported TensorStore); what one of its
    fixtures imports is not."""
    room = tmp_path / "room" / "inner"
    room.mkdir(parents=True)
    (tmp_path / "conftest.py").write_text("import numpy\n")
    (tmp_path / "room" / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef made():\n    import h5py\n    return h5py\n")
    (room / "test_a.py").write_text("def test_a():\n    pass\n")
    assert light_tests.conftest_imports(room / "test_a.py", root=tmp_path) == {"numpy", "pytest"}
    (room / "conftest.py").write_text("import tensorstore as ts\n")
    found = light_tests.conftest_imports(room / "test_a.py", root=tmp_path)
    assert found == {"numpy", "pytest", "tensorstore"}


def test_the_command_prints_paths_and_requirements() -> None:
    def run(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, str(TESTS / "helpers" / "light_tests.py"), *args],
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout.splitlines()

    paths = run()
    assert paths == [f"tests/{m}" for m in light_tests.MODULES]
    assert all((TESTS.parent / p).is_file() for p in paths)
    requirements = run("--requirements")
    named = [re.split(r"[<>=]", r)[0] for r in requirements]
    assert named[:len(light_tests.LIGHT_REQUIREMENTS)] == list(light_tests.LIGHT_REQUIREMENTS)
    assert {"pcodec", "zfpy"} <= set(named)  # (the codecs extra: the corpora's arrays need them)
