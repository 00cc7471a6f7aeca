"""The docs are tests: every fenced example of README.md and docs/*.md runs here as it is
written, on a scratch machine (`docs_scratch.py`: the paths it names under a temporary root,
the test servers for remote stores), and its shown output is compared (`docs_runners.py`);
the few that cannot run here say so, with the reason, in the Markdown itself
(`docs_examples.py`). One test per example, named by its document and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import zarrfs
from tests.helpers import docs_remote  # noqa: F401  (its givens)
from tests.helpers.docs_examples import DirectiveError, Example, chain, examples, examples_in
from tests.helpers.docs_givens import prepare
from tests.helpers.docs_runners import ExampleFailed, matches, run, transcript
from tests.helpers.docs_scratch import mounts_below, scratch

EXAMPLES = examples()
RUN = [e for e in EXAMPLES if e.not_run is None]


@pytest.mark.parametrize("example", RUN, ids=[e.name for e in RUN])
def test_example_does_what_the_text_says(example: Example, tmp_path: Path) -> None:
    before = chain(example, EXAMPLES)
    session: dict[str, Any] = {}
    with scratch(tmp_path / "machine") as machine:
        try:
            prepare(machine, tuple(name for e in [*before, example] for name in e.given))
            for earlier in before:
                run(earlier, machine, session)
            run(example, machine, session)
        finally:
            unmount_handles(session)
    assert not mounts_below(tmp_path), "the example left a mount behind its scratch machine's unmount"


def unmount_handles(session: dict[str, Any]) -> None:
    """A doctest that failed before its `m.unmount()` leaves that mount on a temporary
    directory outside the scratch machine."""
    for value in session.values():
        if isinstance(value, zarrfs.Mount) and value.mounted:
            value.unmount()


@pytest.mark.fast
def test_every_example_runs_or_says_why_not() -> None:
    unrunnable = [e.name for e in RUN if e.kind == "other"]
    assert not unrunnable, f"blocks with no runner and no `not run:` reason: {unrunnable}"
    assert {e.document for e in EXAMPLES} >= {"README.md", "docs/usage.md", "docs/python.md"}


@pytest.mark.fast
def test_comments_above_fences_say_how_to_run_them() -> None:
    markdown = ("<!-- docs-test: given mounted, rows.raw; continues -->\n```sh\ntrue\n```\n\n"
                "<!-- docs-test: not run: a cluster; of many hosts -->\n```yaml\na: 1\n```\n\n"
                "<!-- an ordinary comment -->\n```python\n>>> 1\n1\n```\n")
    first, second, third = examples_in(markdown, "x.md")
    assert (first.line, first.given, first.continues) == (2, ("mounted", "rows.raw"), True)
    assert first.kind == "shell"
    assert (second.not_run, second.kind) == ("a cluster; of many hosts", "other")
    assert (third.given, third.not_run, third.kind) == ((), None, "session")
    for wrong in ("<!-- docs-test: gven x -->\n```sh\n```\n", "<!-- docs-test: not run: -->\n```sh\n```\n",
                  "<!-- docs-test: given x -->\n\n```sh\n```\n", "<!-- docs-test: given x -->\ntext\n"):
        with pytest.raises(DirectiveError):
            list(examples_in(wrong, "x.md"))


@pytest.mark.fast
def test_a_transcript_compares_output_and_status() -> None:
    commands = transcript("$ echo a &&\n> echo b\na\nb\n$ false\n[1]\n$ ls\n...\nx\n")
    assert [(c.text, c.expected, c.status) for c in commands] == [
        ("echo a &&\necho b", ["a", "b"], 0), ("false", [], 1), ("ls", ["...", "x"], 0)]
    assert matches(["...", "x"], ["a", "b", "x"]) and matches(["...", "x"], ["x"])
    assert not matches(["...", "x"], ["x", "y"]) and not matches(["a"], ["a", "b"])
    assert matches(["sound: 3 arrays, ... bytes"], ["sound: 3 arrays, 572 bytes"])
    assert not matches(["sound: 3 arrays, ... bytes"], ["sound: 4 arrays, 572 bytes"])
    assert not matches(["a (b)"], ["a b"])
    with pytest.raises(ExampleFailed):
        transcript("output\n$ true\n")
    with pytest.raises(ExampleFailed, match="console"):
        run(next(examples_in("```sh\n$ true\n```\n", "x.md")), None, {})  # type: ignore[arg-type]


def test_a_session_that_fails_leaves_no_mount_behind(tmp_path: Path) -> None:
    session: dict[str, Any] = {}
    markdown = ('```python\n>>> import zarrfs\n>>> m = zarrfs.mount("/srv/data/array.zarr")\n'
                '>>> 1 // 0\n0\n```\n')
    with scratch(tmp_path / "machine") as machine:
        prepare(machine, ("array",))
        try:
            with pytest.raises(ExampleFailed, match="ZeroDivisionError"):
                run(next(examples_in(markdown, "x.md")), machine, session)
            assert session["m"].mounted
        finally:
            unmount_handles(session)
        assert not session["m"].mounted
