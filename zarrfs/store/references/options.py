"""The mount options of reference sets: which set `reference://` mounts, and where else the
references of a set may lead (`targets.REFERENCES_ALLOW`: the rule reference sets share with
a local store's links and Icechunk's virtual chunks, declared with it)."""

from __future__ import annotations

from ...declared import parse_name, valued
from ..targets import REFERENCES_ALLOW

FO = valued("fo", "text", "PATH", parse_name, None,
            "the reference set (JSON or Parquet) to mount when SOURCE is `reference://`")
OPTIONS = (FO, REFERENCES_ALLOW)
