"""``pgs select`` on real patches of real agents for a real Verified instance, held to their
official labels. Opt-in, because CI cannot fetch the repositories:

    # fetch github:pytest-dev/pytest (and the others of candidates-dev.jsonl) with the search
    # tool's fetch, then
    ../shared/swebench/prepare.sh /work/.mirror /work/data ../shared/swebench/candidates-dev.jsonl
    PGS_SELECT_REPOS=/work/data/repos .venv/bin/python -m pytest tests/swebench/test_select_real.py

PGS_SELECT_DATA names the folder of ``candidates-dev.json`` and ``candidates-dev.jsonl``
(default ``../shared/swebench``); PGS_SELECT_INSTANCE another instance of it (default
pytest-dev__pytest-10051: 11 distinct officially labelled patches, about 3 minutes once its
image is built). The labels are read by the test only, after the selection, to judge it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main

REPOS = os.environ.get("PGS_SELECT_REPOS")
DATA = Path(
    os.environ.get("PGS_SELECT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "swebench"
)
INSTANCE = os.environ.get("PGS_SELECT_INSTANCE", "pytest-dev__pytest-10051")
OFFICIAL = (
    "leaderboard results.json (official)",
    "official report.json",
    "official harness summary",
)
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not REPOS,
        reason="set PGS_SELECT_REPOS to a --repos-dir holding the repositories of "
        "candidates-dev.jsonl (see this module's docstring) to run pgs select on real patches",
    ),
]


@pytest.fixture(scope="module")
def selected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One submission per predictions file, as the public runs submitted them, and the
    selection of ``pgs select`` over them all."""
    root = tmp_path_factory.mktemp("select-real")
    entries = json.loads((DATA / "candidates-dev.json").read_text())[INSTANCE]
    entries = [e for e in entries if e["label"] in OFFICIAL]
    files = []
    for n, entry in enumerate(entries):
        path = root / f"run-{n}.jsonl"
        prediction = {
            "instance_id": INSTANCE,
            "model_name_or_path": entry["run"],
            "model_patch": entry["model_patch"],
        }
        path.write_text(json.dumps(prediction) + "\n")
        files.append(str(path))
    records = root / "records.jsonl"
    records.write_text(
        "".join(
            line + "\n"
            for line in (DATA / "candidates-dev.jsonl").read_text().splitlines()
            if json.loads(line)["instance_id"] == INSTANCE
        )
    )
    out = root / "out"
    argv = ["select", "--predictions", *files, "--instances", str(records)]
    code = main([*argv, "--repos-dir", str(REPOS), "--output-dir", str(out)])
    assert code == 0
    labels: dict[str, list[bool]] = {}
    for e in entries:
        labels.setdefault(e["model_patch"], []).append(bool(e["resolved"]))
    return {
        "selection": json.loads((out / "selection.json").read_text())["instances"][INSTANCE],
        "preds": json.loads((out / "preds.json").read_text()),
        "labels": labels,
        "submitted": len(entries),
    }


def test_every_real_patch_is_checked_and_identical_ones_are_merged(
    selected: dict[str, Any],
) -> None:
    selection = selected["selection"]
    assert selection["error"] is None
    assert len(selection["candidates"]) == len(selected["labels"])
    assert sum(len(c["sources"]) for c in selection["candidates"]) == selected["submitted"]
    for c in selection["candidates"]:
        assert c["evidence"]["error"] is None, c["evidence"]["error"]
        assert c["evidence"]["applies"]
    assert sorted(c["rank"] for c in selection["candidates"]) == list(
        range(1, len(selection["candidates"]) + 1)
    )


def test_the_issue_code_separates_the_resolved_patches_from_the_original(
    selected: dict[str, Any],
) -> None:
    """The issue's own code behaves otherwise than on the original code on every patch the
    official harness resolved."""
    selection = selected["selection"]
    assert selection["probes"], "the issue shows code: at least one probe"
    for c in selection["candidates"]:
        if all(selected["labels"][c["patch"]]):
            assert c["evidence"]["probes_changed"] >= 1, c["index"]


def test_the_chosen_patch_is_submitted_byte_for_byte_and_resolves(
    selected: dict[str, Any],
) -> None:
    selection = selected["selection"]
    chosen = next(c for c in selection["candidates"] if c["index"] == selection["chosen"])
    assert selected["preds"][INSTANCE]["model_patch"] == chosen["patch"]
    assert selected["preds"][INSTANCE]["model_name_or_path"] == "pgs-select"
    assert selection["reason"].startswith(f"candidate {chosen['index']}")
    assert all(selected["labels"][chosen["patch"]])
