"""The package index as it was at a moment: PyPI's simple API without the files uploaded later.

An environment spec pins some packages and leaves the rest to the resolver; resolved today, the
rest are newer than when the spec was written (and than in the official images built from it),
and an old repository breaks on them (sphinx 3.0 with docutils 0.22). A build that gives a
moment reaches the index through the build proxy (:mod:`envs.images.buildnet`), which passes
each project page through :func:`visible`, so the resolver sees what it saw then. Any pip since
22.2 asks for the JSON form (PEP 691), whose files carry their ``upload-time`` (PEP 700); an
HTML answer is passed through unfiltered.
"""

from __future__ import annotations

from typing import Any

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def visible(page: dict[str, Any], moment: str) -> dict[str, Any]:
    """``page`` (a PEP 691 project page) without the files uploaded at or after ``moment``
    (ISO 8601, UTC, as PEP 700 writes ``upload-time``)."""
    files = [f for f in page.get("files", []) if str(f.get("upload-time") or "") < moment]
    return {**page, "files": files}
