"""The options' help, made from their declarations: `zarrfs options [NAME]`, the list under
`zarrfs mount --help` and `zarrfs serve --help` (what `serve` takes), and one line for a
name no option has."""

from __future__ import annotations

import pytest

from zarrfs.cli.command_line import main
from zarrfs.options import DECLARED

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def _terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def heads(text: str) -> list[str]:
    """The first line of each option's entry (its help lines are indented)."""
    return [line for line in text.splitlines() if line and not line.startswith(" ")]


def test_options_lists_every_declared_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["options"]) == 0
    listed = heads(capsys.readouterr().out)
    assert len(listed) == len(list(DECLARED))
    assert "tiff=tiles, tiff=strips  (choice)" in listed and "ro, rw  (words)" in listed


def test_options_names_say_what_each_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["options", "tiff", "noatime", "cache=1G"]) == 0
    out = capsys.readouterr().out
    assert [head.split(",")[0].split()[0] for head in heads(out)] == ["tiff=tiles", "nodev", "cache=SIZE"]
    assert "readers that read no tiles" in " ".join(out.split())
    assert "](" not in out  # (links shown as their text in a terminal)


def test_an_unknown_name_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["options", "tif"]) == 1
    said = capsys.readouterr().err.splitlines()
    assert said == ["zarrfs: unknown option 'tif' (`zarrfs options` lists them)"]


def test_mount_help_lists_the_options_and_serve_help_those_it_takes(
        capsys: pytest.CaptureFixture[str]) -> None:
    helps = []
    for command in ("mount", "serve"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        helps.append(" ".join(capsys.readouterr().out.split()))
    mount, serve = helps
    for shown in ("ro|rw", "cache=SIZE", "tiff=tiles|strips", "filters=builtin|plugins",
                  "nc_format=auto|cdf5", "disk_cache=DIR", "commit=each|SECONDS"):
        assert shown in mount and shown in serve
    assert "allow_other" in mount and "allow_other" not in serve
