"""``pgs ladder``: the PGS paper's Table 7 in one command, on the bundled example (``median``)
with the in-process replay model answering for the Generator and the Tester from one policy
(:func:`policy`), real Docker sandboxes, real pytest and Hypothesis, the hidden tests as the
grade.

The scripted session, in every row:

- the Generator's first fix takes the middle values of the UNSORTED list (the issue's own
  example, already sorted, passes; so do the repository's tests); after one feedback message,
  the right fix;
- the io rows' extraction turn writes the issue's own example as a test (it fails on the
  original code, so it is kept; the first fix passes it);
- the Tester writes the issue property (even counts) and a regression property (odd counts),
  plus two the soundness filter drops: an issue property that passes on the original code, and
  a regression property that pins the issue's own example to its old answer (dropped as
  contradicting the issue); a fresh probe adds a bounds property.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from tests.support.median import BOUNDS, MEDIAN

TESTER_PROMPT = "You are a test engineer"
PROBE = "The properties already in the folder state these rules"
PROPERTIES = ".pgs/properties"
PINNED = f"{PROPERTIES}/test_pinned.py::test_median_of_the_issue_example_stays"
PASSES = f"{PROPERTIES}/test_pinned.py::test_median_of_odd_count_as_issue"
ISSUE = f"{PROPERTIES}/test_median.py::test_median_of_even_count"

#: Two properties the filter drops: an issue property that passes on the original code, and a
#: regression property asserting the old answer on the issue's own example.
UNSOUND = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stats import median


@pytest.mark.pgs_issue("for an odd count the median is the middle sorted value")
@given(st.lists(st.integers(-9, 9), min_size=1, max_size=5))
def test_median_of_odd_count_as_issue(values):
    if len(values) % 2:
        assert median(values) == sorted(values)[len(values) // 2]


@pytest.mark.pgs_regression("one value is its own median, and the issue's example stays 3")
@given(st.lists(st.integers(5, 9), min_size=1, max_size=1))
@example([1, 2, 3, 4])
def test_median_of_the_issue_example_stays(values):
    assert median(values) == (3 if values == [1, 2, 3, 4] else values[0])
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"content": f"{name}.", "tool_calls": [{"name": name, "arguments": arguments}]}


def write(files: dict[str, str]) -> dict[str, Any]:
    parts = [f"mkdir -p {PROPERTIES}"]
    parts += [f"cat > {path} <<'PGS_EOF'\n{text}PGS_EOF" for path, text in files.items()]
    return call("bash", command="\n".join(parts))


def edit(old: str, new: str) -> dict[str, Any]:
    path = "/repo/stats.py"
    return call("str_replace_editor", command="str_replace", path=path, old_str=old, new_str=new)


WRONG = edit(
    "    return ordered[len(ordered) // 2]\n",
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (values[middle - 1] + values[middle]) / 2\n",
)
RIGHT = edit(
    "    return (values[middle - 1] + values[middle]) / 2\n",
    "    return (ordered[middle - 1] + ordered[middle]) / 2\n",
)
GENERATOR = [WRONG, call("submit"), RIGHT, call("submit")]
TESTER = [
    write({f"{PROPERTIES}/test_median.py": MEDIAN, f"{PROPERTIES}/test_pinned.py": UNSOUND}),
    call("submit"),
]
PROBE_TURN = [write({f"{PROPERTIES}/test_median_bounds.py": BOUNDS}), call("submit")]
EXTRACTION = "You turn the examples an issue states"
ISSUE_EXAMPLE = """\
import pytest

from stats import median


@pytest.mark.pgs_issue("median([1, 2, 3, 4]) should return 2.5")
def test_the_issue_example():
    out = median([1, 2, 3, 4])
    assert out == 2.5, f"returned {out!r}, expected 2.5"
"""
EXAMPLE_TURN = [write({f"{PROPERTIES}/test_examples.py": ISSUE_EXAMPLE}), call("submit")]
#: Every row but none: Table 7's five and the unminimised property row.
ALL_ROWS = "none,io,io-min,property,property-min,filter,pgs"


def policy(request: dict[str, Any]) -> dict[str, Any]:
    """Both conversations, told apart by the system prompt; each answered by how far it got."""
    messages = request["messages"]
    replies = sum(m["role"] == "assistant" for m in messages)
    if EXTRACTION in str(messages[0]["content"]):
        steps = EXAMPLE_TURN
    elif str(messages[0]["content"]).startswith(TESTER_PROMPT):
        steps = PROBE_TURN if PROBE in str(messages[1]["content"]) else TESTER
    else:
        steps = GENERATOR
    return steps[min(replies, len(steps) - 1)]


def ladder(out: Path, *flags: str) -> list[str]:
    return [
        "ladder",
        "--examples",
        "--model",
        "replay",
        "--model.script",
        f"{__name__}:policy",
        "--pgs.check",
        json.dumps({"max_examples": 50, "test_timeout": 60}),
        "--output-dir",
        str(out),
        *flags,
    ]


def values(example: str) -> list[int]:
    name, _, value = example.partition("=")
    assert name == "values", example
    parsed: list[int] = ast.literal_eval(value)
    return parsed


@pytest.mark.docker
def test_the_ladder_runs_seven_distinct_rows_on_the_bundled_example(
    docker_client: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ladder"
    capsys.readouterr()
    assert main(ladder(out, "--rows", ALL_ROWS, "--json")) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    rows = data["rows"]
    names = [entry["row"] for row in rows for entry in row["ladder"]]
    assert names == ALL_ROWS.split(",")
    settings = [row["setting"] for row in rows]
    assert settings == [
        {"mode": "none", "rounds": None, "filter": None, "fresh_probes": None, "shrink": None},
        {"mode": "io", "rounds": 5, "filter": None, "fresh_probes": None, "shrink": False},
        {"mode": "io-min", "rounds": 5, "filter": None, "fresh_probes": None, "shrink": False},
        {"mode": "property", "rounds": 1, "filter": False, "fresh_probes": 0, "shrink": False},
        {"mode": "property-min", "rounds": 1, "filter": False, "fresh_probes": 0, "shrink": True},
        {"mode": "property-min", "rounds": 1, "filter": True, "fresh_probes": 0, "shrink": True},
        {"mode": "property-min", "rounds": 5, "filter": True, "fresh_probes": 1, "shrink": True},
    ]
    # Graded by the hidden tests: the Generator alone submits its first, wrong fix; Self-Edit's
    # first fix passes the repository's tests and the issue's own example (kept: it fails on
    # the original code), so no feedback and a wrong patch, "passed" by the one example it had;
    # every property row gets the right fix after one message, io at the rounds of pgs.
    assert [row["resolved"] for row in rows] == [0, 0, 0, 1, 1, 1, 1]
    assert [row["rounds"]["total"] for row in rows] == [0, 0, 0, 1, 1, 1, 1]
    assert [row["setting"]["rounds"] for row in rows] == [None, 5, 5, 1, 1, 1, 5]
    # Unfiltered, the pinned property punishes the right fix: failed; filtered: passed.
    verdicts = [next(v for v, n in row["verdicts"].items() if n) for row in rows[1:]]
    assert verdicts == ["passed", "passed", "failed", "failed", "passed", "passed"]

    def traj(row: str) -> dict[str, Any]:
        (path,) = (out / row).glob("*/*.traj")
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    # No minimisation: the first failing input generated, unshrunk; with it: shrunk. Each row
    # draws its own inputs (a random run seed). Shrinking ends in a local minimum: a list of
    # four 0s and 1s ([0, 0, 1, 0], [1, 0, 0, 1]) or a longer one ([0, 0, 0, 1, 0, 0], 15
    # tokens, where a generated list of four numbers has 11). So what a minimising row promises
    # is the fewest tokens: never more than the input Hypothesis shrank to; the row without
    # minimisation shrinks nothing.
    fed = {}
    for row in ("property", "property-min", "filter"):
        (chosen,) = [r for r in traj(row)["pgs"]["rounds"] if r.get("selection")]
        selection = chosen["selection"]
        assert selection["result"]["nodeid"] == ISSUE
        fed[row] = values(selection["input"])
        (issue,) = [r for r in chosen["report"]["results"] if r["nodeid"] == ISSUE]
        shrunk = [p["tokens"] for p in issue.get("pool") or [] if p["source"] == "shrunk"]
        if row == "property":
            assert shrunk == [], shrunk
            continue
        assert shrunk and selection["tokens"] <= min(shrunk), (row, fed[row], shrunk)
        assert fed["property"] != fed[row]
    assert max(map(abs, fed["property"])) > 1
    assert f"Input: values={fed['property']!r}" in traj("property")["pgs"]["rounds"][0]["feedback"]
    # The command that reruns the property alone shrinks as the row does.
    rerun = {
        row: next(
            line
            for line in traj(row)["pgs"]["rounds"][0]["feedback"].splitlines()
            if line.startswith("Rerun it alone: ")
        )
        for row in ("property", "property-min")
    }
    # (after the check's seed: PGS_SEED=<n>, the same inputs as the check drew)
    # (then the inputs it replayed, and the pinned plugins of the check's own command line)
    assert re.match(
        r"Rerun it alone: PGS_SEED=\d+ (PGS_REPLAY=\S+ )?PGS_SHRINK=0 ", rerun["property"]
    )
    assert "PGS_ENTRY_POINTS=" in rerun["property"] and " -I -B " in rerun["property"]
    assert "PGS_SHRINK" not in rerun["property-min"]

    # Unfiltered keeps what the filter drops: nothing dropped, no contradiction check.
    for row in ("property", "property-min"):
        validation = traj(row)["pgs"]["validation"]
        assert PINNED in validation["kept"] and PASSES in validation["kept"]
        assert validation["dropped"] == [] and validation["filter"] is False
    for row in ("filter", "pgs"):
        validation = traj(row)["pgs"]["validation"]
        assert PINNED not in validation["kept"] and PASSES not in validation["kept"]
        reasons = {d["nodeid"]: d["reason"] for d in validation["dropped"]}
        assert "contradicts the issue" in reasons[PINNED]
    # The io rows: one Tester turn, the extraction turn, which kept the issue's example.
    for row in ("io", "io-min"):
        pgs = traj(row)["pgs"]
        assert [t["why"] for t in pgs["tester_turns"]] == ["examples"]
        assert pgs["validation"]["kept"] == [
            f"{PROPERTIES}/test_examples.py::test_the_issue_example"
        ]
    # Only the full PGS row probes: one round rows refine once and stop.
    assert [len(traj(row)["pgs"]["tester_turns"]) for row in ("property", "filter", "pgs")] == [
        1,
        1,
        2,
    ]
    # Each prediction names its whole setting beside the mode.
    pred = json.loads((out / "property" / "preds.json").read_text())
    (entry,) = pred.values()
    assert {k: entry[k] for k in entry if k.startswith("pgs_") and k != "pgs_feedback_tokens"} == {
        "pgs_mode": "property",
        "pgs_verdict": "failed",
        "pgs_rounds": 1,
        "pgs_max_rounds": 1,
        "pgs_filter": False,
        "pgs_fresh_probes": 0,
        "pgs_shrink": False,
    }

    # Resumed: nothing runs again, nothing is graded again, the same rows as a table.
    stamps = {p: p.stat().st_mtime for p in out.glob("*/*/*.traj")}
    assert main(ladder(out, "--rows", ALL_ROWS)) == 0
    captured = capsys.readouterr()
    assert captured.err.count("finished before") == 7
    assert "hidden tests" not in captured.err
    assert {p: p.stat().st_mtime for p in out.glob("*/*/*.traj")} == stamps
    table = [
        line
        for line in captured.out.splitlines()
        if re.match(r"│ (none|io|io-min|property|property-min|filter|pgs) ", line)
    ]
    assert len(table) == 7 and len(set(table)) == 7
    assert main(["report", *(str(out / row) for row in names), "--json"]) == 0
    assert [row["setting"] for row in json.loads(capsys.readouterr().out)["rows"]] == settings


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rows", "io,pgs,nope"], r"--rows 'io,pgs,nope': unknown row 'nope'; the rows are"),
        (["--rows", "io,io"], r"a row is named twice"),
        (["--feedback", "io"], r"pgs\.feedback is set by each row of the ladder"),
        (["--no-pgs.filter"], r"pgs\.filter is set by each row of the ladder"),
        (["--pgs.check", '{"shrink": true}'], r"pgs\.check\.shrink is set by each row"),
        (
            ["--rounds", "1", "--pgs.fresh-probes", "0"],
            r"rows filter and pgs would run the same setting",
        ),
        (["--examples", "nope"], r"--examples: no bundled example 'nope'; there are median"),
        (["--config", "no-such.yaml"], r"cannot read the config file no-such\.yaml"),
    ],
)
def test_a_mistake_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    argv = ladder(tmp_path / "out")
    if "--examples" in flags:
        argv.remove("--examples")
    capsys.readouterr()
    assert main([*argv, *flags]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("pgs: error: ") and re.search(message, line), line
    assert not (tmp_path / "out").exists()


def test_the_paper_config_is_shipped_and_named_by_its_name(tmp_path: Path) -> None:
    from agent.run.config import load_config

    for name in ("paper", "paper.yaml"):
        config = load_config([Path(name)], {"model": {"name": "m"}})
        assert (config.model.temperature, config.model.top_p) == (0.7, 0.95)
        assert config.model.max_output_tokens == 32768
        assert (config.pgs.rounds, config.pgs.check.max_examples) == (5, 64)
        # The paper's other Tester turns: the input generator, the public tests, every round.
        assert config.pgs.input_generator and config.pgs.examples_filter
        assert config.pgs.properties_every_round
    # A file of that name in the working folder is the file, not the shipped one.
    own = tmp_path / "paper"
    own.write_text("model: {temperature: 0.2}\n")
    assert load_config([own], {"model": {"name": "m"}}).model.temperature == 0.2


@pytest.mark.docker
def test_the_ladder_runs_swe_bench_records_and_grades_them_as_pgs_eval(
    base_image: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.models.script_server import ScriptedServer
    from tests.pgs.test_compare import I1, two_round_policy
    from tests.support.swe_dataset import batch_args, make_dataset

    dataset = make_dataset(tmp_path / "swe")
    out = tmp_path / "ladder"
    with ScriptedServer(two_round_policy) as server:
        argv = batch_args(dataset, server.url, out, "--filter", f"^{I1}$", feedback=None)
        capsys.readouterr()
        assert main(["ladder", *argv[1:], "--rows", "io,pgs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [[entry["row"] for entry in row["ladder"]] for row in rows] == [["io"], ["pgs"]]
    assert [(row["setting"]["mode"], row["setting"]["rounds"]) for row in rows] == [
        ("io", 5),
        ("property-min", 5),
    ]
    # Each row graded as `pgs eval` grades, its summary in the row's folder.
    for row in ("io", "pgs"):
        summary = json.loads((out / row / "eval" / "scripted.ladder.json").read_text())
        assert summary["resolved_ids"] == [I1]
    assert [row["resolved"] for row in rows] == [1, 1]
    assert [row["rounds"]["total"] for row in rows] == [1, 1]


def test_a_row_folder_of_another_setting_is_not_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run = out / "pgs" / "median__issue" / "median__issue.traj"
    run.parent.mkdir(parents=True)
    setting = {"mode": "property-min", "rounds": 3, "filter": True, "fresh_probes": 1}
    pgs = {"mode": "property-min", "ablation": {**setting, "shrink": True}}
    run.write_text(json.dumps({"info": {"exit_status": "submitted"}, "pgs": pgs}))
    capsys.readouterr()
    assert main(ladder(out)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"pgs: error: {run} ran with another setting (") and "--redo" in line
    assert sorted(p.name for p in out.iterdir()) == ["pgs"]  # nothing ran


KEYS = ("inputs", "examples", "every_round")


def test_the_rows_are_table_7s_with_self_edit_at_the_rounds_of_pgs() -> None:
    """Every row's setting, from a run config of 4 rounds and 2 probes; and the table of the
    module's docstring says the same (its feedback, rounds and filter columns)."""
    from agent.cli import ladder as module
    from agent.pgs.config import ablation
    from agent.run.config import load_config

    config = load_config(None, {"model": {"name": "m"}, "pgs": {"rounds": 4, "fresh_probes": 2}})
    settings = {
        name: ablation(row.config(config).pgs).model_dump() for name, row in module.ROWS.items()
    }
    assert settings == {
        "none": {"mode": "none", "rounds": None, "filter": None, "fresh_probes": None,
                 "shrink": None},
        "io": {"mode": "io", "rounds": 4, "filter": None, "fresh_probes": None, "shrink": False},
        "io-min": {"mode": "io-min", "rounds": 4, "filter": None, "fresh_probes": None,
                   "shrink": False},
        "property": {"mode": "property", "rounds": 1, "filter": False, "fresh_probes": 0,
                     "shrink": False},
        "property-min": {"mode": "property-min", "rounds": 1, "filter": False,
                         "fresh_probes": 0, "shrink": True},
        "filter": {"mode": "property-min", "rounds": 1, "filter": True, "fresh_probes": 0,
                   "shrink": True},
        "pgs": {"mode": "property-min", "rounds": 4, "filter": True, "fresh_probes": 2,
                "shrink": True},
        "pick-then-shrink": {"mode": "property-min", "rounds": 4, "filter": True,
                             "fresh_probes": 2, "shrink": True,
                             "shrink_order": "pick-then-shrink"},
    }  # fmt: skip
    # With the paper's config the property rows take its other Tester turns: the input
    # generator in each, the public tests where the filter is on, every round where they iterate.
    paper = load_config([Path("paper")], {"model": {"name": "m"}})
    turns = {
        name: {k: v for k, v in ablation(row.config(paper).pgs).model_dump().items() if k in KEYS}
        for name, row in module.ROWS.items()
    }
    assert turns == {
        "none": {},
        "io": {},
        "io-min": {},
        "property": {"inputs": True},
        "property-min": {"inputs": True},
        "filter": {"inputs": True, "examples": True},
        "pgs": {"inputs": True, "examples": True, "every_round": True},
        "pick-then-shrink": {"inputs": True, "examples": True, "every_round": True},
    }
    # Table 7's five rows by default, every setting distinct (check_config refuses twins).
    assert module.DEFAULT_ROWS == ("io", "io-min", "property-min", "filter", "pgs")
    module.check_config(config, [module.ROWS[name] for name in module.ROWS])
    # The docstring's table: a line per row, ``name`` then its columns.
    doc = module.__doc__ or ""
    table = {
        m.group(1): m.group(2).split()[-4:]
        for m in re.finditer(r"^``([\w-]+)``\s{2,}(.*)$", doc, flags=re.MULTILINE)
    }
    assert list(table) == list(module.ROWS)
    for name, (feedback, rounds, filter_, _) in table.items():
        setting = settings[name]
        assert feedback == setting["mode"], name
        expected_rounds = {None: "-", 1: "1", 4: "N"}[setting["rounds"]]
        assert rounds == expected_rounds, name
        assert filter_ == {None: "-", True: "on", False: "off"}[setting["filter"]], name
