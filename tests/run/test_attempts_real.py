"""``--attempts 3`` on a real SWE-bench Verified record (psf__requests-6028: a proxy URL loses
its ``user:pass@``): the gold patch among two wrong candidates, through ``pgs batch``, its
instance image and the scripted model. Opt-in, because CI cannot fetch the repository:

    PGS_SWEBENCH_REPOS=/work/data/repos .venv/bin/python -m pytest tests/run/test_attempts_real.py

(``PGS_SWEBENCH_REPOS`` holds ``psf__requests``; see tests/swebench/test_swebench_real.py.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.record.attempts import AttemptsRecord

REPOS = os.environ.get("PGS_SWEBENCH_REPOS")
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        not REPOS,
        reason="set PGS_SWEBENCH_REPOS to a folder holding a psf__requests clone (see "
        "tests/swebench/test_swebench_real.py) to run --attempts on a real record",
    ),
]
IID = "psf__requests-6028"
RECORDS = Path(__file__).resolve().parents[1] / "data" / "verified-dev.jsonl"
UTILS = "/testbed/requests/utils.py"
ANCHOR = "    if scheme is None:\n        scheme = new_scheme\n"
#: Right for the issue's example only: the property's other users and passwords fail.
OVERFIT = "    if auth == 'user:pass':\n        netloc = 'user:pass@' + netloc\n" + ANCHOR
#: Every URL with auth right; every URL without it raises (None joined): a regression.
BREAKS = "    netloc = '@'.join([auth, netloc])\n" + ANCHOR
#: The gold patch's change.
GOLD = "    if auth:\n        netloc = '@'.join([auth, netloc])\n" + ANCHOR
PROPERTIES = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from requests.utils import prepend_scheme_if_needed

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


@pytest.mark.pgs_issue("the user and password of a URL are kept when a scheme is prepended")
@given(words, words, words)
@example("user", "pass", "example")
def test_auth_is_kept(user, password, host):
    url = f"http://{user}:{password}@{host}.com/path?query"
    assert prepend_scheme_if_needed(url, "http") == url


@pytest.mark.pgs_regression("a URL without a scheme gets the new one, the rest unchanged")
@given(words)
def test_scheme_is_prepended(host):
    assert prepend_scheme_if_needed(f"{host}.com/path", "http") == f"http://{host}.com/path"
"""


def _attempt(new_str: str) -> list[dict[str, Any]]:
    edit = {"command": "str_replace", "path": UTILS, "old_str": ANCHOR, "new_str": new_str}
    return [
        {"content": "A fix.", "tool_calls": [{"name": "str_replace_editor", "arguments": edit}]},
        {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
    ]


TESTER = [
    {
        "content": "The rules.",
        "tool_calls": [
            {
                "name": "str_replace_editor",
                "arguments": {
                    "command": "create",
                    "path": "/testbed/.pgs/properties/test_prepend.py",
                    "file_text": PROPERTIES,
                },
            }
        ],
    },
    {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]},
]


def test_gold_among_wrong_candidates_is_chosen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = next(
        line for line in RECORDS.read_text().splitlines() if json.loads(line)["instance_id"] == IID
    )
    records = tmp_path / "one.jsonl"
    records.write_text(record + "\n")
    out = tmp_path / "out"
    steps = [*_attempt(OVERFIT), *TESTER, *_attempt(BREAKS), *_attempt(GOLD)]
    with ScriptedServer(steps) as server:
        code = main(
            [
                "batch",
                "--instances",
                str(records),
                "--repos-dir",
                str(REPOS),
                "--output-dir",
                str(out),
                "--model",
                "scripted",
                "--base-url",
                server.url,
                "--model.prices",
                json.dumps({"scripted": [0, 0]}),
                "--rounds",
                "0",
                "--pgs.seed",
                "7",
                "--pgs.check",
                json.dumps({"deadline_ms": 0}),
                "--attempts",
                "3",
            ]
        )
    assert code == 0, capsys.readouterr().err
    traj = json.loads((out / IID / f"{IID}.traj").read_text())
    chosen = AttemptsRecord.model_validate(traj["attempts"])
    by_k = {c.attempt: c for c in chosen.candidates}
    assert chosen.chosen == 3, chosen.reason
    assert [by_k[k].verdict for k in (1, 2, 3)] == ["failed", "failed", "passed"]
    assert by_k[1].issue_passed == 0 and by_k[2].issue_passed == 1 and by_k[2].broken
    assert chosen.reason.startswith("attempt 3 (passed): over attempt 2 by verdict")
    assert "over attempt 1 by verdict (verdict passed against verdict failed)" in chosen.reason
    pred = json.loads((out / "preds.json").read_text())[IID]
    assert pred["attempt_chosen"] == 3 and pred["selection_changed"] is True
    assert "+    if auth:" in pred["model_patch"]
