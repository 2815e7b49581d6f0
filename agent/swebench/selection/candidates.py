"""The candidates of ``pgs select``: every patch submitted for an instance, identical ones merged.

A predictions file is any agent's SWE-bench predictions (a JSON object keyed by instance id, a
JSON list, or JSONL; ``instance_id``, ``model_name_or_path``, ``model_patch``). pgs's own
``--attempts`` output counts too: a ``.traj`` with ``attempts`` gives each attempt's final
patch (source ``<file>#attempt-<k>``), and a run or batch folder every ``.traj`` in it (an
attempt's own ``attempt-<k>/<id>.traj`` only when the ``<id>.traj`` beside its folder is
missing: that one already gives every attempt).

Patches are merged when they are the same bytes (the submitted text is what is graded, and
what ``preds.json`` will carry); the first one read keeps its place. Each candidate's patch is
split into its *code* part and its *test* part (the files :func:`agent.pgs.related.is_test_file`
calls tests): the test part is what the cross-execution runs against the other candidates.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import InstanceError
from agent.pgs.related import is_test_file
from agent.record.selection import Source
from agent.record.trajectory import RunRecord
from agent.swebench.predictions import load_predictions

#: The folder of one ``--attempts`` attempt (``<id>/attempt-<k>/<id>.traj``).
_ATTEMPT = re.compile(r"attempt-\d+")


@dataclass
class Candidate:
    """One distinct patch of one instance."""

    index: int
    patch: str
    sources: list[Source] = field(default_factory=list)

    @property
    def code_part(self) -> str:
        return split_patch(self.patch)[0]

    @property
    def test_part(self) -> str:
        return split_patch(self.patch)[1]


def _file_diffs(patch: str) -> list[tuple[str, str]]:
    """``(path, text)`` of each file's diff in ``patch``, in order (path: the ``b/`` side, or
    the ``a/`` side of a deletion)."""
    out: list[tuple[str, str]] = []
    lines = patch.splitlines(keepends=True)
    start = None
    for i, line in enumerate([*lines, "diff --git "]):
        if line.startswith("diff --git "):
            if start is not None:
                text = "".join(lines[start:i])
                out.append((_path_of(text), text))
            start = i
    return out


def _path_of(diff: str) -> str:
    for line in diff.splitlines():
        if line.startswith("+++ ") and line[4:].strip() != "/dev/null":
            return line[4:].strip().removeprefix("b/").split("\t")[0]
    for line in diff.splitlines():
        if line.startswith("--- ") and line[4:].strip() != "/dev/null":
            return line[4:].strip().removeprefix("a/").split("\t")[0]
    header = diff.splitlines()[0].split()
    return header[-1].removeprefix("b/") if header else ""


def split_patch(patch: str) -> tuple[str, str]:
    """``(code part, test part)`` of a unified diff: the file diffs of test files go to the
    second. A patch without ``diff --git`` headers stays whole in the code part."""
    diffs = _file_diffs(patch)
    if not diffs:
        return patch, ""
    code = "".join(text for path, text in diffs if not is_test_file(path))
    tests = "".join(text for path, text in diffs if is_test_file(path))
    return code, tests


def changed_paths(patch: str) -> list[str]:
    return [path for path, _ in _file_diffs(patch)]


def only_files(patch: str, paths: Collection[str]) -> str:
    """The file diffs of ``patch`` whose path is one of ``paths``, in order."""
    return "".join(text for path, text in _file_diffs(patch) if path in paths)


def _from_traj(path: Path, into: dict[str, dict[str, list[Source]]]) -> None:
    try:
        record = RunRecord.read(path)
    except (OSError, ValueError) as e:
        raise InstanceError(f"cannot read the pgs run {path}: {e}") from None
    iid = path.name.removesuffix(".traj")
    attempts = record.attempts
    if attempts is not None and attempts.candidates:
        for c in attempts.candidates:
            if c.patch.strip():
                source = Source(file=f"{path}#attempt-{c.attempt}", model="pgs")
                into.setdefault(iid, {}).setdefault(c.patch, []).append(source)
        return
    patch = record.info.submission or ""
    if patch.strip():
        into.setdefault(iid, {}).setdefault(patch, []).append(Source(file=str(path), model="pgs"))


def read_candidates(files: list[Path]) -> dict[str, list[Candidate]]:
    """{instance id: its distinct candidates}, from every predictions file, ``.traj`` or pgs
    run folder in ``files``; empty patches are no candidates. A file given twice (or a
    ``.traj`` given and in a folder given) is read once: a submission is not two."""
    found: dict[str, dict[str, list[Source]]] = {}
    read: set[Path] = set()

    def first_time(path: Path) -> bool:
        resolved = path.resolve()
        if resolved in read:
            return False
        read.add(resolved)
        return True

    for path in files:
        path = Path(path)
        if path.is_dir():
            trajs = sorted(path.glob("**/*.traj"))
            if not trajs:
                raise InstanceError(
                    f"{path} is a folder without pgs runs (.traj files); give predictions files"
                )
            for traj in trajs:
                if (
                    _ATTEMPT.fullmatch(traj.parent.name)
                    and (traj.parent.parent / traj.name).is_file()
                ):
                    continue  # an --attempts attempt's own run: the attempts record beside has it
                if first_time(traj):
                    _from_traj(traj, found)
            continue
        if path.suffix == ".traj":
            if first_time(path):
                _from_traj(path, found)
            continue
        if not path.is_file():
            raise InstanceError(f"no predictions file {path}")
        if not first_time(path):
            continue
        for iid, prediction in load_predictions(path).items():
            patch = prediction.get("model_patch")
            if not isinstance(patch, str) or not patch.strip():
                continue
            model = str(prediction.get("model_name_or_path") or "")
            found.setdefault(iid, {}).setdefault(patch, []).append(
                Source(file=str(path), model=model)
            )
    return {
        iid: [Candidate(i, patch, sources) for i, (patch, sources) in enumerate(by.items(), 1)]
        for iid, by in found.items()
    }


def candidates_hash(candidates: list[Candidate]) -> str:
    """What identifies one instance's input: its distinct patches, in order."""
    digest = hashlib.sha256()
    for c in candidates:
        digest.update(hashlib.sha256(c.patch.encode()).digest())
    return digest.hexdigest()[:16]


def write_predictions_files(by_run: dict[str, dict[str, str]], folder: Path) -> list[Path]:
    """One SWE-bench predictions file per run ({run: {instance id: patch}}) in ``folder``:
    how ``bench/selection.py`` and the tests hand real submissions to ``pgs select``."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for run, patches in sorted(by_run.items()):
        name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run)[:80]
        path = folder / f"{name}.json"
        preds = {
            iid: {"instance_id": iid, "model_name_or_path": run, "model_patch": patch}
            for iid, patch in patches.items()
        }
        path.write_text(json.dumps(preds, indent=1), encoding="utf-8")
        out.append(path)
    return out


__all__ = [
    "Candidate",
    "candidates_hash",
    "changed_paths",
    "only_files",
    "read_candidates",
    "split_patch",
    "write_predictions_files",
]
