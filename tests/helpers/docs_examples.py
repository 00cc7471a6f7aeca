"""The fenced examples of README.md and docs/*.md, found by a Markdown parser (markdown-it-py),
with what the comment above each says about running it.

Every fenced block is an example. An HTML comment on the line just above its fence (invisible
when the Markdown is rendered) says how `tests/docs/test_docs.py` runs it; clauses are separated
by `;`:

    <!-- docs-test: not run: a Kubernetes cluster -->     never run, and why (required; the
                                                          last clause, the rest of the comment)
    <!-- docs-test: given mounted, result.npy -->         prepared first (tests/helpers/docs_scratch.py)
    <!-- docs-test: continues -->                         after the block before it, as a reader
                                                          goes on (a `>>>` session, a shell)

A block without a comment is run as it is. The convention, and how paths and URLs are
substituted, is described in docs/development.md ("The docs are tests").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md")))
_DIRECTIVE = re.compile(r"<!--\s*docs-test:(?P<body>.*?)-->\s*$", re.DOTALL)
SHELLS = ("sh", "bash", "shell")
PYTHON = ("python", "py", "pycon")
CONSOLE = ("console",)
FSTAB = ("fstab",)


class DirectiveError(ValueError):
    """A `docs-test:` comment that does not say something the runner understands."""


@dataclass(frozen=True)
class Example:
    document: str  # relative to the repository, e.g. "docs/usage.md"
    line: int  # 1-based line of the opening fence
    language: str  # the fence's info string, first word ("" for none)
    text: str
    given: tuple[str, ...] = ()
    continues: bool = False
    not_run: str | None = None

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def is_session(self) -> bool:
        """A Python interpreter session (`>>>`), run as a doctest."""
        return self.language in PYTHON and self.text.lstrip().startswith(">>>")

    @property
    def kind(self) -> str:
        if self.language in SHELLS:
            return "shell"
        if self.language in CONSOLE:
            return "console"
        if self.language in FSTAB:
            return "fstab"
        if self.language in PYTHON:
            return "session" if self.is_session else "script"
        return "other"


def examples() -> list[Example]:
    return [example for document in DOCUMENTS for example in examples_of(document)]


def examples_of(document: str) -> Iterator[Example]:
    return examples_in((ROOT / document).read_text(), document)


def examples_in(markdown: str, document: str) -> Iterator[Example]:
    tokens = MarkdownIt("commonmark").parse(markdown)
    comment: Token | None = None
    for token in tokens:
        attached = comment is not None and token.type == "fence" and _just_above(comment, token)
        if comment is not None and not attached:
            _refuse_directive(comment, document)
        if token.type == "fence":
            yield _example(document, token, comment.content if comment is not None and attached else "")
        comment = token if token.type == "html_block" else None
    if comment is not None:
        _refuse_directive(comment, document)


def _refuse_directive(comment: Token, document: str) -> None:
    """A docs-test comment that is not just above a fence would silently apply to nothing."""
    if _DIRECTIVE.search(comment.content):
        raise DirectiveError(f"{document}:{_line(comment)}: a docs-test comment not just above a fence")


def _line(token: Token) -> int:
    assert token.map is not None
    return token.map[0] + 1


def _just_above(comment: Token, fence: Token) -> bool:
    assert comment.map is not None and fence.map is not None
    return comment.map[1] == fence.map[0]


def _example(document: str, fence: Token, comment: str) -> Example:
    example = Example(document, _line(fence), fence.info.split()[0] if fence.info else "", fence.content)
    match = _DIRECTIVE.search(comment)
    if match is None:
        return example
    try:
        return _directed(example, match["body"])
    except DirectiveError as e:
        raise DirectiveError(f"{example.name}: {e}") from None


def _directed(example: Example, body: str) -> Example:
    given: list[str] = []
    continues = False
    body, marker, reason = body.partition("not run:")  # the last clause: its reason may hold `;`
    not_run = " ".join(reason.split()) if marker else None
    if marker and not not_run:
        raise DirectiveError("docs-test: `not run:` without a reason")
    for clause in (c.strip() for c in body.split(";") if c.strip()):
        if clause.startswith("given "):
            given += [name.strip() for name in clause[len("given "):].split(",") if name.strip()]
        elif clause == "continues":
            continues = True
        else:
            raise DirectiveError(f"docs-test: cannot read {clause!r}")
    return Example(example.document, example.line, example.language, example.text,
                   tuple(given), continues, not_run)


def chain(example: Example, every: list[Example]) -> list[Example]:
    """The blocks a reader runs before `example` when it `continues`: the one before it in
    its document, and that one's own chain."""
    before: list[Example] = []
    same = [e for e in every if e.document == example.document]
    current = example
    while current.continues:
        index = same.index(current)
        if index == 0:
            raise DirectiveError(f"{current.name}: continues, but is the document's first block")
        current = same[index - 1]
        before.insert(0, current)
    return before
