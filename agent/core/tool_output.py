"""What a tool's output means to the loop: SWE-agent's sentinels, recognised.

A tool ends the run by printing :data:`SUBMISSION` (the patch after it, or between two of them),
asks for a retry with :data:`RETRY_WITH_OUTPUT` / :data:`RETRY_WITHOUT_OUTPUT`, or gives up with
:data:`EXIT_FORFEIT`. :func:`classify_output` tells which.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

SUBMISSION = "<<SWE_AGENT_SUBMISSION>>"
RETRY_WITH_OUTPUT = "###SWE-AGENT-RETRY-WITH-OUTPUT###"
RETRY_WITHOUT_OUTPUT = "###SWE-AGENT-RETRY-WITHOUT-OUTPUT###"
EXIT_FORFEIT = "###SWE-AGENT-EXIT-FORFEIT###"


class OutputKind(StrEnum):
    NORMAL = "normal"
    SUBMISSION = "submission"
    RETRY_WITH_OUTPUT = "retry_with_output"
    RETRY_WITHOUT_OUTPUT = "retry_without_output"
    EXIT_FORFEIT = "exit_forfeit"


@dataclass(frozen=True)
class ToolOutput:
    """What a tool's output means to the loop."""

    kind: OutputKind
    #: The output with the sentinel lines removed.
    text: str
    #: For a submission: the patch (between the two sentinels, or after the only one).
    patch: str | None = None


def classify_output(output: str) -> ToolOutput:
    """Recognise SWE-agent's sentinels in a command's output."""
    if SUBMISSION in output:
        before, _, rest = output.partition(SUBMISSION)
        rest = rest.removeprefix("\r\n").removeprefix("\n")
        patch, found, _after = rest.rpartition(SUBMISSION)
        if not found:
            patch = rest
        return ToolOutput(OutputKind.SUBMISSION, before.strip(), patch)
    for sentinel, kind in (
        (EXIT_FORFEIT, OutputKind.EXIT_FORFEIT),
        (RETRY_WITH_OUTPUT, OutputKind.RETRY_WITH_OUTPUT),
        (RETRY_WITHOUT_OUTPUT, OutputKind.RETRY_WITHOUT_OUTPUT),
    ):
        if sentinel in output:
            return ToolOutput(kind, output.replace(sentinel, "").strip())
    return ToolOutput(OutputKind.NORMAL, output)
