"""What ``pgs batch`` shows while it runs: one line of totals, one row per running instance.

:class:`Progress` is updated from the worker threads under its lock; each instance's run feeds
its row through a run hook (:class:`SlotHook`, :mod:`agent.run.hooks`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from agent.core.loop import Agent
from agent.models import GlobalStats
from agent.run.hooks import RunHook


@dataclass
class Progress:
    """What the live display shows; updated from the worker threads under ``lock``."""

    total: int
    workers: int
    stats: GlobalStats
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    failed: int = 0
    durations: list[float] = field(default_factory=list)
    slots: dict[int, tuple[str, str]] = field(default_factory=dict)
    statuses: Counter[str] = field(default_factory=Counter)

    def eta(self) -> str:
        left = self.total - self.done
        if not self.durations or left <= 0:
            return "-"
        mean = sum(self.durations) / len(self.durations)
        seconds = mean * left / max(1, min(self.workers, left))
        return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"

    def render(self) -> Group:
        with self.lock:
            head = Text(
                f"{self.done}/{self.total} done | {len(self.slots)} running | "
                f"{self.failed} failed | ${self.stats.total_cost:.2f} spent | "
                f"ETA {self.eta()} | {time.monotonic() - self.started:.0f}s"
            )
            table = Table(show_header=False, box=None, pad_edge=False)
            for slot, (iid, text) in sorted(self.slots.items()):
                table.add_row(f"[{slot + 1}]", iid, text[:90])
        return Group(head, table)


class SlotHook(RunHook):
    """One instance's row of the table: what its run does now, then each step's action."""

    def __init__(self, progress: Progress, slot: int, instance_id: str) -> None:
        self.progress = progress
        self.slot = slot
        self.instance_id = instance_id

    def on_status(self, text: str) -> None:
        with self.progress.lock:
            self.progress.slots[self.slot] = (self.instance_id, text)

    def on_step(self, agent: Agent, step: dict[str, Any]) -> None:
        action = agent.traj.redactor.redact(step.get("action") or "")
        action = action.splitlines()[0][:70] if action else ""
        self.on_status(f"step {agent.steps} | {action}")
