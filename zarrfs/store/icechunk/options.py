"""The mount options of Icechunk repositories (the repository's client is not imported here:
the options are read on every mount)."""

from __future__ import annotations

from ...declared import Option, parse_name, parse_seconds, valued


def _parse_commit(text: str) -> float:
    """`each` (0: a commit per fsync) or the seconds within which fsyncs share one."""
    return 0.0 if text == "each" else parse_seconds(text)


REF = valued("ref", "text", "NAME", parse_name, None,
             "Icechunk: the branch (default `main`, followed on reopen), tag or snapshot id to mount")
COMMIT = Option("commit", "seconds", 0.0, "Icechunk with `rw`: a commit per `fsync`/close (default), or one "
                "shared by those within SECONDS ([remote.md](remote.md#icechunk-repositories))",
                ("each", "SECONDS"), _parse_commit)
OPTIONS = (REF, COMMIT)
