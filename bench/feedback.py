"""Feedback size and check time on a fixed set of failing candidates.

    .venv/bin/python bench/feedback.py [--repeat 3] [--max-examples 100] [--test-timeout 3]

Candidates (wrong fixes of the planted bugs; all fail their checks):

- dedupe/sorted-set: ``tests/support/example_repos.DEDUPE``'s wrong patch (loses the order);
- dedupe/crash-on-empty: a fix that reads ``xs[0]`` first (IndexError on ``[]``), built here;
- rle/hang: ``RLE``'s wrong patch (a count of ten or more never ends the loop);
- median/unsorted-middle: the demo's first candidate (``agent/examples/median/replay.yaml``),
  checked with the properties the demo's Tester writes;
- dedupe/explicit-example: a fix that special-cases the issue's own example, checked with a
  property whose explicit ``@example`` (fourteen elements) fails too: Hypothesis stops there,
  the plugin searches on and the feedback shows the shrunk two-element input
  (``tests/pgs/test_pgs_examples.py``).

For each, in one process and a real DockerSandbox of the repository's image (Python 3.9): the
properties are written and validated on the original code, the related repository tests get
their baseline, then the candidate is applied and checked ``--repeat`` times with
:func:`agent.pgs.check.check_candidate` (kept properties plus related tests, one pytest run); the
first check in the container is reported apart from the warm median.

Tokens, each counted by every counter side by side: the simple regex rule
(:class:`agent.pgs.tokens.SimpleCounter`, the fallback and ``pgs report``'s count), tiktoken's
o200k_base (gpt-4o) and cl100k_base (gpt-4), read offline, and each ``--hf tokenizer.json``
given (a Hugging Face tokenizer of an open model):

- ours: the property-min message (:func:`select_failure` + :func:`render_feedback`);
- raw: the raw pytest output of the SAME failure, as ``--feedback io`` renders it;
- io: what ``--feedback io`` really sends (the first failing test, maybe another failure);
- run: the whole stdout of pytest on the same targets, the same failing run (what the
  Generator reads if it runs the checks itself).

``--strategies`` instead compares the nine ways of choosing the counterexample of the PGS
paper's Table 1: it runs ``bench/strategies.py`` with the other arguments (``--quick``,
``--runs``, ``--seeds``, ``--verified``...; see there).

Printed: per counter, the median tokens of our message and its ratios; ``feedback_tokens_<counter>
=<median tokens of our message>`` for each counter and ``tokenizer_over_simple=<median of
tiktoken o200k / simple tokens of our message>``; ``raw_token_ratio=<raw / ours, median over the
candidates>`` (the figure this bench reported first, target >= 5), then, last line,
``feedback_token_ratio=<run / ours, median over the candidates>``: our message against pytest's
whole output for the same failing run (simple counter).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The project's root instead of this folder: bench/select.py would stand in for the standard
# library's select module.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
with contextlib.suppress(ValueError):  # imported by bench/strategies.py: removed already
    sys.path.remove(str(Path(__file__).resolve().parent))

import shlex

from agent.cli import EXAMPLES, make_example_repo
from agent.errors import TokenizerUnavailable
from agent.pgs.check import check_candidate
from agent.pgs.feedback import render_feedback, select_failure
from agent.pgs.related import changed_files, related_tests
from agent.pgs.runner import CheckSettings, install_plugin, run_pytest
from agent.pgs.tokens import HfCounter, SimpleCounter, TiktokenCounter, TokenCounter
from agent.pgs.validate import validate_properties
from agent.record.check import CheckReport
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.images import build_repo_image
from tests.pgs.test_pgs_examples import PROPERTY as EXPLICIT_PROPERTY
from tests.pgs.test_pgs_examples import PROPERTY_FILE, SPECIAL_CASED
from tests.support.example_repos import DEDUPE, RLE, ExampleRepo, unified_patch

PROPERTIES = ".pgs/properties"
ROUNDS = 5


@dataclass
class Candidate:
    name: str
    patch: str


@dataclass
class Repository:
    """A repository to build an image of, its issue, the Tester's files and the candidates."""

    name: str
    make: Any  # (path) -> Path: the repository, committed
    issue: str
    properties: dict[str, str]
    candidates: list[Candidate] = field(default_factory=list)


@dataclass
class Row:
    candidate: str
    category: str
    input: str
    ours: dict[str, int]
    raw: dict[str, int]
    io: dict[str, int]
    run: dict[str, int]
    first_check: float
    warm_check: float
    results: int


# -- the candidates ---------------------------------------------------------------------------

_DEDUPE_CRASH = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    seen = {xs[0]}
    out = [xs[0]]
    for x in xs[1:]:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
'''


def _example_properties(repo: ExampleRepo, roles: tuple[str, ...]) -> dict[str, str]:
    return {repo.property_path(role): repo.properties[role] for role in roles}


def _median_repository() -> Repository:
    """The demo: its Tester's property file and its Generator's first (wrong) edit."""
    steps = yaml.safe_load((EXAMPLES / "median" / "replay.yaml").read_text())["steps"]
    calls = [call["arguments"] for step in steps for call in step.get("tool_calls", [])]
    created = next(a for a in calls if a.get("command") == "create")
    edit = next(a for a in calls if a.get("command") == "str_replace")
    original = (EXAMPLES / "median" / "repo" / "stats.py").read_text()
    wrong = original.replace(edit["old_str"], edit["new_str"])
    assert wrong != original
    return Repository(
        name="median",
        make=lambda path: make_example_repo(path),
        issue=(EXAMPLES / "median" / "issue.md").read_text(),
        properties={created["path"].removeprefix("/repo/"): created["file_text"]},
        candidates=[
            Candidate("median/unsorted-middle", unified_patch("stats.py", original, wrong))
        ],
    )


def repositories() -> list[Repository]:
    roles = ("issue_sound", "issue_generated", "regression_sound")
    return [
        Repository(
            name="dedupe",
            make=DEDUPE.make,
            issue=DEDUPE.issue,
            properties=_example_properties(DEDUPE, roles),
            candidates=[
                Candidate("dedupe/sorted-set", DEDUPE.wrong_patch),
                Candidate(
                    "dedupe/crash-on-empty",
                    unified_patch(DEDUPE.module, DEDUPE.files[DEDUPE.module], _DEDUPE_CRASH),
                ),
            ],
        ),
        Repository(
            name="rle",
            make=RLE.make,
            issue=RLE.issue,
            properties=_example_properties(RLE, roles),
            candidates=[Candidate("rle/hang", RLE.wrong_patch)],
        ),
        _median_repository(),
        Repository(
            name="dedupe",
            make=DEDUPE.make,
            issue=DEDUPE.issue,
            properties={PROPERTY_FILE: EXPLICIT_PROPERTY},
            candidates=[
                Candidate(
                    "dedupe/explicit-example",
                    unified_patch(DEDUPE.module, DEDUPE.files[DEDUPE.module], SPECIAL_CASED),
                )
            ],
        ),
    ]


# -- measuring --------------------------------------------------------------------------------


def counters(hf: list[str]) -> list[TokenCounter]:
    """The simple rule first, then every real tokenizer that loads (none is downloaded)."""
    found: list[TokenCounter] = [SimpleCounter()]
    loaders = [lambda: TiktokenCounter("gpt-4o"), lambda: TiktokenCounter("gpt-4")]
    loaders += [lambda path=path: HfCounter(path) for path in hf]  # type: ignore[misc]
    for load in loaders:
        try:
            found.append(load())
        except TokenizerUnavailable as e:
            print(f"tokenizer not used: {e}")
    return found


def count(text: str, using: list[TokenCounter]) -> dict[str, int]:
    return {c.name: c.count(text) for c in using}


def measure(
    repository: Repository, settings: CheckSettings, repeat: int, using: list[TokenCounter]
) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pgs-bench-") as tmp:
        path = repository.make(Path(tmp) / repository.name)
        image = build_repo_image(path).tag  # cached by content after the first build
    with DockerSandbox(DockerSandboxConfig(image=image)) as box:
        for name, text in repository.properties.items():
            box.write_file(name, text)
        original = run_pytest(box, [PROPERTIES], settings=settings, timeout=settings.run_timeout)
        kept, dropped = validate_properties(original, repository.issue)
        assert kept and not dropped, f"{repository.name}: kept {kept}, dropped {dropped}"
        for candidate in repository.candidates:
            tests = related_tests(box, changed_files(candidate.patch))
            baseline = run_pytest(box, tests, settings=settings, timeout=settings.run_timeout)
            box.write_file("/tmp/candidate.patch", candidate.patch)
            applied = box.run("git apply /tmp/candidate.patch")
            assert applied.ok, applied.output
            times, reports = [], []
            for _ in range(repeat):
                started = time.perf_counter()
                reports.append(
                    check_candidate(
                        box,
                        properties=kept,
                        repo_tests=tests,
                        baseline=baseline,
                        settings=settings,
                    )
                )
                times.append(time.perf_counter() - started)
            run = whole_run(box, [*kept, *tests], settings)
            assert box.run("git checkout -q -- .").ok
            rows.append(feedback_row(candidate.name, reports[-1], times, run, using))
    return rows


def whole_run(box: DockerSandbox, targets: list[str], settings: CheckSettings) -> str:
    """pytest's own output for the targets; the plugin is loaded (it writes a report nobody
    reads) for its per-test time limit, without which the hang would run to the end."""
    folder = install_plugin(box)
    env = {
        "PGS_REPORT": f"{folder}/bench-report.json",
        "PGS_MAX_EXAMPLES": str(settings.max_examples),
        "PGS_TEST_TIMEOUT": f"{settings.test_timeout:g}",
        "HYPOTHESIS_STORAGE_DIRECTORY": f"{folder}/hypothesis",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": folder,
    }
    command = "python3 -m pytest -p pgs_pytest_plugin -p no:cacheprovider -- " + " ".join(
        shlex.quote(t) for t in targets
    )
    return box.run(command, timeout=settings.run_timeout, env=env).output


SHOW = False


def feedback_row(
    name: str, report: CheckReport, times: list[float], run: str, using: list[TokenCounter]
) -> Row:
    chosen = select_failure(report, "property-min", SimpleCounter())
    assert chosen is not None, f"{name}: the candidate passed its checks"
    ours = render_feedback(chosen, "property-min", 1, ROUNDS)
    same = chosen.model_copy(update={"mode": "io"})
    raw = render_feedback(same, "io", 1, ROUNDS)
    if SHOW:
        print(f"--- {name}: ours ---\n{ours}\n--- {name}: raw (io rendering) ---\n{raw}\n")
    first = select_failure(report, "io", SimpleCounter())
    assert first is not None
    sent = render_feedback(first, "io", 1, ROUNDS)
    warm = times[1:] or times
    return Row(
        candidate=name,
        category=chosen.category,
        input=chosen.input,
        ours=count(ours, using),
        raw=count(raw, using),
        io=count(sent, using),
        run=count(run, using),
        first_check=times[0],
        warm_check=statistics.median(warm),
        results=len(report.results),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="checks per candidate (>= 2)")
    parser.add_argument("--max-examples", type=int, default=64, help="Hypothesis examples")
    parser.add_argument(
        "--hf",
        action="append",
        default=[],
        metavar="TOKENIZER_JSON",
        help="also count with this Hugging Face tokenizer.json (repeatable)",
    )
    parser.add_argument(
        "--test-timeout", type=float, default=3.0, help="time limit per test (the hang hits it)"
    )
    parser.add_argument("--show", action="store_true", help="print both messages per candidate")
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="compare Table 1's nine ways of choosing from the pool: bench/strategies.py",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a run for CI, its figures mean nothing: two checks per candidate of 16 inputs",
    )
    if "--strategies" in sys.argv[1:]:
        from bench.strategies import main as strategies

        strategies([a for a in sys.argv[1:] if a != "--strategies"])
        return
    args = parser.parse_args()
    if args.quick:
        args.repeat, args.max_examples = 2, 16
    global SHOW
    SHOW = args.show
    settings = CheckSettings(
        max_examples=args.max_examples, test_timeout=args.test_timeout, run_timeout=300
    )
    using = counters(args.hf)
    rows = [row for repo in repositories() for row in measure(repo, settings, args.repeat, using)]

    simple = SimpleCounter.name
    print(
        f"{'candidate':<25}{'category':<20}{'ours':>6}{'raw':>6}{'io':>6}{'run':>6}"
        f"{'raw/ours':>10}{'run/ours':>10}{'check 1st s':>13}{'warm s':>8}  input"
    )
    for r in rows:
        print(
            f"{r.candidate:<25}{r.category:<20}{r.ours[simple]:>6}{r.raw[simple]:>6}"
            f"{r.io[simple]:>6}{r.run[simple]:>6}{r.raw[simple] / r.ours[simple]:>10.2f}"
            f"{r.run[simple] / r.ours[simple]:>10.2f}{r.first_check:>13.2f}"
            f"{r.warm_check:>8.2f}  {r.input[:60]}"
        )
    print(f"{'counter':<28}{'ours median':>12}{'raw/ours':>10}{'run/ours':>10}  ours per candidate")
    for counter in using:
        key = counter.name
        ours = [r.ours[key] for r in rows]
        raw = statistics.median(r.raw[key] / r.ours[key] for r in rows)
        run = statistics.median(r.run[key] / r.ours[key] for r in rows)
        print(f"{key:<28}{statistics.median(ours):>12g}{raw:>10.2f}{run:>10.2f}  {ours}")
    print(
        f"tokens: {simple} counter; ours = property-min message, raw = io rendering of the same "
        "failure, io = what --feedback io sends (first failing test), run = pytest's whole "
        "stdout on the same targets (the same failing run)"
    )
    print(
        f"checks: max_examples={settings.max_examples}, test_timeout={settings.test_timeout:g}s, "
        f"warm = median of {max(args.repeat - 1, 1)} checks after the first, same container"
    )
    for counter in using:
        label = re.sub(r"\W+", "_", counter.name).strip("_")
        print(f"feedback_tokens_{label}={statistics.median(r.ours[counter.name] for r in rows):g}")
    real = next((c.name for c in using if c.name == "tiktoken:o200k_base"), None)
    if real is not None:
        over = statistics.median(r.ours[real] / r.ours[simple] for r in rows)
        print(f"tokenizer_over_simple={over:.2f}")
    raw_ratio = statistics.median(r.raw[simple] / r.ours[simple] for r in rows)
    print(f"raw_token_ratio={raw_ratio:.2f}")
    ratio = statistics.median(r.run[simple] / r.ours[simple] for r in rows)
    print(f"feedback_token_ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
