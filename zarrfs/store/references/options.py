"""The mount options of reference sets: which set `reference://` mounts, and where else the
references of a set (and the links of local files, Icechunk's virtual chunks) may lead."""

from __future__ import annotations

import re

from ...declared import Option, parse_name, valued


def _parse_prefixes(text: str) -> tuple[str, ...]:
    """`PREFIX:PREFIX` (colon-separated: -o splits on commas). A URL's own colon stays with
    it: `s3://other/x:/data` is `s3://other/x` and `/data`."""
    parts = re.split(r":(?!//)", text)
    if not all(parts):
        raise ValueError(text)
    return tuple(parts)


FO = valued("fo", "text", "PATH", parse_name, None,
            "the reference set (JSON or Parquet) to mount when SOURCE is `reference://`")
REFERENCES_ALLOW: Option[tuple[str, ...]] = valued(
    "references_allow", "list", "PREFIX:PREFIX", _parse_prefixes, (),
    "reference sets, Icechunk's virtual chunks and a local store's symbolic links: further places "
    "(colon-separated local directories or URL prefixes) that references, virtual chunk containers and links "
    "may point to; by default only below the set's own directory, bucket or host, the repository's own "
    "directory or bucket, or the store's own directory — see [What a mount trusts](#what-a-mount-trusts)")
OPTIONS = (FO, REFERENCES_ALLOW)
