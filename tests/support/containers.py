"""A one-off container for a test: created, started, and removed whatever happens.

docker-py's ``containers.run`` creates the container, then starts it: when the daemon refuses
the start, the created container is left behind (and one without pgs's labels is never reaped).
Here the start happens inside the block that removes it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


@contextmanager
def one_off(client: Any, image: str, command: Sequence[str], **options: Any) -> Iterator[Any]:
    """The started container of ``image`` running ``command`` (``options``: those of
    ``containers.create``), removed when the block ends."""
    container = client.containers.create(image, list(command), **options)
    try:
        container.start()
        yield container
    finally:
        container.remove(force=True)
