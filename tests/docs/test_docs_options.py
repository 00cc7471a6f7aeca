"""The option tables of the docs hold what the code takes: usage.md's table is the one made
from the options' declarations (`zarrfs options --markdown`), every `-o` option it lists
parses (its placeholders given a value), and every keyword argument python.md lists turns
into the `-o` option it shows beside it (`zarrfs.api.options_text`, what `zarrfs.mount` uses).
"""

from __future__ import annotations

import ast

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.helpers.docs_examples import ROOT
from zarrfs.api import options_text
from zarrfs.cli.option_help import markdown_table
from zarrfs.options import MountOptions

pytestmark = pytest.mark.fast

# A value for each placeholder of usage.md's table.
PLACEHOLDERS = {"N": "2", "OCTAL": "027", "SIZE": "512M", "KB": "2048", "FILE": "/tmp/zarrfs.log",
                "URL": "http://127.0.0.1:9000", "NAME": "archive", "SECONDS": "5", "PATH": "refs.json",
                "HOST:PORT": "127.0.0.1:0", "NAME[:LEVEL]": "gzip:6", "N:N:...": "64:64",
                "PREFIX:PREFIX": "/data:s3://other/x"}


def table_rows(document: str, first_header: str) -> list[list[list[str]]]:
    """The rows of the table of `document` whose first header is `first_header`: per cell, the
    code spans in it."""
    tokens = MarkdownIt("commonmark").enable("table").parse((ROOT / document).read_text())
    rows: list[list[list[str]]] = []
    found = False
    for row in _rows(tokens):
        if row[0] == "header":
            found = bool(row[1]) and row[1][0] == [first_header]
            continue
        if found:
            rows.append(row[1])
    assert rows, f"{document}: no table headed {first_header!r}"
    return rows


def _rows(tokens: list[Token]) -> list[tuple[str, list[list[str]]]]:
    rows: list[tuple[str, list[list[str]]]] = []
    part = "body"
    in_cell = False
    for token in tokens:
        if token.type in ("thead_open", "tbody_open"):
            part = "header" if token.type == "thead_open" else "body"
        elif token.type == "tr_open":
            rows.append((part, []))
        elif token.type in ("th_open", "td_open", "th_close", "td_close"):
            in_cell = token.type.endswith("_open")
        elif token.type == "inline" and in_cell:
            rows[-1][1].append([c.content for c in token.children or [] if c.type == "code_inline"]
                               or [token.content])
    return rows


def test_usage_md_table_is_the_declared_options() -> None:
    lines = (ROOT / "docs/usage.md").read_text().splitlines()
    start = lines.index("| Option | Meaning |")
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    # (made again by `zarrfs options --markdown`, pasted over the table)
    assert "\n".join(lines[start:end]) == markdown_table()


def test_every_option_usage_md_lists_parses() -> None:
    options = [span for row in table_rows("docs/usage.md", "Option") for span in row[0]]
    assert {"ro", "cache=SIZE", "timeout=SECONDS", "metrics=HOST:PORT"} <= set(options)
    for option in options:
        if option in ("...", "true", "false"):
            continue
        name, has_value, value = option.partition("=")
        text = f"{name}={PLACEHOLDERS.get(value, value)}" if has_value else name
        MountOptions.parse([text])  # OptionError names the option that does not


def test_every_keyword_python_md_lists_is_the_option_beside_it() -> None:
    rows = table_rows("docs/python.md", "Python")
    checked = 0
    for python, command in rows:
        shown = set(command)
        for span in (s for s in python if "=" in s):  # (not the `rw` of "`ro=False` is `rw`")
            call = ast.parse(f"f({span})", mode="eval").body
            assert isinstance(call, ast.Call) and len(call.keywords) == 1, span
            keyword = call.keywords[0]
            meant = MountOptions.parse([options_text({keyword.arg: ast.literal_eval(keyword.value)})])
            # The `-o` column shows the option (as a code span), or says "the same"
            options = [s for s in shown if "=" in s or s.isidentifier()]
            assert not options or meant in [MountOptions.parse([s]) for s in options], (span, shown)
            checked += 1
    assert checked >= 20
