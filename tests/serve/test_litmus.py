"""litmus, the WebDAV conformance suite, against `zarrfs serve -o rw` of an empty group: every
test that applies passes; those that fail are exactly the ones docs/serve.md ("What litmus
says") lists as not applying, each failing for the reason it gives there: a tree of Zarr
data holds no plain files, so a PUT of one (`res`, `lockme`, ...) and a LOCK of a name that
does not exist (which makes an empty file) are refused with 403, and the tests built on
those files fail or are skipped after them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import zarr

from tests.helpers.serving import served

# (suite, test) -> what its failure says: the refusals docs/serve.md explains. (Where litmus
# names a file it made with a random name, it prints bytes that are no name: only "PUT of".)
REFUSED = {
    ("basic", "put_get"): "PUT of `/litmus/res' failed: 403 Forbidden",
    ("basic", "put_get_utf8_segment"): "failed: 403 Forbidden",
    ("copymove", "copy_init"): "(PUT of `",
    ("copymove", "copy_coll"): "(PUT of `",
    ("copymove", "copy_shallow"): "MKCOL on `/litmus/ccsrc/': 405",  # (left by copy_coll's refused PUT)
    ("copymove", "move"): "(PUT of `",
    ("copymove", "move_coll"): "(PUT of `",
    ("props", "propinit"): "(PUT of `",
    ("props", "propmanyns"): "PROPPATCH on `/litmus/prop': 404",  # (propinit's file was refused)
    ("locks", "put"): "(PUT of `",
    ("locks", "lock_excl"): "LOCK on `/litmus/lockme': 403",
    ("locks", "lock_shared"): "LOCK on `/litmus/lockme': 403",
    ("locks", "lock_collection"): "(PUT of `",
    ("locks", "owner_modify"): "PUT on locked resource failed: 403",
    ("locks", "indirect_refresh"): "via /litmus/lockcoll/lockme.txt: 400",  # (lockme.txt was refused)
    ("locks", "unmapped_lock"): "via /litmus/unmapped_url: 403",
}
# Tests that pass, by suite, at the least (litmus 0.13, Debian 12): the protocol itself.
PASSING = {
    "basic": {"init", "begin", "options", "put_no_parent", "delete_null", "delete_fragment", "mkcol",
              "mkcol_again", "delete_coll", "mkcol_no_parent", "mkcol_with_body", "finish"},
    "props": {"propfind_invalid", "propfind_invalid2", "propfind_d0", "propextended"},
    "http": {"expect100"},
}
# The `locks' suite, test by test, each result in turn (litmus runs some names more than once):
# what passes, what is skipped after a refusal (REFUSED says which and why).
S, P, F, W = "SKIPPED", "pass", "FAIL", "WARNING"  # (WARNING: passed, warning of a refusal before)
LOCKS = {
    "init": [P], "begin": [P], "options": [P], "precond": [P], "init_locks": [P], "put": [F],
    "lock_excl": [F], "discover": [S], "refresh": [S, P], "notowner_modify": [S, S, S, S, W],
    "notowner_lock": [S, S, S, S], "owner_modify": [S, S, F], "copy": [S], "cond_put": [S],
    "fail_cond_put": [S], "cond_put_with_not": [S], "cond_put_corrupt_token": [S], "complex_cond_put": [S],
    "fail_complex_cond_put": [S], "unlock": [S, S, P, S], "fail_cond_put_unlocked": [W],
    "lock_shared": [F], "double_sharedlock": [S], "prep_collection": [P], "lock_collection": [F],
    "indirect_refresh": [F], "unmapped_lock": [F], "finish": [P],
}
LINE = re.compile(r"\s*\d+\.\s+(\w+)\.*\s+(pass|FAIL|SKIPPED|WARNING)(.*)")


def litmus_results(output: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(suite, test) -> each result litmus printed for it: (result, what it said)."""
    results: dict[tuple[str, str], list[tuple[str, str]]] = {}
    suite = ""
    for line in output.replace("\r", "\n").splitlines():
        if found := re.match(r"-> running `(\w+)'", line):
            suite = found[1]
        elif found := LINE.fullmatch(line):
            results.setdefault((suite, found[1]), []).append((found[2], found[3].strip()))
    return results


def test_litmus_passes_every_test_that_applies(tmp_path: Path) -> None:
    zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=3)
    with served(tmp_path / "g.zarr", tmp_path, ["rw"]) as server:
        done = subprocess.run(["litmus", "-k", server.url], capture_output=True, text=True, errors="replace",
                              timeout=300, cwd=tmp_path)  # (litmus writes its logs in its directory)
        assert "Traceback" not in server.log()
    results = litmus_results(done.stdout)
    assert {suite for suite, _ in results} == {"basic", "copymove", "props", "locks", "http"}, done.stdout
    failed = {test: said for test, found in results.items() for result, said in found if result == "FAIL"}
    assert set(failed) == set(REFUSED), done.stdout
    for test, said in failed.items():
        assert REFUSED[test] in said, (test, said)
    locks = {test: [result for result, _ in found]
             for (suite, test), found in results.items() if suite == "locks"}
    assert locks == LOCKS, done.stdout
    passed = {test for test, found in results.items() if all(result == "pass" for result, _ in found)}
    for suite, names in PASSING.items():
        assert {(suite, name) for name in names} <= passed, (suite, done.stdout)
