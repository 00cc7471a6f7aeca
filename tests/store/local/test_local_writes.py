"""A local store's writes stay in its directories when a link is swapped in on the way: a
store served by root is often writable by other users, who can replace a chunk directory with
a link to anywhere between the moment a put resolves it and the moment it creates its file.
Without a mount: `zarrfs.store.local` alone, the race made certain by swapping the directory
just after the put has looked it up."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from zarrfs.errors import ConflictError, RefusedKey
from zarrfs.store import TEMP_PREFIX, local
from zarrfs.store.local import Root

pytestmark = pytest.mark.fast


def swap_after(method: str, monkeypatch: pytest.MonkeyPatch, directory: Path, outside: Path) -> None:
    """Replace `directory` with a link to `outside` as soon as `Root.<method>` has looked at it
    or at a path below it (the original kept as `<directory>.moved`)."""
    looked_up: Callable[..., Any] = getattr(Root, method)

    def then_swap(self: Root, path: str) -> Any:
        found = looked_up(self, path)
        if Path(os.path.realpath(path)).is_relative_to(directory) and not directory.is_symlink():
            directory.rename(directory.with_suffix(".moved"))
            directory.symlink_to(outside)
        return found

    monkeypatch.setattr(Root, method, then_swap)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Root, Path, Path]:
    chunks, outside = tmp_path / "store" / "c" / "0", tmp_path / "outside"
    chunks.mkdir(parents=True)
    outside.mkdir()
    (chunks / "1").write_bytes(b"old")
    return Root(str(tmp_path / "store")), chunks, outside


@pytest.mark.parametrize("method", ["checked", "directory"])
def test_a_put_never_follows_a_link_swapped_in_after_its_lookup(
        store: tuple[Root, Path, Path], method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root, chunks, outside = store
    swap_after(method, monkeypatch, chunks, outside)
    with contextlib.suppress(OSError):  # (refused: as good, so long as nothing lands outside)
        local.write_atomically(root, str(chunks / "1"), b"new", sync_directory=True)
    assert sorted(os.listdir(outside)) == []
    opened = chunks.with_suffix(".moved") if chunks.is_symlink() else chunks
    assert (opened / "1").read_bytes() in (b"new", b"old")


@pytest.mark.parametrize("method", ["checked", "directory"])
def test_a_delete_never_follows_a_link_swapped_in_after_its_lookup(
        store: tuple[Root, Path, Path], method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root, chunks, outside = store
    (outside / "1").write_bytes(b"someone else's")
    swap_after(method, monkeypatch, chunks, outside)
    local.delete(root, str(chunks / "1"))
    assert (outside / "1").read_bytes() == b"someone else's"


def test_writes_make_missing_directories_and_compare_generations(tmp_path: Path) -> None:
    root = Root(str(tmp_path))
    key = str(tmp_path / "c" / "3" / "4")
    first = local.replace_if(root, key, b"a", True, None)  # (its directories made)
    with pytest.raises(ConflictError):
        local.replace_if(root, key, b"b", True, None)
    second = local.replace_if(root, key, b"c", True, first)
    with pytest.raises(ConflictError):
        local.delete_if(root, key, first)
    assert local.delete_if(root, key, second)
    assert not os.path.lexists(key)
    assert local.delete_if(root, str(tmp_path / "nowhere" / "0"), None)
    with pytest.raises(ConflictError):
        local.delete_if(root, str(tmp_path / "nowhere" / "0"), second)
    assert [n for n in os.listdir(tmp_path / "c" / "3") if n.startswith(TEMP_PREFIX)] == []


def test_a_node_removed_or_moved_stays_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node deleted or renamed through the mount (its chunks' directory) while its parent is
    swapped for a link: the store's own directory changes, never the link's target."""
    groups, outside = tmp_path / "store" / "g", tmp_path / "outside"
    (groups / "a" / "c").mkdir(parents=True)
    (groups / "a" / "c" / "0").write_bytes(b"chunk")
    (outside / "a").mkdir(parents=True)
    (outside / "a" / "0").write_bytes(b"someone else's")
    root = Root(str(tmp_path / "store"))
    swap_after("directory", monkeypatch, groups, outside)
    assert local.remove_tree(root, str(groups / "a")) == 1
    assert (outside / "a" / "0").read_bytes() == b"someone else's"
    assert not (groups.with_suffix(".moved") / "a").exists()
    (outside / "b").mkdir()
    with pytest.raises(RefusedKey):  # (the link at `g` now leads outside)
        local.move(root, str(groups / "b"), str(groups / "c"))
    assert sorted(os.listdir(outside)) == ["a", "b"]


@pytest.mark.parametrize("method", ["checked", "directory"])
def test_a_put_makes_its_directories_inside(tmp_path: Path, method: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A put whose chunk directories do not exist yet makes them in the store while `c` is
    swapped for a link as soon as a lookup has passed it: nothing is made outside."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "c").mkdir(parents=True)
    outside.mkdir()
    root = Root(str(store))
    swap_after(method, monkeypatch, store / "c", outside)
    with contextlib.suppress(OSError):  # (refused: as good, so long as nothing lands outside)
        local.write_atomically(root, str(store / "c" / "5" / "7" / "0"), b"new", sync_directory=False)
    assert os.listdir(outside) == []
    if method == "directory":  # (the directories made where the put had looked)
        assert (store / "c.moved" / "5" / "7" / "0").read_bytes() == b"new"
