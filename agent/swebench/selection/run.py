"""``pgs select``'s driver: every instance's candidates checked and one chosen, resumably.

Per instance, in its image (built or reused, as ``pgs eval`` does): a container at the base
commit holds the original code and its seal is taken (:mod:`envs.seal`); the evidence of
every candidate comes from :class:`~agent.swebench.selection.evidence.InstanceCheck`, the choice
from :func:`~agent.swebench.selection.rank.choose`. With a model (``--model``), the Tester
writes the instance's properties once, after the original code's side is done, and every
candidate is checked by them too (:mod:`agent.swebench.selection.properties`).

What it writes in the output folder, each file atomically, after every instance:

- ``instances/<id>.json``: that instance's :class:`~agent.record.selection.InstanceSelection`;
  a rerun into the same folder reuses its checks when its candidates are the same patches
  (``candidates_hash``), neither it nor the check of one of its candidates has an error, and
  its properties are the same model's (none without ``--model``; a Tester that failed is
  asked again); it is ranked again with this run's sources (a patch submitted more often
  counts more);
- ``instances/<id>.tester.json``: with ``--model``, the Tester's run record (its
  conversations, the validation);
- ``selection.json``: every instance's (:class:`~agent.record.selection.SelectionRecord`);
- ``preds.json``: the chosen patch of every instance, byte for byte as submitted, under
  ``model_name_or_path`` ``pgs-select`` (``pgs eval`` grades it as any predictions file).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from agent.core.trajectory_file import write_atomic
from agent.pgs.runner import CheckSettings
from agent.record.selection import InstanceSelection, SelectCandidate, SelectionRecord
from agent.run.config import RunConfig
from agent.run.reviewer import tester_model_config
from agent.swebench import TESTBED, Environments, Instance
from agent.swebench.selection.candidates import Candidate, candidates_hash
from agent.swebench.selection.evidence import InstanceCheck
from agent.swebench.selection.properties import IssueProperties
from agent.swebench.selection.rank import choose
from envs.docker_util import remove_own_containers

MODEL_NAME = "pgs-select"


@dataclass
class SelectResult:
    """What a selection run did."""

    record: SelectionRecord
    reused: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)


def select_instance(
    instance: Instance,
    candidates: list[Candidate],
    envs: Environments,
    settings: CheckSettings,
    *,
    on_candidate: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
    model: RunConfig | None = None,
    tester_record: Path | None = None,
) -> InstanceSelection:
    """Check every candidate of one instance and choose; a failure of the instance's image or
    container is the selection's ``error`` (its candidates unranked), never an exception.
    ``model``: the Tester's configuration (``--model``), its run record into
    ``tester_record``."""
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig

    selection = InstanceSelection(
        instance_id=instance.instance_id,
        candidates=[
            SelectCandidate(index=c.index, patch=c.patch, sources=c.sources) for c in candidates
        ],
        candidates_hash=candidates_hash(candidates),
    )
    started = time.monotonic()
    try:
        image = envs.image(instance)
        selection.seconds["image"] = round(time.monotonic() - started, 1)
        config = DockerSandboxConfig(image=image.tag, repo_path=TESTBED, network=False)
        with DockerSandbox(config, run_id=envs.run_id) as box:
            base = box.run("git rev-parse HEAD").output.strip().splitlines()[-1]
            seal = box.seal(base)
            check = InstanceCheck(box, seal, base, instance.problem_statement, candidates, settings)
            began = time.monotonic()
            check.prepare()
            selection.seconds["base"] = round(time.monotonic() - began, 1)
            selection.probes, selection.added_tests = check.probes, check.added
            selection.related = check.related
            if model is not None:
                if on_candidate is not None:
                    on_candidate("the Tester is writing properties")
                began = time.monotonic()
                record = tester_record or Path(tempfile.mkdtemp(prefix="pgs-select-")) / (
                    f"{instance.instance_id}.tester.json"
                )
                written = IssueProperties(
                    model, box, seal, base, instance.problem_statement, tester_record=record
                )
                selection.properties = written.write()
                selection.seconds["properties"] = round(time.monotonic() - began, 1)
                check.properties = written
            began = time.monotonic()

            def progress(c: Candidate, _: object) -> None:
                if on_candidate is not None:
                    on_candidate(f"candidate {c.index}/{len(candidates)} checked")

            found = check.check_all(progress, stop)
            selection.seconds["candidates"] = round(time.monotonic() - began, 1)
    except Exception as e:  # the instance's problem, reported in its selection
        selection.error = f"{type(e).__name__}: {str(e)[:500]}"
        return selection
    for c in selection.candidates:
        c.evidence = found[c.index]
    return choose(selection)


def _reusable(
    path: Path, candidates: list[Candidate], model: str | None = None
) -> InstanceSelection | None:
    """The earlier selection at ``path`` when its checks hold for ``candidates`` (the same
    patches, no error, the same Tester model), with this run's sources and ranked again (the
    evidence is about the patches; how many times each was submitted is a key of the order)."""
    try:
        earlier = InstanceSelection.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    if earlier.candidates_hash != candidates_hash(candidates) or earlier.error:
        return None
    written = earlier.properties
    if (written.model if written else None) != model:
        return None
    if written is not None and (written.error or written.tester_error):
        return None
    if any(c.evidence.error for c in earlier.candidates):  # evidence missing: check again
        return None
    sources = {c.patch: c.sources for c in candidates}
    for c in earlier.candidates:
        c.sources = list(sources.get(c.patch, c.sources))
    return choose(earlier)


def write_outputs(output_dir: Path, record: SelectionRecord) -> None:
    """``selection.json`` and ``preds.json`` as they stand now."""
    write_atomic(output_dir / "selection.json", record.model_dump_json(indent=1))
    preds = {}
    for iid, selection in sorted(record.instances.items()):
        chosen = next((c for c in selection.candidates if c.index == selection.chosen), None)
        if chosen is not None:
            preds[iid] = {
                "instance_id": iid,
                "model_name_or_path": record.model_name_or_path,
                "model_patch": chosen.patch,
            }
    write_atomic(output_dir / "preds.json", json.dumps(preds, indent=1))


def select_all(
    instances: list[Instance],
    candidates: dict[str, list[Candidate]],
    envs: Environments,
    settings: CheckSettings,
    output_dir: Path,
    *,
    predictions: list[str],
    workers: int = 1,
    on_done: Callable[[InstanceSelection, bool], None] | None = None,
    on_status: Callable[[str, str], None] | None = None,
    model: RunConfig | None = None,
) -> SelectResult:
    """Select for every instance that has candidates; resumes from ``output_dir``.
    ``model``: the Tester's configuration (``--model``); None: no properties."""
    folder = output_dir / "instances"
    folder.mkdir(parents=True, exist_ok=True)
    record = SelectionRecord(model_name_or_path=MODEL_NAME, predictions=predictions)
    result = SelectResult(record=record)
    lock = threading.Lock()
    stop = threading.Event()  # set when the main thread is interrupted: the workers end too
    todo = []
    for instance in instances:
        mine = candidates.get(instance.instance_id) or []
        if not mine:
            continue
        path = folder / f"{instance.instance_id}.json"
        earlier = _reusable(
            path, mine, tester_model_config(model).name if model is not None else None
        )
        if earlier is not None:
            text = earlier.model_dump_json(indent=1)
            if text != path.read_text(encoding="utf-8"):  # other sources of the same patches
                write_atomic(path, text)
            record.instances[instance.instance_id] = earlier
            result.reused.append(instance.instance_id)
            if on_done is not None:
                on_done(earlier, True)
        else:
            todo.append(instance)
    write_outputs(output_dir, record)

    def one(instance: Instance) -> InstanceSelection:
        def status(text: str) -> None:
            if on_status is not None:
                on_status(instance.instance_id, text)

        if stop.is_set():
            raise KeyboardInterrupt
        status("building or reusing its image")
        return select_instance(
            instance,
            candidates[instance.instance_id],
            envs,
            settings,
            on_candidate=status,
            stop=stop,
            model=model,
            tester_record=folder / f"{instance.instance_id}.tester.json",
        )

    def land(selection: InstanceSelection) -> None:
        iid = selection.instance_id
        with lock:
            write_atomic(folder / f"{iid}.json", selection.model_dump_json(indent=1))
            record.instances[iid] = selection
            record.instances = dict(sorted(record.instances.items()))
            write_outputs(output_dir, record)
            result.checked.append(iid)
        if on_done is not None:
            on_done(selection, False)

    if workers <= 1:  # in this thread: Ctrl-C unwinds it and closes the containers
        for instance in todo:
            land(one(instance))
        return result
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(one, instance) for instance in todo]
        for future in as_completed(futures):
            land(future.result())
    except BaseException as e:
        stop.set()
        if isinstance(e, KeyboardInterrupt):  # Ctrl-C, SIGTERM, SIGHUP: stop now, as one
            remove_own_containers()  # worker does: the running checks end at once
        raise
    finally:  # interrupted: nothing new starts; what runs ends with its containers
        pool.shutdown(wait=True, cancel_futures=True)
    return result
