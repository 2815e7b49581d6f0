"""The PGS paper's extra Tester turns at repository level, end to end: the input generator's
hard inputs shared by every property, the issue's examples as the soundness filter's public
tests (an issue property that contradicts a stated output is dropped), and properties added
every round. The real CLI on the bundled median example, a scripted model over HTTP for the
Generator and every Tester turn, a local sandbox, real pytest and Hypothesis.

The Tester writes four issue properties: the right rule, which draws the hard inputs; "the
lower middle value" for an even count, which the issue's own example contradicts (with
``median([1, 2, 3, 4])`` answering ``2.5`` as the issue states, it fails); "the median is a
float", which fails on every input of the original code while the right rule holds on the odd
counts; and a regression property. Before the second round's check the Tester adds one more.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agent.cli import main, make_example_repo
from agent.models.script_server import ScriptedServer
from tests.pgs.test_prompts_from_config import EXAMPLE
from tests.support.textutil import run_argv

PROPS = ".pgs/properties"
INPUTS_PROMPT = "You are a test engineer. You choose hard test inputs"
EXAMPLES_PROMPT = "You are a test engineer. You turn the examples an issue states"
ROUND_WORDS = "The properties already in the folder state these rules"

HARD = """\
HARD_INPUTS = {
    "median.values": [
        [1, 2, 3, 4],  # the issue's own
        [5],  # one value
        [2, 2],  # duplicates, even
        [-1, 0, 1, 7],  # negative and zero
        [1.5, 2.5, 4.0],  # floats, odd
    ],
}
"""
EXAMPLES = """\
import pytest

from stats import median


@pytest.mark.pgs_issue("median([1, 2, 3, 4]) should return 2.5")
@pytest.mark.pgs_states(call="stats.median", args=[[1, 2, 3, 4]], returns=2.5)
def test_the_issue_example():
    out = median([1, 2, 3, 4])
    assert out == 2.5, f"returned {out!r}, expected 2.5"
"""
PROPERTIES = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pgs_inputs import hard
from stats import median

VALUES = st.lists(st.integers(-50, 50), min_size=1, max_size=8)


@pytest.mark.pgs_issue("the median is the middle value, or the mean of the two middle ones")
@given(xs=hard("median.values", VALUES))
def test_middle(xs):
    s, m = sorted(xs), len(xs) // 2
    expected = s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
    out = median(xs)
    assert out == expected, f"returned {out!r}, expected {expected!r}"


@pytest.mark.pgs_issue("for an even count the median is the lower middle value")
@given(xs=st.lists(st.integers(-50, 50), min_size=2, max_size=8).filter(lambda v: len(v) % 2 == 0))
@example(xs=[1, 2, 3, 4])
def test_lower_middle(xs):
    s = sorted(xs)
    out = median(xs)
    assert out == s[len(s) // 2 - 1], f"returned {out!r}, expected {s[len(s) // 2 - 1]!r}"


@pytest.mark.pgs_issue("the median is a float")
@given(xs=VALUES)
def test_a_float(xs):
    out = median(xs)
    assert isinstance(out, float), f"returned {out!r}, not a float"


@pytest.mark.pgs_regression("the median of one value is that value")
@given(x=st.integers())
def test_one_value(x):
    assert median([x]) == x
"""
ROUND = """\
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stats import median


@pytest.mark.pgs_regression("the median lies between the smallest and the largest value")
@given(xs=st.lists(st.integers(-50, 50), min_size=1, max_size=8))
def test_between(xs):
    assert min(xs) <= median(xs) <= max(xs)
"""
BUG = "    return ordered[len(ordered) // 2]\n"
FLOORED = (
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) // 2\n"
)


def bash(command: str) -> dict[str, Any]:
    return {"content": ".", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def write(path: str, text: str) -> dict[str, Any]:
    return bash(f"mkdir -p $(dirname {path}) && cat > {path} <<'X'\n{text}X")


def rewrite(old: str, new: str) -> dict[str, Any]:
    script = (
        "import pathlib; p = pathlib.Path('stats.py'); "
        f"p.write_text(p.read_text().replace({old!r}, {new!r}))"
    )
    return bash(f"python3 -c {json.dumps(script)}")


SUBMIT = {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}
TESTER = {
    "inputs": [write(f"{PROPS}/hard_inputs.py", HARD), SUBMIT],
    "examples": [write(f"{PROPS}/examples/test_examples.py", EXAMPLES), SUBMIT],
    "first": [write(f"{PROPS}/test_median.py", PROPERTIES), SUBMIT],
    "round": [write(f"{PROPS}/test_round.py", ROUND), SUBMIT],
}
#: The floored fix, then the right one.
GENERATOR = [
    rewrite(BUG, FLOORED),
    SUBMIT,
    rewrite("]) // 2\n", "]) / 2\n"),
    SUBMIT,
]
#: The floored fix, then, told it fails, the Generator empties the hard inputs and makes the
#: issue's example pass, and submits the same wrong fix.
TAMPERING = [
    rewrite(BUG, FLOORED),
    SUBMIT,
    write(f"{PROPS}/hard_inputs.py", "HARD_INPUTS = {}\n"),
    write(f"{PROPS}/examples/test_examples.py", "def test_the_issue_example():\n    pass\n"),
    SUBMIT,
]


#: The floored fix, and the module under test puts its own pgs_inputs in sys.modules, whose
#: hard() draws odd counts only (where the floored fix is right).
SWAPPED = [
    rewrite(BUG, FLOORED),
    write(
        "pgs_inputs.py",
        "from hypothesis import strategies as st\n\nDRAWN = []\n\n\n"
        "def hard(name, strategy=None):\n    return st.just([1, 2, 3])\n",
    ),
    bash(
        "printf 'import sys\\nimport pgs_inputs as _p\\nsys.modules[\"pgs_inputs\"] = _p\\n' "
        ">> stats.py"
    ),
    SUBMIT,
]


def turn(messages: list[dict[str, Any]]) -> str | None:
    system, first = str(messages[0]["content"]), str(messages[1]["content"])
    if system.startswith(INPUTS_PROMPT):
        return "inputs"
    if system.startswith(EXAMPLES_PROMPT):
        return "examples"
    if "property-based tests" in system:
        return "round" if ROUND_WORDS in first else "first"
    return None


def run(
    tmp: Path, generator: list[dict[str, Any]], *flags: str, properties: str = PROPERTIES
) -> tuple[list[Any], Any]:
    tester = {**TESTER, "first": [write(f"{PROPS}/test_median.py", properties), SUBMIT]}

    def policy(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        which = turn(messages)
        steps = generator if which is None else tester[which]
        n = sum(m["role"] == "assistant" for m in messages)
        return steps[n] if n < len(steps) else None

    repo = make_example_repo(tmp / "stats")
    check = {"python": sys.executable, "test_timeout": 20, "max_examples": 40}
    with ScriptedServer(policy) as server:
        code = main(
            run_argv(
                repo,
                "--sandbox",
                "local",
                "--pgs.check",
                json.dumps(check),
                "--output-dir",
                str(tmp / "out"),
                "--feedback",
                "property-min",
                "--pgs.fresh-probes",
                "0",
                "--pgs.seed",
                "7",
                *flags,
                url=server.url,
                issue=str(EXAMPLE / "issue.md"),
            )
        )
        requests = list(server.requests)
    assert code == 0
    traj = json.loads(next((tmp / "out").rglob("*.traj")).read_text())
    return requests, traj


PAPER = ("--pgs.input-generator", "--pgs.examples-filter", "--pgs.properties-every-round")
EVERYWHERE = "--pgs.drop-failing-everywhere"
MIDDLE = f"{PROPS}/test_median.py::test_middle"
LOWER = f"{PROPS}/test_median.py::test_lower_middle"
FLOAT = f"{PROPS}/test_median.py::test_a_float"
ONE = f"{PROPS}/test_median.py::test_one_value"
BETWEEN = f"{PROPS}/test_round.py::test_between"
EXAMPLE_TEST = f"{PROPS}/examples/test_examples.py::test_the_issue_example"


def test_the_paper_turns_share_hard_inputs_filter_by_the_issue_and_add_every_round(
    tmp_path: Path,
) -> None:
    requests, traj = run(tmp_path, GENERATOR, *PAPER, EVERYWHERE)
    pgs = traj["pgs"]
    assert [t["why"] for t in pgs["tester_turns"]] == ["inputs", "examples", "first", "round"]
    ablation = pgs["ablation"]
    assert (ablation["inputs"], ablation["examples"], ablation["every_round"]) == (True,) * 3

    # The input generator's file is loaded on the original code; the properties' first
    # message names its hard inputs, and the property that draws them is recorded.
    assert pgs["inputs"]["names"] == {"median.values": 5}
    firsts = [r for r in requests if turn(r["messages"]) == "first"]
    assert 'hard("median.values"' in str(firsts[0]["messages"][1]["content"])
    assert MIDDLE in pgs["inputs"]["used_by"]
    assert not any(turn(r["messages"]) == "inputs" and "hard(" in str(r) for r in firsts)

    # The issue's example is a public test: kept, as it fails on the original code.
    assert pgs["examples"]["kept"] == [EXAMPLE_TEST]

    validation = pgs["validation"]
    dropped = {d["nodeid"]: d["reason"] for d in validation["dropped"]}
    # Held to the issue's stated output, the lower-middle rule fails: dropped, and why.
    assert dropped[LOWER].startswith(f"contradicts the issue's example {EXAMPLE_TEST}")
    assert "stats.median([1, 2, 3, 4]) returns 2.5" in dropped[LOWER]
    # Failing on every input while the right rule holds on some: dropped.
    assert dropped[FLOAT].startswith("fails on every one of the")
    assert f"while {MIDDLE} holds on" in dropped[FLOAT]
    assert validation["kept"][:2] == [MIDDLE, ONE] and BETWEEN in validation["kept"]
    assert validation["oracle"]["oracle"]["installed"] == ["stats.median"]

    first, second = pgs["rounds"]
    # The floored fix fails the right rule; the hard inputs are in its pool.
    assert first["selection"]["result"]["nodeid"] == MIDDLE
    (middle,) = [r for r in first["report"]["results"] if r["nodeid"] == MIDDLE]
    assert middle["hard_inputs"] > 0
    assert "hard" in {p["source"] for p in middle["pool"]}
    # The examples are the filter's, never part of a check.
    assert not any("/examples/" in r["nodeid"] for r in first["report"]["results"])
    # Before the second round's check the Tester added a property; none was dropped.
    assert second["probes"] == [{"new_kept": [BETWEEN], "why": "round"}]
    assert MIDDLE in validation["kept"] and second["verdict"] == "passed"
    assert BETWEEN in {r["nodeid"] for r in second["report"]["results"]}


def test_without_the_settings_the_contradicting_rule_fails_the_right_fix(tmp_path: Path) -> None:
    """The defaults: one Tester turn, no hard inputs (the properties draw their own), no
    examples, no rule of failing everywhere. The rule the issue contradicts and the one no
    input satisfies are kept, as they fail on the original code, and the right fix then fails
    them: the wrong verdict the examples filter spares."""
    own = PROPERTIES.replace("from pgs_inputs import hard\n", "").replace(
        'hard("median.values", VALUES)', "VALUES"
    )
    _, traj = run(tmp_path, GENERATOR, "--rounds", "1", properties=own)
    pgs = traj["pgs"]
    assert [t["why"] for t in pgs["tester_turns"]] == ["first"]
    assert "inputs" not in pgs and "examples" not in pgs
    assert {"inputs", "examples", "every_round"}.isdisjoint(pgs["ablation"])
    validation = pgs["validation"]
    assert validation["kept"] == [MIDDLE, LOWER, FLOAT, ONE] and validation["dropped"] == []
    # The counts the rule of failing everywhere reads are recorded all the same.
    results = {r["nodeid"]: r for r in validation["report"]["results"]}
    assert results[FLOAT]["pool_failed"] == results[FLOAT]["pool_ran"] >= 8
    assert results[MIDDLE]["pool_failed"] < results[MIDDLE]["pool_ran"]
    _, second = pgs["rounds"]
    failing = {r["nodeid"] for r in second["report"]["results"] if r["outcome"] == "failed"}
    assert failing == {LOWER, FLOAT} and pgs["verdict"] == "failed"


def test_the_generator_cannot_change_the_hard_inputs_or_the_issue_examples(
    tmp_path: Path,
) -> None:
    _, traj = run(tmp_path, TAMPERING, *PAPER, "--rounds", "1")
    pgs = traj["pgs"]
    first, second = pgs["rounds"]
    assert first["verdict"] == "failed"
    tampered = {t["path"]: t["change"] for t in second["tampered"]}
    assert tampered == {
        f"{PROPS}/hard_inputs.py": "edited",
        f"{PROPS}/examples/test_examples.py": "edited",
    }
    # The check ran the input generator's hard inputs: the wrong fix still fails on them.
    (middle,) = [r for r in second["report"]["results"] if r["nodeid"] == MIDDLE]
    assert middle["hard_inputs"] > 0 and middle["outcome"] == "failed"
    assert second["verdict"] == "failed"
    why = pgs["verdict_reason"]
    assert "the Generator changed .pgs/properties/examples/test_examples.py (edited), " in why
    assert ".pgs/properties/hard_inputs.py (edited); the check ran the Tester's version" in why


def test_the_paper_turns_are_keys_of_the_report_said_after_the_mode() -> None:
    """Two runs that differ only in the paper's other Tester turns are two rows of `pgs
    report`, each prediction names them only when on, and the table says them after the mode;
    a run recorded before them (no keys) is the row of the defaults."""
    from agent.cli.report import _mode_label
    from agent.pgs.compare import prediction_fields, setting_key
    from agent.pgs.config import PGSConfig, ablation
    from agent.record.pgs import PGSRecord
    from agent.record.trajectory import RunRecord

    plain = ablation(PGSConfig())
    paper = ablation(
        PGSConfig(input_generator=True, examples_filter=True, properties_every_round=True)
    )
    assert plain.model_dump(mode="json") == {
        "mode": "property-min",
        "rounds": 5,
        "filter": True,
        "fresh_probes": 1,
        "shrink": True,
    }
    # Without the filter there are no public tests to hold properties to.
    unfiltered = ablation(PGSConfig(filter=False, examples_filter=True, input_generator=True))
    assert (unfiltered.examples, unfiltered.inputs) == (None, True)
    keys, fields = [], []
    for setting in (plain, paper):
        record = PGSRecord(mode="property-min", ablation=setting)
        fields.append(prediction_fields(RunRecord.load({"pgs": record.model_dump(mode="json")})))
        keys.append(setting_key({"mode": "property-min", **setting.model_dump()}))
    assert keys[0] != keys[1]
    assert not {"pgs_inputs", "pgs_examples", "pgs_every_round"} & set(fields[0])
    assert (fields[1]["pgs_inputs"], fields[1]["pgs_examples"], fields[1]["pgs_every_round"]) == (
        True,
        True,
        True,
    )
    old = RunRecord.load({"pgs": {"mode": "property-min"}, "replay_config": {"pgs": {}}})
    assert "pgs_inputs" not in prediction_fields(old)
    assert _mode_label("pgs", paper.model_dump()) == "pgs +inputs +examples +every round"
    assert _mode_label("pgs", plain.model_dump()) == "pgs"


def test_a_patch_that_swaps_the_shared_hard_inputs_module_fails_the_check(
    tmp_path: Path,
) -> None:
    """The patch adds its own pgs_inputs.py and the module under test puts it in sys.modules:
    the plugin sees the properties' module is not the one in the Tester's folder and says so;
    the check is not passed."""
    _, traj = run(tmp_path, SWAPPED, *PAPER, "--rounds", "0")
    pgs = traj["pgs"]
    (only,) = pgs["rounds"]
    errors = only["report"]["errors"]
    assert any(
        "the shared hard inputs were drawn through pgs_inputs from " in e
        and "/pgs_inputs.py, not the Tester's .pgs/properties/pgs_inputs.py" in e
        for e in errors
    ), errors
    assert only["verdict"] == "failed" and pgs["verdict"] == "failed"
