"""The counterexample pool: every failing input of a property run to the end, each with its
token count, runtime and line coverage, deduplicated by value; the fewest-token one fed back,
shrunk before or after the pick; the pool kept in the record so that Table 1's nine strategies
can be computed from it. Real pytest and Hypothesis: on the host's Python through a local
sandbox, and on the repositories' Python 3.9 (an older Hypothesis) in a Docker sandbox."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.pgs import pgs_pytest_plugin_results as plugin_results
from agent.pgs.feedback import failure_input, select_failure
from agent.pgs.pool import STRATEGIES, candidates, choose, count_pool
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter
from agent.record.check import DRAWN, CheckReport, TestResult
from agent.record.pgs import PGSRecord, RoundRecord
from envs.local import LocalSandbox, LocalSandboxConfig
from tests.support.repos import make_repo

SETTINGS = CheckSettings(python=sys.executable, test_timeout=20, seed=11)
PATH = ".pgs/properties/test_pool.py"

#: The code under test: a branch that only large inputs take (line coverage differs).
CODE = """\
def clamp(x):
    if x > 7:
        y = x - 7
        return 7 + y
    return x


def total(xs):
    out = 0
    for x in xs:
        out += x
    return out
"""

PROPERTIES = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from calc import clamp, total


@pytest.mark.pgs_issue("clamp keeps values at most 4")
@given(st.integers(0, 9))
def test_clamp(x):
    assert clamp(x) <= 4, f"returned {clamp(x)!r}, expected <= 4"


@pytest.mark.pgs_issue("the total stays below 10")
@given(st.lists(st.integers(0, 100), min_size=1))
@example(xs=[50, 50])
def test_total(xs):
    assert total(xs) < 10, f"returned {total(xs)!r}, expected < 10"
"""


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Any]:
    repo = make_repo(tmp_path / "repo", {"calc.py": CODE})
    with LocalSandbox(repo, LocalSandboxConfig()) as sandbox:
        yield sandbox


def _run(sandbox: Any, name: str, settings: CheckSettings = SETTINGS) -> TestResult:
    sandbox.write_file(PATH, PROPERTIES)
    report = run_pytest(sandbox, [f"{PATH}::{name}"], settings=settings, timeout=300)
    count_pool(report, SimpleCounter())
    (result,) = report.results
    assert result.failed and bool(result.pool) == settings.pool, result
    return result


def _value(example: str | None) -> Any:
    assert example is not None
    return ast.literal_eval(failure_input_text(example).split("=", 1)[1])


def failure_input_text(example: str) -> str:
    return re.sub(r"^\w+\((.*)\)$", r"\1", example, flags=re.DOTALL)


def test_the_pool_holds_every_failing_value_once_with_its_three_measures(local: Any) -> None:
    result = _run(local, "test_clamp")
    values = [_value(p.example) for p in result.pool]
    # Every failing value of the domain (5..9) is in the pool, each once: Hypothesis draws
    # them again and again in 64 inputs, the pool keeps one of each.
    assert sorted(values) == [5, 6, 7, 8, 9]
    assert {p.source for p in result.pool} <= {"generated", "shrinking", "shrunk"}
    assert any(p.source == "generated" for p in result.pool)
    for pooled in result.pool:
        assert pooled.category == "property_violation" and not pooled.explicit
        assert pooled.runtime is not None and pooled.runtime >= 0
        assert pooled.tokens == SimpleCounter().count(failure_input(result, pooled)) == 3
        assert pooled.returned and pooled.returned.startswith("returned ")
    # Line coverage of the repository's code, not of the test: 8 and 9 take the branch.
    lines = {_value(p.example): p.lines for p in result.pool}
    assert result.pool_lines_by in ("coverage.py", "settrace")
    assert lines[5] == lines[6] == lines[7] == 2  # `if x > 7`, `return x`
    assert lines[8] == lines[9] == 3  # `if x > 7`, `y = x - 7`, `return 7 + y`
    assert result.pool_note is None


def test_the_pool_pass_runs_the_inputs_past_the_first_failure_and_the_fewest_tokens_win(
    local: Any,
) -> None:
    result = _run(local, "test_total")
    drawn = [p for p in result.pool if p.source in DRAWN]
    explicit = [p for p in result.pool if p.source == "explicit"]
    assert [_value(p.example) for p in explicit] == [[50, 50]]
    assert explicit[0].category == "wrong_answer" and explicit[0].explicit
    generated = [p for p in drawn if p.source == "generated"]
    # Far more than one shrink path: the pool pass ran the other generated inputs too.
    assert len(generated) >= 10
    assert len({p.example for p in result.pool}) == len(result.pool)  # distinct values
    assert all(p.lines is not None and p.lines >= 3 for p in result.pool)
    # The feedback chooses among all of them: the fewest tokens wins...
    report = CheckReport(results=[result])
    chosen = select_failure(report, "property-min", SimpleCounter())
    assert chosen is not None and chosen.input == "xs=[10]"  # Hypothesis's shrunk input
    violations = [f for f in result.failing_inputs() if f.category == "property_violation"]
    assert chosen.candidates == len(violations) > len(result.examples)
    # ...and a counter that prefers long inputs picks one only the pool pass found.
    longest = select_failure(report, "property-min", LongIsCheap())
    assert longest is not None
    pooled_only = {failure_input(result, p) for p in result.pooled_inputs()}
    assert longest.input in pooled_only


class LongIsCheap:
    name = "long-is-cheap"

    def count(self, text: str) -> int:
        return 10_000 - len(text)


def test_shrink_then_pick_shrinks_the_first_failure_pick_then_shrink_the_fewest_token_one(
    local: Any,
) -> None:
    first = _run(local, "test_total")
    assert first.pool_note is None
    sources = [p.source for p in first.pool]
    # The run shrank its first failing input; the pool pass came after.
    assert sources[0] == "explicit" and sources[1] == "generated" and "shrunk" in sources
    assert sources.index("shrunk") < max(i for i, s in enumerate(sources) if s == "generated")

    picked = _run(
        local, "test_total", SETTINGS.model_copy(update={"shrink_order": "pick-then-shrink"})
    )
    assert picked.pool_note is not None
    match = re.fullmatch(r"pick-then-shrink: picked (.*)", picked.pool_note)
    assert match is not None
    # The picked input is the generated one with the fewest tokens (the plugin's simple rule).
    generated = [p for p in picked.pool if p.source == "generated"]

    def simple(text: str) -> tuple[int, int, str]:
        return plugin_results.simple_tokens(text), len(text), text

    fewest = min(generated, key=lambda p: simple(p.example or ""))
    assert match.group(1) == fewest.example
    # The explicit example failed first, as before; the search after it did not shrink, the
    # pool pass ran every input; then the picked input was shrunk, to what is fed back.
    assert picked.explicit and picked.example == "test_total(xs=[50, 50])"
    shrunk = picked.examples[1]
    assert _value(shrunk.example) == [10]
    sources = [p.source for p in picked.pool]
    shrink = min(i for i, s in enumerate(sources) if s in ("shrinking", "shrunk"))
    assert set(sources[:shrink]) == {"explicit", "generated"}
    assert shrink > picked.pool.index(generated[-1]) and sources[-1] == "shrunk"
    chosen = select_failure(CheckReport(results=[picked]), "property-min", SimpleCounter())
    assert chosen is not None and chosen.input == "xs=[10]"

    # Without shrinking, neither order shrinks anything.
    for order in ("shrink-then-pick", "pick-then-shrink"):
        settings = SETTINGS.model_copy(update={"shrink": False, "shrink_order": order})
        plain = _run(local, "test_total", settings)
        assert {p.source for p in plain.pool} <= set(DRAWN), order
        assert plain.pool_note is None


def test_without_the_pool_pass_the_pool_is_empty(local: Any) -> None:
    result = _run(local, "test_total", SETTINGS.model_copy(update={"pool": False}))
    assert result.pool == [] and result.examples


def test_the_record_keeps_the_pool_and_every_strategy_is_computed_from_it(local: Any) -> None:
    result = _run(local, "test_total")
    report = CheckReport(results=[result], pool_counter=SimpleCounter.name)
    record = PGSRecord(mode="property-min", rounds=[RoundRecord(round=1, report=report)])
    loaded = PGSRecord.model_validate_json(record.model_dump_json())
    again = loaded.rounds[0].report
    assert again is not None and again.pool_counter == "simple"
    assert again.results[0].pool == result.pool
    assert [p.model_dump() for p in again.results[0].pool] == [p.model_dump() for p in result.pool]
    pool = candidates(again)
    assert pool and all(p.source in DRAWN and p.category == "property_violation" for _, p in pool)
    chosen = {f"{f}-{s}": choose(pool, f, s) for f, s in STRATEGIES}
    assert all(c is not None for c in chosen.values())
    tokens = {name: c[1].tokens for name, c in chosen.items() if c is not None}
    assert tokens["tokens-min"] == min(p.tokens or 0 for _, p in pool)
    assert tokens["tokens-max"] == max(p.tokens or 0 for _, p in pool)
    assert tokens["tokens-min"] <= tokens["tokens-median"] <= tokens["tokens-max"]
    runtimes = sorted(p.runtime or 0 for _, p in pool)
    picked = chosen["runtime-max"]
    assert picked is not None and picked[1].runtime == runtimes[-1]


def test_no_line_coverage_under_another_tracer_says_why(tmp_path: Path) -> None:
    previous = sys.gettrace()
    sys.settrace(lambda *_: None)
    try:
        counter = plugin_results.LineCounter(str(tmp_path), str(tmp_path / "test_x.py"))
    finally:
        sys.settrace(previous)
    assert counter.tool is None and counter.why and "another tracer" in counter.why
    ran: list[int] = []
    assert counter.measure(lambda: ran.append(1)) is None and ran == []  # not run for nothing
    measured = plugin_results.LineCounter(str(tmp_path), str(tmp_path / "test_x.py"))
    assert measured.tool in ("coverage.py", "settrace") and measured.why is None


@pytest.mark.docker
def test_the_pool_and_both_orders_work_on_python_3_9_too(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
    from envs.images import build_repo_image

    path = make_repo(tmp_path_factory.mktemp("pool") / "pool", {"calc.py": CODE})
    image = build_repo_image(path).tag
    settings = SETTINGS.model_copy(update={"python": "python3"})
    with DockerSandbox(DockerSandboxConfig(image=image)) as box:
        clamp = _run(box, "test_clamp", settings)
        assert sorted(_value(p.example) for p in clamp.pool) == [5, 6, 7, 8, 9]
        lines = {_value(p.example): p.lines for p in clamp.pool}
        assert lines[5] == 2 and lines[9] == 3
        assert all(p.runtime is not None and p.tokens == 3 for p in clamp.pool)
        total = _run(box, "test_total", settings)
        assert len([p for p in total.pool if p.source == "generated"]) >= 10
        picked = _run(
            box, "test_total", settings.model_copy(update={"shrink_order": "pick-then-shrink"})
        )
        assert picked.pool_note and picked.pool_note.startswith("pick-then-shrink: picked ")
        assert _value(picked.examples[1].example) == [10]


def test_a_run_records_the_pool_and_the_bench_compares_the_nine_strategies_over_it(
    tmp_path: Path,
) -> None:
    """The recorded demo, run for real in the local sandbox (its first candidate is wrong): the
    .traj keeps every pooled input with its three measures; bench/feedback.py --quick reads it
    beside the checks it runs itself."""
    import subprocess

    from agent.record.trajectory import RunRecord
    from tests.support.textutil import pgs_env

    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "demo", "--quiet", "--sandbox", "local"],
        cwd=tmp_path,
        env=pgs_env(DOCKER_HOST="unix:///nonexistent/pgs-pool-test.sock"),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    runs = tmp_path / "trajectories"
    record = RunRecord.read(runs / "demo" / "stats__issue" / "stats__issue.traj").pgs_record
    first = record.rounds[0].report
    assert first is not None and record.rounds[0].verdict == "failed"
    (failed,) = first.failures()
    assert len({p.example for p in failed.pool}) == len(failed.pool) >= 10
    assert record.tokenizer is not None and first.pool_counter == record.tokenizer.counter
    for pooled in failed.pool:
        assert pooled.tokens is not None and pooled.tokens > 0
        assert pooled.runtime is not None and pooled.lines is not None and pooled.lines > 0
    # The validation's inputs are fed again; whether one still fails on this wrong candidate
    # depends on what the validation drew (the check's seed is new each run), so a pooled
    # input labelled "replayed" is not certain, only that they ran.
    assert failed.replayed
    assert record.validation is not None and record.validation.report is not None
    assert any(r.pool for r in record.validation.report.results)

    root = Path(__file__).parents[2]
    bench = subprocess.run(
        [sys.executable, "bench/feedback.py", "--strategies", "--quick", "--runs", str(runs)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bench.returncode == 0, bench.stderr
    lines = bench.stdout.strip().splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:11]}
    assert list(rows) == [f"{f}-{s}" for f, s in STRATEGIES] + ["pgs"]
    assert rows["tokens-min"][4] == "1.00"  # the fewest-token choice against itself
    # The validation's report and the two rounds' (the second passed: it pooled nothing).
    assert "(3 from recorded runs)" in bench.stdout
    assert re.fullmatch(r"strategy_cost_over_fewest=\d+\.\d\d", lines[-1])
    assert float(lines[-1].split("=")[1]) >= 1.0


def test_the_shrink_order_is_an_ablation_key_of_the_ladder_and_the_report() -> None:
    from agent.cli.ladder import ROWS, check_config
    from agent.errors import InputError
    from agent.pgs.compare import prediction_fields, setting_key
    from agent.pgs.config import ablation
    from agent.record.trajectory import RunRecord
    from agent.run.config import RunConfig

    config = RunConfig.model_validate({"model": {"name": "m"}})
    pgs, picked = ROWS["pgs"], ROWS["pick-then-shrink"]
    assert picked.config(config).pgs.check.shrink_order == "pick-then-shrink"
    assert pgs.config(config).pgs.check.shrink_order == "shrink-then-pick"
    first, second = (ablation(row.config(config).pgs) for row in (pgs, picked))
    # The default order is recorded as before (nothing), so old row folders still resume.
    assert first.shrink_order is None and "shrink_order" not in first.model_dump(mode="json")
    assert second.shrink_order == "pick-then-shrink" and first != second
    check_config(config, [pgs, picked])  # two distinct rows
    own = config.model_copy(deep=True)
    own.pgs.check = own.pgs.check.model_copy(update={"shrink_order": "pick-then-shrink"})
    own.pgs.check.model_fields_set.add("shrink_order")
    with pytest.raises(InputError, match=r"check\.shrink_order is set by each row"):
        check_config(own, [pgs, picked])
    # Without shrinking, the order is no setting of its own.
    off = picked.config(config).pgs.model_copy(
        update={"check": CheckSettings(shrink=False, shrink_order="pick-then-shrink")}
    )
    assert ablation(off).shrink_order is None
    # pgs report keeps the two apart: the prediction says the order only when it is not the
    # default, and the rows' keys differ.
    keys = []
    for setting in (first, second):
        record = PGSRecord(mode="property-min", ablation=setting)
        fields = prediction_fields(RunRecord.load({"pgs": record.model_dump(mode="json")}))
        assert fields.get("pgs_shrink_order") == setting.shrink_order
        keys.append(setting_key({"mode": "property-min", **setting.model_dump()}))
    assert keys[0] != keys[1]
