"""What a tool's output means to the loop: SWE-agent's sentinels, recognised where they count.

A submit tool ends the run by printing :data:`SUBMISSION`; a forfeit tool gives up with
:data:`EXIT_FORFEIT`; a bundle's tool may ask for a retry with :data:`RETRY_WITH_OUTPUT` /
:data:`RETRY_WITHOUT_OUTPUT`. Which tool a command runs is its :class:`Role`
(:meth:`agent.core.tools.Toolset.role`): a sentinel in the output of a command that does not run
that kind of tool (``cat NOTES.md`` of a file that holds the marker) is plain text, and stays in
the observation. :func:`classify_output` tells which. The submitted patch is never read from the
output: the loop takes the sandbox's diff once a submit tool has submitted.

mini-swe-agent's convention is recognised too: a command configured in ``tools.submit_commands``
(``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``) has the submit role when it is the command line's
first simple command, and then submits when the first line of its output is the marker.

:func:`truncate_observation` cuts a long output by the convention of ``agent.truncation``: pgs's
(the middle cut out, with a note), SWE-agent's (the head, then its ``<response clipped>`` note) or
mini-swe-agent's (a warning, then the head and the tail with the count of elided characters);
the words are ``agent.truncation_templates``' (default.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from agent.core.prompts import DEFAULT_TRUNCATION, TruncationTemplates

SUBMISSION = "<<SWE_AGENT_SUBMISSION>>"
RETRY_WITH_OUTPUT = "###SWE-AGENT-RETRY-WITH-OUTPUT###"
RETRY_WITHOUT_OUTPUT = "###SWE-AGENT-RETRY-WITHOUT-OUTPUT###"
EXIT_FORFEIT = "###SWE-AGENT-EXIT-FORFEIT###"
#: mini-swe-agent's markers: the first line of a submitting command's output (1.x and 2.x).
FIRST_LINE_SUBMISSIONS = frozenset(
    {"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT"}
)
Truncation = Literal["pgs", "swe-agent", "mini-swe-agent"]


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
    if role is Role.SUBMIT:
        first, _, rest = output.lstrip().partition("\n")
        if first.strip() in FIRST_LINE_SUBMISSIONS:
            return ToolOutput(OutputKind.SUBMISSION, rest.strip())
    if role is Role.FORFEIT and EXIT_FORFEIT in output:
        return ToolOutput(OutputKind.EXIT_FORFEIT, output.replace(EXIT_FORFEIT, "").strip())
    for sentinel, kind in (
        (RETRY_WITH_OUTPUT, OutputKind.RETRY_WITH_OUTPUT),
        (RETRY_WITHOUT_OUTPUT, OutputKind.RETRY_WITHOUT_OUTPUT),
    ):
        if sentinel in output:
            return ToolOutput(kind, output.replace(sentinel, "").strip())
    return ToolOutput(OutputKind.NORMAL, output)


def truncate_observation(
    text: str,
    limit: int,
    convention: Truncation = "pgs",
    *,
    dropped: int = 0,
    templates: TruncationTemplates = DEFAULT_TRUNCATION,
) -> str:
    """``text`` cut to about ``limit`` characters by ``convention`` (see the module doc), in the
    words of ``templates`` (a config's ``agent.truncation_templates``); ``dropped``: characters
    the sandbox already cut out of its middle."""
    if convention == "swe-agent":
        if len(text) <= limit:
            return text
        elided = len(text) - limit + dropped
        values = {"head": text[:limit], "tail": "", "limit": limit, "elided": elided}
        return templates.render(convention, {**values, "omitted": elided})
    if convention == "mini-swe-agent":
        if len(text) < limit:
            return text
        half = limit // 2
        elided = len(text) - limit + dropped
        values = {"head": text[:half], "tail": text[-half:], "limit": limit, "elided": elided}
        return templates.render(convention, {**values, "omitted": elided})
    if len(text) <= limit:  # (a sandbox's own cut, if any, says what it dropped)
        return text
    half = limit // 2
    omitted = len(text) - 2 * half + dropped
    values = {"head": text[:half], "tail": text[-half:], "limit": limit, "omitted": omitted}
    return templates.render(convention, {**values, "elided": omitted})
