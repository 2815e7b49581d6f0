"""A stop signal that reaches ``pgs batch`` in the middle of its own bookkeeping (an instance
being landed: its files, its status, its claim, its line) is taken between two steps of the
batch's loop, as one sent while it waits: no new instance starts, the one landing is landed
whole, and the batch returns with what it finished, instead of ending outright with half an
instance recorded.

In process, under the CLI's own handlers (:func:`agent.cli.signals.stop_signals`), with an
executor that runs nothing (its jobs end as soon as they are waited for, as a cluster's would
return them): the signal is sent by the batch's own terminal while it prints the first
instance's line, so it lands at a known place whatever the machine's speed."""

from __future__ import annotations

import io
import json
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from agent.cli.signals import stop_signals
from agent.core.locks import claim
from agent.run.config import load_config
from agent.run.outputs import output_paths
from agent.swebench import Environments, Instance
from agent.swebench.executors import Done
from agent.swebench.instance_run import EXIT_STATUSES, Finished
from agent.swebench.resume import finished_status
from agent.swebench.scheduler import Batch

IDS = ["acme__lib-1", "acme__lib-2", "acme__lib-3"]


class Returning:
    """An executor whose jobs run elsewhere and come back finished at the next wait."""

    shares_files = False

    def __init__(self) -> None:
        self.workers = 1
        self.submitted: list[str] = []
        self._running: list[str] = []

    def submit(self, key: str, fn: Callable[..., Any], *args: Any) -> None:
        self.submitted.append(key)
        self._running.append(key)

    def in_flight(self) -> int:
        return len(self._running)

    def wait(self, timeout: float) -> list[Done]:
        done = [Done(key, finished(key)) for key in self._running]
        self._running = []
        return done

    def abandon(self) -> None:
        self._running = []

    def close(self) -> None:
        pass


def finished(iid: str) -> Finished:
    traj = json.dumps({"info": {"exit_status": "submitted"}})
    pred = {"instance_id": iid, "model_name_or_path": "m", "model_patch": "diff\n"}
    return Finished(
        instance_id=iid,
        exit_status="submitted",
        files={f"{iid}.traj": traj, f"{iid}.pred": json.dumps(pred)},
        pred=pred,
        cost=0.0,
        api_calls=1,
        seconds=1.0,
        worker="node:1",
    )


def make_batch(folder: Path) -> Batch:
    """A batch of :data:`IDS` into ``folder``, one at a time."""
    instances = [
        Instance.from_record({"instance_id": i, "repo": "acme/lib", "base_commit": "a"})
        for i in IDS
    ]
    config = load_config(None, {"model": {"name": "m"}})
    return Batch(instances, config, folder, Environments(folder, {}))


class SignallingTerminal(io.StringIO):
    """A terminal that sends ``sig`` to this process as the line naming ``iid`` is written."""

    def __init__(self, sig: signal.Signals, iid: str) -> None:
        super().__init__()
        self.sig = sig
        self.iid = iid
        self.sent = False

    def write(self, text: str) -> int:
        written = super().write(text)
        if not self.sent and f"{self.iid}: submitted" in text:
            self.sent = True
            os.kill(os.getpid(), self.sig)
        return written


def run_batch(
    batch: Batch, console: Console, executor: Returning, received: list[signal.Signals]
) -> Counter[str]:
    """``batch.run`` under the CLI's handlers; its exit statuses."""
    with stop_signals(received):
        try:
            statuses, _ = batch.run(console, executor)
        except KeyboardInterrupt:
            pytest.fail("the signal ended the batch outright, in the middle of landing")
    return statuses


# (SIGHUP, the same path, would also send this process's terminal to /dev/null.)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_an_instance_lands_lands_it_whole_and_starts_no_other(
    tmp_path: Path, sig: signal.Signals
) -> None:
    batch = make_batch(tmp_path)
    terminal = SignallingTerminal(sig, IDS[0])
    console = Console(file=terminal, force_terminal=False, width=200)
    executor = Returning()
    received: list[signal.Signals] = []
    statuses = run_batch(batch, console, executor, received)
    assert terminal.sent and received == [sig]
    shown = terminal.getvalue()
    assert "interrupted: no new instance starts" in shown, shown
    assert batch.stop.is_set()  # the command then says "interrupted" and exits 130
    # The landing instance: landed whole (its status recorded, its claim released).
    assert executor.submitted == [IDS[0]]
    assert statuses == {"submitted": 1, "not started": 2}
    saved = yaml.safe_load((tmp_path / EXIT_STATUSES).read_text())
    assert saved["instances_by_exit_status"] == {"submitted": [IDS[0]]}
    assert json.loads(batch.preds_path.read_text())[IDS[0]]["model_patch"] == "diff\n"
    assert finished_status(output_paths(tmp_path, IDS[0]).traj) == "submitted"
    with claim(tmp_path, IDS[0]):  # Claimed if the batch still held it
        pass
    # The others: untouched, so a resume runs them.
    for iid in IDS[1:]:
        assert finished_status(output_paths(tmp_path, iid).traj) is None


def test_a_signal_as_the_last_instance_lands_still_stops_the_batch(tmp_path: Path) -> None:
    """Nothing is left to start, but the signal is not lost: the command says it was
    interrupted (exit code 130), and every instance is landed."""
    batch = make_batch(tmp_path)
    terminal = SignallingTerminal(signal.SIGINT, IDS[-1])
    received: list[signal.Signals] = []
    statuses = run_batch(batch, Console(file=terminal, width=200), Returning(), received)
    assert terminal.sent and received == [signal.SIGINT]
    assert batch.stop.is_set()
    assert statuses == {"submitted": 3}
    saved = yaml.safe_load((tmp_path / EXIT_STATUSES).read_text())
    assert saved["instances_by_exit_status"] == {"submitted": IDS}
