"""``pgs report``: ablation settings side by side, and the fields every prediction records.

The fast tests build run folders by hand (preds.json, ``<id>/<id>.traj``, a ``pgs eval``
summary) and check the aggregation and the errors. The Docker test runs ``pgs batch`` twice over
the test dataset (``swe_dataset``), once with Self-Edit feedback (``io``) and once with full PGS
(``property-min``), with a scripted Generator whose first fix breaks a repository test and a
scripted Tester that writes one issue property; then ``pgs eval`` on each and ``pgs report``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from agent.pgs.compare import prediction_fields
from agent.pgs.tokens import SimpleCounter
from tests.support.swe_dataset import I1, Dataset, batch_args, make_dataset


def report_json(capsys: pytest.CaptureFixture[str], *dirs: Path) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", *map(str, dirs), "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


# --------------------------------------------------------------------------- hand-made runs


def traj(
    mode: str,
    verdict: str | None,
    feedback: list[str],
    cost: float,
    tester_cost: float = 0.0,
    **config: Any,
) -> dict[str, Any]:
    """A ``.traj`` as an older pgs wrote it (no ablation record; ``config``: more of its
    ``replay_config.pgs``): rounds with and without feedback, two models' stats."""
    pgs: dict[str, Any] = {"mode": mode}
    if mode != "none":
        rounds = [{"round": i + 1, "feedback": text} for i, text in enumerate(feedback)]
        rounds.append({"round": len(rounds) + 1, "failures": 0})  # the last check: no message
        pgs.update(
            rounds=rounds,
            verdict=verdict,
            tester={"info": {"model_stats": {"instance_cost": tester_cost}}},
        )
    return {
        "trajectory": [],
        "history": [],
        "info": {"exit_status": "submitted", "model_stats": {"instance_cost": cost}},
        "replay_config": {"pgs": {"feedback": mode, **config}},
        "pgs": pgs,
    }


def make_run(folder: Path, trajs: dict[str, dict[str, Any]], model: str = "m") -> Path:
    """A batch folder whose preds.json holds only the harness's keys (as before the fields)."""
    preds = {}
    for iid, data in trajs.items():
        (folder / iid).mkdir(parents=True)
        (folder / iid / f"{iid}.traj").write_text(json.dumps(data))
        preds[iid] = {"instance_id": iid, "model_name_or_path": model, "model_patch": "diff"}
    (folder / "preds.json").write_text(json.dumps(preds))
    return folder


def write_eval(folder: Path, resolved: list[str], submitted: list[str]) -> Path:
    """A ``pgs eval`` summary where ``pgs eval --report-dir RUN/eval --run-id t`` puts it."""
    path = folder / "eval" / "m.t.json"
    path.parent.mkdir(parents=True)
    summary = {"resolved_ids": resolved, "submitted_ids": submitted, "schema_version": 2}
    path.write_text(json.dumps(summary))
    return path


def test_prediction_fields_come_from_the_trajectory() -> None:
    feedback = ["Round 1 of 5. Property violated: xs=[0, 0]", "Round 2 of 5. returned 3"]
    fields = prediction_fields(traj("property-min", "passed", feedback, 0.25, 0.5))
    assert fields == {
        "pgs_mode": "property-min",
        "pgs_verdict": "passed",
        "pgs_rounds": 2,
        # SimpleCounter: words and numbers are one token each, every other symbol one.
        "pgs_feedback_tokens": 15 + 7,
        "cost": 0.75,  # the Generator's and the Tester's
        # The rest of the setting: this older .traj's replay_config names only the mode; its
        # checks shrank (every mode did before shrinking followed the mode).
        "pgs_max_rounds": None,
        "pgs_filter": None,
        "pgs_fresh_probes": None,
        "pgs_shrink": True,
    }
    assert prediction_fields(traj("none", None, [], 0.1, rounds=5, filter=True)) == {
        "pgs_mode": "none",
        "pgs_verdict": "unchecked",
        "pgs_rounds": 0,
        "pgs_feedback_tokens": 0,
        "cost": 0.1,
        # The Generator alone: no rounds, no filter, no probes, nothing shrunk.
        "pgs_max_rounds": None,
        "pgs_filter": None,
        "pgs_fresh_probes": None,
        "pgs_shrink": None,
    }
    # A run that crashed before the agent began: the batch's own --feedback says the mode.
    assert prediction_fields({}, mode="io")["pgs_mode"] == "io"


def test_modes_are_compared_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    io = make_run(
        tmp_path / "io",
        {
            "a-1": traj("io", "passed", ["FAILED test_a - assert 1 == 2"], 1.0, 0.5),
            "a-2": traj("io", "failed", ["x", "y", "z"], 2.0, 0.5),
            "a-3": traj("io", "unchecked", [], 0.5),
        },
    )
    write_eval(io, resolved=["a-1"], submitted=["a-1", "a-2", "a-3"])
    pgs = make_run(
        tmp_path / "pgs",
        {
            "a-1": traj("property-min", "passed", ["xs=[0]"], 1.0, 1.0),
            "a-2": traj("property-min", "tests-only", [], 1.0, 1.0),
            "a-3": traj("property-min", "partial", [], 1.0, 1.0),
        },
    )
    write_eval(pgs, resolved=["a-1", "a-2"], submitted=["a-1"])  # a-2 was not graded
    none = make_run(tmp_path / "none", {"a-1": traj("none", None, [], 0.25)})

    data = report_json(capsys, none, io, pgs)
    io_tokens = 8 + 3  # "FAILED test_a - assert 1 == 2" is 8 tokens: "==" counts two
    rows = {row["mode"]: row for row in data["rows"]}
    assert [row["mode"] for row in data["rows"]] == ["none", "io", "property-min"]
    assert rows["io"] == {
        "mode": "io",
        "setting": {
            "mode": "io",
            "rounds": None,
            "filter": None,
            "fresh_probes": None,
            "shrink": True,
        },
        "runs": [str(io)],
        "instances": 3,
        "resolved": 1,
        "graded": 3,
        "verdicts": {
            "passed": 1,
            "partial": 0,
            "tests-only": 0,
            "tests-changed": 0,
            "unchecked": 1,
            "failed": 1,
        },
        "rounds": {"total": 4, "mean": 4 / 3},
        "feedback_tokens": {"total": io_tokens, "mean": io_tokens / 3},
        "cost": {"total": 4.5, "mean": 1.5},
    }
    assert rows["property-min"]["resolved"] == 1 and rows["property-min"]["graded"] == 1
    assert rows["property-min"]["verdicts"]["tests-only"] == 1
    assert rows["property-min"]["verdicts"]["partial"] == 1  # counted in a column of its own
    assert rows["property-min"]["feedback_tokens"] == {"total": 5, "mean": 5 / 3}
    assert rows["none"]["resolved"] is None and rows["none"]["rounds"]["total"] == 0
    assert [r["eval_report"] for r in data["runs"]] == [
        None,
        str(io / "eval" / "m.t.json"),
        str(pgs / "eval" / "m.t.json"),
    ]
    by_id = {(r["run"], r["instance_id"]): r for r in data["instances"]}
    assert by_id[(str(pgs), "a-2")]["resolved"] is None  # no report grades it
    assert by_id[(str(io), "a-2")]["resolved"] is False

    # The table a person reads: one row per mode, resolved as K/N, "-" without a report.
    assert main(["report", "--wide", str(none), str(io), str(pgs)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    # instances, resolved, then the verdicts: passed, partial, tests-only, tests-changed, ...
    verdicts = r"│\s+3\s+│\s+1/3\s+│\s+1\s+│\s+0\s+│\s+0\s+│\s+0\s+│\s+1\s+│\s+1\s+│"
    assert re.search(verdicts, lines["io"])
    assert "1/3 (1 graded)" in lines["property-min"]
    assert re.search(r"1/3 \(1 graded\)\s+│\s+1\s+│\s+1\s+│\s+1\s+│", lines["property-min"])
    assert re.search(r"│\s+1\s+│\s+-\s+│", lines["none"])
    assert "$4.5000 / $1.5000" in lines["io"]


def test_one_folder_can_hold_several_modes_and_pgs_run_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `pgs run` writes <id>/<id>.pred but no preds.json; the .pred files stand in for it.
    folder = tmp_path / "runs"
    for iid, mode in (("r-1", "io"), ("r-2", "property")):
        (folder / iid).mkdir(parents=True)
        (folder / iid / f"{iid}.traj").write_text(json.dumps(traj(mode, "failed", ["x"], 1.0)))
        pred = {"instance_id": iid, "model_name_or_path": "m", "model_patch": ""}
        (folder / iid / f"{iid}.pred").write_text(json.dumps(pred))
    data = report_json(capsys, folder)
    assert [(r["mode"], r["instances"], r["rounds"]["total"]) for r in data["rows"]] == [
        ("io", 1, 1),
        ("property", 1, 1),
    ]


def ablated(data: dict[str, Any], **setting: Any) -> dict[str, Any]:
    """``data`` as pgs writes it now: its pgs record holds the full ablation setting."""
    data["pgs"]["ablation"] = {"mode": data["pgs"]["mode"], **setting}
    return data


def test_rows_are_keyed_by_the_full_setting_not_the_mode_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full = {"filter": True, "fresh_probes": 1, "shrink": True}
    one = ablated(traj("property-min", "failed", ["xs=[0]"], 1.0), rounds=1, **full)
    five = ablated(traj("property-min", "passed", ["xs=[0]", "xs=[1]"], 2.0), rounds=5, **full)
    once = make_run(tmp_path / "once", {"a-1": one})
    five_rounds = make_run(tmp_path / "five", {"a-1": five})
    # The same setting in a third folder joins the five-round row.
    again = make_run(tmp_path / "again", {"a-2": json.loads(json.dumps(five))})
    # An older run (no ablation record): its setting from its replay_config, shrinking on.
    older = make_run(
        tmp_path / "older",
        {"a-1": traj("property", "failed", ["x"], 1.0, rounds=1, filter=False, fresh_probes=0)},
    )

    data = report_json(capsys, five_rounds, once, again, older)
    assert [(r["setting"], r["runs"]) for r in data["rows"]] == [
        (
            {"mode": "property", "rounds": 1, "filter": False, "fresh_probes": 0, "shrink": True},
            [str(older)],
        ),
        ({"mode": "property-min", "rounds": 1, **full}, [str(once)]),
        ({"mode": "property-min", "rounds": 5, **full}, sorted([str(five_rounds), str(again)])),
    ]
    assert [r["instances"] for r in data["rows"]] == [1, 1, 2]
    assert data["rows"][2]["rounds"] == {"total": 4, "mean": 2.0}

    # The table: two property-min rows, told apart by their most rounds.
    assert main(["report", "--wide", str(five_rounds), str(once), str(again), str(older)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "property-min" in line]
    cells = [[cell.strip() for cell in line.split("│")[1:6]] for line in lines]
    assert cells == [
        ["property-min (PGS)", "1", "on", "1", "on"],
        ["property-min (PGS)", "5", "on", "1", "on"],
    ]


def test_predictions_without_trajectories_keep_their_recorded_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Predictions alone (their .traj files gone), the newer with the setting's keys.
    folder = tmp_path / "preds-only"
    folder.mkdir()
    base = {"model_name_or_path": "m", "model_patch": "", "pgs_verdict": "failed"}
    base.update(pgs_mode="property", pgs_rounds=1, pgs_feedback_tokens=3, cost=0.0)
    preds = {
        "p-1": {"instance_id": "p-1", **base, "pgs_max_rounds": 1, "pgs_shrink": False},
        "p-2": {"instance_id": "p-2", **base, "pgs_max_rounds": 3, "pgs_shrink": False},
        "p-3": {"instance_id": "p-3", **base},
    }
    (folder / "preds.json").write_text(json.dumps(preds))
    data = report_json(capsys, folder)
    assert [(r["setting"]["rounds"], r["setting"]["shrink"]) for r in data["rows"]] == [
        (None, None),
        (1, False),
        (3, False),
    ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, r"is not a folder"),
        (lambda p: p.mkdir(), r"holds no preds\.json and no <id>/<id>\.pred"),
        (
            lambda p: (p.mkdir(), (p / "preds.json").write_text("{nope")),
            r"preds\.json is not valid JSON",
        ),
        (
            lambda p: (
                p.mkdir(),
                (p / "preds.json").write_text(
                    json.dumps({"x-1": {"instance_id": "x-1", "model_patch": ""}})
                ),
            ),
            r"1 of 1 predictions in .* have no trajectory \(e\.g\. .*x-1/x-1\.traj\)",
        ),
    ],
)
def test_a_folder_that_is_not_a_run_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: Any, message: str
) -> None:
    good = make_run(tmp_path / "good", {"a-1": traj("io", "passed", [], 1.0)})
    bad = tmp_path / "bad"
    setup(bad)
    capsys.readouterr()
    assert main(["report", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("pgs: error: ") and re.search(message, line), line
    assert "Traceback" not in captured.err and captured.out == ""


def test_the_harness_reads_predictions_with_the_extra_fields(tmp_path: Path) -> None:
    from swebench.harness.utils import get_predictions_from_file

    pred = {
        "instance_id": "a-1",
        "model_name_or_path": "m",
        "model_patch": "diff",
        **prediction_fields(traj("io", "failed", ["x"], 1.0)),
    }
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"a-1": pred}))
    assert get_predictions_from_file(str(path), "unused", "test") == [pred]


# --------------------------------------------------------------------------- end to end

TESTER_PROMPT = "You are a test engineer"
PROPERTY = """import pytest

from textkit.core import slugify


@pytest.mark.pgs_issue("slugify lower-cases every word")
def test_slugify_lowercases_words():
    out = slugify("Hello World")
    assert out == "hello-world", f"returned {out!r}, expected 'hello-world'"
"""
#: The Generator's first fix lower-cases but joins with "_": test_slugify_spaces breaks.
WRONG = ('"-".join(text.split())', '"_".join(text.lower().split())')
#: io's extraction turn writes the issue's example (the same concrete test, from the same
#: scripted Tester): it fails on the original code and passes on the right fix.
VERDICT = {"io": "passed", "property-min": "passed"}
RIGHT = ('"_".join(text.lower().split())', '"-".join(text.lower().split())')


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": f"{name}.", "tool_calls": [{"name": name, "arguments": arguments}]}


def edit(old: str, new: str) -> dict[str, Any]:
    path = "/testbed/textkit/core.py"
    return call("str_replace_editor", command="str_replace", path=path, old_str=old, new_str=new)


def two_round_policy(request: dict[str, Any]) -> dict[str, Any]:
    """Tester (each turn, the first, the fresh probe and io's extraction turn): one issue
    property (a concrete test of the issue's example), then submit.
    Generator: a wrong fix, submit; after the feedback, the right fix, submit."""
    messages = request["messages"]
    replies = sum(m["role"] == "assistant" for m in messages)
    if str(messages[0]["content"]).startswith(TESTER_PROMPT):
        if replies == 0:
            command = (
                "mkdir -p .pgs/properties && cat > .pgs/properties/test_slug.py <<'EOF'\n"
                f"{PROPERTY}EOF"
            )
            return call("bash", command=command)
        return call("submit")
    steps = [edit(*WRONG), call("submit"), edit(*RIGHT)]
    return steps[replies] if replies < len(steps) else call("submit")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("swe"))


def batch_and_eval(dataset: Dataset, url: str, out: Path, mode: str) -> dict[str, Any]:
    code = main(batch_args(dataset, url, out, "--filter", f"^{I1}$", feedback=mode))
    assert code == 0
    code = main(
        [
            "eval",
            "--predictions",
            str(out / "preds.json"),
            "--instances",
            str(dataset.instances_file),
            "--repos-dir",
            str(dataset.repos_dir),
            "--report-dir",
            str(out / "eval"),
            "--run-id",
            mode,
        ]
    )
    assert code == 0
    summary: dict[str, Any] = json.loads((out / "eval" / f"scripted.{mode}.json").read_text())
    return summary


@pytest.mark.docker
def test_self_edit_and_pgs_side_by_side(
    dataset: Dataset, base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = {mode: tmp_path / mode for mode in ("io", "property-min")}
    summaries = {}
    with ScriptedServer(two_round_policy) as server:
        for mode, out in dirs.items():
            summaries[mode] = batch_and_eval(dataset, server.url, out, mode)
    data = report_json(capsys, *dirs.values())
    rows = {row["mode"]: row for row in data["rows"]}
    assert set(rows) == {"io", "property-min"}
    counter = SimpleCounter()
    for mode, out in dirs.items():
        # Counted here from the trajectory, independently of agent.pgs.compare.
        traj_data = json.loads((out / I1 / f"{I1}.traj").read_text())
        pgs = traj_data["pgs"]
        assert pgs["mode"] == mode
        feedback = [r["feedback"] for r in pgs["rounds"] if r.get("feedback")]
        assert len(feedback) == 1  # the wrong fix drew one message; the right one passed
        tokens = sum(counter.count(text) for text in feedback)
        stats = [traj_data["info"]["model_stats"]]
        stats += [pgs[turn["key"]]["info"]["model_stats"] for turn in pgs["tester_turns"]]
        cost = sum(s["instance_cost"] for s in stats)
        generator_cost = traj_data["info"]["model_stats"]["instance_cost"]
        # The Tester's cost is included: io's one turn is the extraction turn.
        assert cost > generator_cost > 0
        whys = [turn["why"] for turn in pgs["tester_turns"]]
        assert whys == ["examples"] if mode == "io" else whys[0] == "first"

        row = rows[mode]
        assert row["runs"] == [str(out)] and row["instances"] == 1
        assert row["resolved"] == len(summaries[mode]["resolved_ids"]) == 1
        assert pgs["verdict"] == VERDICT[mode] and row["verdicts"][VERDICT[mode]] == 1
        assert row["rounds"] == {"total": 1, "mean": 1.0}
        assert row["feedback_tokens"] == {"total": tokens, "mean": float(tokens)}
        assert row["cost"]["total"] == pytest.approx(cost)

        # What the batch recorded in the predictions: the same fields, in both files.
        pred = json.loads((out / "preds.json").read_text())[I1]
        assert pred == json.loads((out / I1 / f"{I1}.pred").read_text())
        assert pred["model_patch"] == (out / I1 / f"{I1}.patch").read_text()
        assert {k: pred[k] for k in ("pgs_mode", "pgs_verdict", "pgs_rounds")} == {
            "pgs_mode": mode,
            "pgs_verdict": VERDICT[mode],
            "pgs_rounds": 1,
        }
        assert pred["pgs_feedback_tokens"] == tokens
        assert pred["cost"] == pytest.approx(cost)
        # The rest of the setting: io has no properties (no filter, no probes), shrinks nothing.
        assert (pred["pgs_max_rounds"], pred["pgs_filter"], pred["pgs_shrink"]) == (
            (5, None, False) if mode == "io" else (5, True, True)
        )
        assert pgs["ablation"]["shrink"] == pred["pgs_shrink"]
    # Self-Edit sends raw test output; PGS one failing input: the messages differ in size.
    assert (
        rows["io"]["feedback_tokens"]["total"] != rows["property-min"]["feedback_tokens"]["total"]
    )
