"""`HumanModel`: replies typed on stdin, for debugging a loop without a model (`--model human`)."""

from __future__ import annotations

import re
import sys
from typing import IO, Any

from agent.errors import ModelError
from agent.models.base import GlobalStats, ModelConfig, ModelResponse, ModelStats, ToolCall

__all__ = ["HumanModel"]

_TOOL_LINE = re.compile(r"^/tool\s+(\S+)\s*(.*)$")


class HumanModel:
    """Replies typed on stdin, for debugging a loop without a model.

    Type a thought (any lines) then either a fenced block (``` ... ```), which ends the reply,
    or a line `/tool NAME {json arguments}`, which ends the reply as one tool call.
    `global_stats` is accepted for the registry's `Class(config, global_stats)` and unused:
    typed replies cost nothing.
    """

    def __init__(
        self,
        config: ModelConfig | None = None,
        global_stats: GlobalStats | None = None,
        *,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ) -> None:
        self.config = config
        self.stats = ModelStats()
        self._in = stdin if stdin is not None else sys.stdin
        self._out = stdout if stdout is not None else sys.stdout

    def query(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> ModelResponse:
        if messages:
            last = messages[-1]
            print(f"--- {last.get('role', '?')} ---\n{last.get('content') or ''}", file=self._out)
        print("--- your reply (thought, then ```block``` or /tool NAME {json}) ---", file=self._out)
        response = self._read_reply()
        self.stats.api_calls += 1
        return response

    def _read_reply(self) -> ModelResponse:
        lines: list[str] = []
        in_block = False
        while True:
            line = self._in.readline()
            if not line:
                raise ModelError("stdin closed before a complete reply: type a reply or stop")
            text = line.rstrip("\n")
            match = None if in_block else _TOOL_LINE.match(text)
            if match:
                call = ToolCall.parse(f"call_human_{self.stats.api_calls}", *match.groups())
                if call.error:
                    print(f"{call.error}; type the /tool line again", file=self._out)
                    continue
                return ModelResponse(content="\n".join(lines), tool_calls=[call])
            lines.append(text)
            if text.lstrip().startswith("```"):
                if in_block:
                    return ModelResponse(content="\n".join(lines))
                in_block = True
