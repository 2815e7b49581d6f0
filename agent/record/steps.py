"""The parts of a run record that every conversation has: its steps and how it ended.

The Generator's run (:class:`agent.record.trajectory.RunRecord`) and each Tester conversation
(:class:`agent.record.pgs.TesterConversation`) are written with these.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agent.record.base import Record

#: A number as the file holds it: an int stays an int (``3600``, not ``3600.0``), so a file
#: rewrites byte for byte.
Number = int | float


class Usage(Record):
    """One model call's tokens and cost (a step's ``usage``)."""

    tokens_sent: int = 0
    tokens_received: int = 0
    cost: Number = 0.0


class ModelStats(Record):
    """A model's usage over a run (``info.model_stats``); models keep one and count into it."""

    instance_cost: Number = 0.0
    tokens_sent: int = 0
    tokens_received: int = 0
    api_calls: int = 0
    #: Where the price came from ("config", "table", "litellm"); "unpriced" when no price is
    #: known and no cost limit is on (the cost then counts 0); None for models that bill
    #: nothing (human, replay unless priced).
    price_source: str | None = None
    #: The price used, (input, output) USD per 1M tokens.
    price: tuple[Number, Number] | None = None


class Step(Record):
    """One step of the Generator: its reply, the command it ran and what came back."""

    action: str = Field("", description="the command run, as typed")
    observation: str = Field("", description="what the command printed (truncated as sent)")
    response: str = Field("", description="the model's whole reply")
    thought: str = Field("", description="the reply's reasoning part")
    execution_time: Number | None = Field(None, description="seconds the step took")
    state: dict[str, Any] = Field(
        default_factory=dict, description="the tools' state after the step (working_dir, ...)"
    )
    query: list[dict[str, Any]] = Field(
        default_factory=list, description="the messages the model was sent for this step"
    )
    tool: str | None = Field(None, description="the tool called (function calling)")
    exit_code: int | None = Field(None, description="the command's exit code")
    usage: Usage | None = Field(None, description="this step's model call")


class Limits(Record):
    """The Generator's limits in force."""

    steps: int | None = None
    seconds: Number | None = None


class Info(Record):
    """How the run ended: ``info``."""

    omitted_when_empty = (
        "instance_id",
        "base_commit",
        "sandbox_base_commit",
        "limits",
        "limit_message",
        "error",
        "patch_redacted",
        "model_stats",
        "steps",
        "duration",
        "infrastructure",
        "mistake",
    )
    submission: str | None = Field(None, description="the final patch")
    exit_status: str | None = Field(None, description="submitted, exit_error, ...")
    instance_id: str | None = None
    base_commit: str | None = Field(None, description="the repository's commit the run began at")
    sandbox_base_commit: str | None = None
    limits: Limits | None = None
    limit_message: str | None = Field(None, description="the limit that ended the run, in words")
    error: str | None = Field(None, description="the error that ended the run")
    patch_redacted: list[str] | None = Field(
        None, description="names of secrets found in the patch and redacted"
    )
    model_stats: ModelStats | None = None
    steps: int | None = Field(None, description="steps the Generator took")
    duration: Number | None = Field(None, description="seconds the run took")
    infrastructure: bool | None = Field(
        None, description="pgs batch: an infrastructure error ended it (a resume runs it again)"
    )
    mistake: bool | None = Field(
        None, description="pgs batch: a mistake in the command ended it (a resume runs it again)"
    )
