"""Sealed checks: a sandbox the Generator never touched, holding the original code.

The Generator is root in its sandbox, and whatever it changes outside its patch (a ``.pth``
file in site-packages, the interpreter's ``sitecustomize``, an installed pytest or Hypothesis,
``/conftest.py``, git's config, replace refs, ignored files) would be there when a check runs
in the same sandbox, and can turn a wrong patch into a passing one. A :class:`Seal` is taken
when the sandbox is ready, before the Generator's first command: :meth:`Seal.fresh` then gives
a new sandbox in that state, where a check applies only the submitted patch, as the official
SWE-bench harness grades a patch in a fresh container.

- :class:`~envs.docker_sandbox.DockerSandbox` seals (``DockerSandbox.seal``): a new container
  of its image, or of a snapshot of its container when the sandbox was given files after it
  started (the repository copied in, the user's uncommitted changes; not pgs's own helper and
  plugin folders, which pgs writes into every new container itself);
- every other sandbox is :class:`Unsealed`: the check runs where the Generator worked, and
  every verdict says so (:data:`UNSEALED_NOTE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from envs.sandbox import Sandbox

#: What a verdict reached in the Generator's own sandbox says.
UNSEALED_NOTE = "not sealed: the check ran in the Generator's own sandbox"


@runtime_checkable
class Seal(Protocol):
    """Where a check runs."""

    #: True: :meth:`fresh` gives a sandbox the Generator never touched.
    sealed: bool
    #: Why a check is not sealed (None when it is).
    reason: str | None

    def fresh(self) -> Sandbox:
        """A sandbox with the repository at the base commit, as it was when the seal was taken;
        the caller closes it. An unsealed seal returns the Generator's sandbox (never close it)."""
        ...


class Unsealed:
    """The Generator's own sandbox: a check there isolates nothing from it."""

    sealed = False

    def __init__(self, sandbox: Sandbox, reason: str) -> None:
        self.sandbox = sandbox
        self.reason: str | None = reason

    def fresh(self) -> Sandbox:
        return self.sandbox


def seal_of(sandbox: Sandbox, base: str, *, own: Sequence[str] = ()) -> Seal:
    """The sandbox's seal, taken now (call it once the sandbox is ready, before the Generator
    runs): its own when it offers one (a ``seal(base, own=...)`` method), else
    :class:`Unsealed`. ``own``: folders the caller writes itself into every fresh sandbox before
    using it (pgs's pytest plugin), which need no snapshot."""
    take = getattr(sandbox, "seal", None)
    if take is None:
        kind = type(sandbox).__name__
        return Unsealed(sandbox, f"{kind} cannot start a fresh sandbox")
    seal = take(base, own=own)
    assert isinstance(seal, Seal)
    return seal
