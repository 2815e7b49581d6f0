"""What a recorded run did with each model reply: :func:`recorded_replies`.

A recording is a SWE-agent ``.traj`` (0.x or 1.x), a mini-swe-agent trajectory (1.x
``mini-swe-agent-1``, 2.x ``mini-swe-agent-1.1``) or a pgs ``.traj``; its replies are the ones the
replay model answers with (:func:`agent.record.foreign.trajectory_replies`, same order; that
module is the one reader of the writers' formats, the command mini-swe-agent ran included).
For each reply, :class:`RecordedReply` says whether the agent ran it (or refused it as malformed),
the command it ran, its exit code and its output where the writer recorded them, and whether it
submitted:

- mini-swe-agent: the message after a reply is its observation (``<returncode>N</returncode>``
  and the output, or 2.x's ``extra.returncode``/``extra.raw_output``), a format error
  (``interrupt_type: FormatError``, or 1.x's "Please always provide EXACTLY ONE action"), a
  timeout, or the end of the run (the submission, whose command output is not recorded);
- SWE-agent: a reply in the history is one the agent ran (its parser's retries are not kept);
  its command is the message's ``action``, its output the matching ``trajectory`` step's; steps
  after the history's last reply (a 1.x run that saved its history before its submission) are
  read from ``trajectory``;
- pgs: the reply's ``action``, and the steps' ``observation`` and ``exit_code``; a reply followed
  by a ``format_error`` message was refused.

Anything else raises ValueError (the replay model refuses the file the same way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent.record.foreign import (
    info_of,
    message_text,
    mini_command,
    trajectory_kind,
    trajectory_replies,
)

_RETURNCODE = re.compile(r"\A<returncode>(-?\d+)</returncode>\n?")
_WRAPPED = re.compile(r"\A<output>\n(.*)</output>\Z", re.S)
_MINI_FORMAT_ERROR = ("Please always provide EXACTLY ONE action", "Please always provide")
_MINI_TIMEOUT = "The last command <command>"


@dataclass
class RecordedReply:
    """One model reply and what the recorded agent did with it."""

    #: Where the reply is in the file (``messages[4]``, ``history[7]``).
    where: str
    content: str
    #: False: refused as malformed (a format error).
    ran: bool
    command: str | None = None
    exit_code: int | None = None
    #: The command's output as the model saw it (after the writer's truncation), if recorded.
    output: str | None = None
    submitted: bool = False
    timed_out: bool = False


def recorded_replies(traj: dict[str, Any]) -> list[RecordedReply]:
    """Each reply of ``traj`` and what its agent did with it (see the module doc)."""
    kind = trajectory_kind(traj)
    if kind == "mini-swe-agent":
        return _mini(traj)
    if kind == "pgs":
        return _pgs(traj)
    return _swe_agent(traj)


def submission(traj: dict[str, Any]) -> str | None:
    """The recorded final patch (``info.submission``), None when the file has none."""
    info = info_of(traj)
    return info.submission if info is not None else None


def _exit_status(traj: dict[str, Any]) -> str:
    info = info_of(traj)
    return (info.exit_status if info is not None else None) or ""


def _index(where: str) -> int:
    return int(where[where.index("[") + 1 : -1])


def _mini(traj: dict[str, Any]) -> list[RecordedReply]:
    messages: list[Any] = traj["messages"]
    submitted_run = _exit_status(traj) == "Submitted"
    replies = trajectory_replies(traj)
    out = []
    for n, (where, step) in enumerate(replies):
        i = _index(where)
        content = str(step.get("content") or "")
        reply = RecordedReply(where, content, ran=False)
        following = messages[i + 1] if i + 1 < len(messages) else None
        command = mini_command(messages[i])
        extra = following.get("extra") if isinstance(following, dict) else None
        extra = extra if isinstance(extra, dict) else {}
        text = message_text(following.get("content") if isinstance(following, dict) else None)
        if isinstance(following, dict) and not text and "output" in following:
            text = message_text(following["output"]) or str(following["output"])
        returncode = _RETURNCODE.match(text)
        if following is None:
            pass  # the run stopped before the agent answered
        elif extra.get("interrupt_type") == "FormatError" or text.startswith(_MINI_FORMAT_ERROR):
            pass
        elif "returncode" in extra or returncode:
            reply.ran, reply.command = True, command
            code = extra.get("returncode") if "returncode" in extra else returncode.group(1)  # type: ignore[union-attr]
            reply.exit_code = int(code) if code is not None else None
            reply.output = _mini_output(text)
        elif text.startswith(_MINI_TIMEOUT):
            reply.ran, reply.command, reply.timed_out = True, command, True
        elif n + 1 == len(replies) and submitted_run:  # its output is not kept: the patch is
            reply.ran, reply.command, reply.submitted = True, command, True
        out.append(reply)
    return out


def _mini_output(text: str) -> str:
    """The output inside mini-swe-agent's observation template (returncode line removed)."""
    body = _RETURNCODE.sub("", text, count=1)
    wrapped = _WRAPPED.match(body)
    return wrapped.group(1) if wrapped else body


def _swe_agent(traj: dict[str, Any]) -> list[RecordedReply]:
    history: list[Any] = traj["history"]
    found = traj.get("trajectory")
    steps: list[Any] = found if isinstance(found, list) else []
    status = _exit_status(traj)
    out = []
    for n, (where, step) in enumerate(trajectory_replies(traj)):
        raw = steps[n] if n < len(steps) and isinstance(steps[n], dict) else {}
        message = history[_index(where)] if where.startswith("history") else raw
        action = message.get("action", raw.get("action"))
        reply = RecordedReply(where, str(step.get("content") or ""), ran=True)
        reply.command = str(action).strip() if action is not None else None
        if isinstance(raw.get("observation"), str):
            reply.output = raw["observation"]
        out.append(reply)
    if out and "submitted" in status:
        last = out[-1]
        last.submitted = bool(last.command and last.command.split()[:1] == ["submit"])
    return out


def _pgs(traj: dict[str, Any]) -> list[RecordedReply]:
    history: list[Any] = traj["history"]
    steps = [s for s in traj.get("trajectory") or [] if isinstance(s, dict)]
    status = _exit_status(traj)
    out = []
    taken = 0
    replies = trajectory_replies(traj, "main")
    for n, (where, step) in enumerate(replies):
        i = _index(where)
        message = history[i]
        following = history[i + 1] if i + 1 < len(history) else None
        reply = RecordedReply(where, str(step.get("content") or ""), ran=False)
        refused = isinstance(following, dict) and following.get("message_type") == "format_error"
        action = str(message.get("action") or "")
        if action and not refused:
            count = max(1, len(step.get("tool_calls") or []))
            mine = steps[taken : taken + count]
            taken += count
            reply.ran, reply.command = True, action.strip()
            if mine:
                reply.exit_code = mine[-1].get("exit_code")
                reply.output = mine[-1].get("observation")
        elif n + 1 == len(replies) and not refused and following is None:
            reply.ran = bool(action)
        out.append(reply)
    if out and status == "submitted":
        out[-1].submitted = True
    return out
