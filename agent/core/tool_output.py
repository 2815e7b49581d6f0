"""What a tool's output means to the loop: SWE-agent's sentinels, recognised where they count.

A submit tool ends the run by printing :data:`SUBMISSION`; a forfeit tool gives up with
:data:`EXIT_FORFEIT`; a bundle's tool may ask for a retry with :data:`RETRY_WITH_OUTPUT` /
:data:`RETRY_WITHOUT_OUTPUT`. Which tool a command runs is its :class:`Role`
(:meth:`agent.core.tools.Toolset.role`): a sentinel in the output of a command that does not run
that kind of tool (``cat NOTES.md`` of a file that holds the marker) is plain text, and stays in
the observation. :func:`classify_output` tells which. The submitted patch is never read from the
output: the loop takes the sandbox's diff once a submit tool has submitted.
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


class Role(StrEnum):
    """What a command runs, as far as sentinels go: the most a sentinel in its output can do."""

    #: ``bash`` or a typed command running no bundle tool: no sentinel counts.
    COMMAND = "command"
    #: A bundle's tool: the retry sentinels count.
    TOOL = "tool"
    #: A submit tool (``tools.submit_tools``): the submission and retry sentinels count.
    SUBMIT = "submit"
    #: A forfeit tool (``tools.forfeit_tools``): the forfeit and retry sentinels count.
    FORFEIT = "forfeit"


@dataclass(frozen=True)
class ToolOutput:
    """What a tool's output means to the loop."""

    kind: OutputKind
    #: The output the model sees: for a submission what came before the marker; otherwise the
    #: output with the sentinels that counted removed.
    text: str


def classify_output(output: str, role: Role) -> ToolOutput:
    """Recognise SWE-agent's sentinels in the output of a command of ``role``."""
    if role is Role.COMMAND:
        return ToolOutput(OutputKind.NORMAL, output)
    if role is Role.SUBMIT and SUBMISSION in output:
        return ToolOutput(OutputKind.SUBMISSION, output.partition(SUBMISSION)[0].strip())
    if role is Role.FORFEIT and EXIT_FORFEIT in output:
        return ToolOutput(OutputKind.EXIT_FORFEIT, output.replace(EXIT_FORFEIT, "").strip())
    for sentinel, kind in (
        (RETRY_WITH_OUTPUT, OutputKind.RETRY_WITH_OUTPUT),
        (RETRY_WITHOUT_OUTPUT, OutputKind.RETRY_WITHOUT_OUTPUT),
    ):
        if sentinel in output:
            return ToolOutput(kind, output.replace(sentinel, "").strip())
    return ToolOutput(OutputKind.NORMAL, output)
