"""Table 1 of the PGS paper: the nine ways of choosing the counterexample fed back, compared.

    .venv/bin/python bench/strategies.py [--quick] [--seeds 5] [--runs FOLDER ...]
        [--verified RECORDS.jsonl --repos-dir DIR [--instances ID ...] [--python-map A=B]]

(``bench/feedback.py --strategies`` runs this with the same arguments.)

The strategies: line coverage, runtime and token count of the input, each min / median / max
(:mod:`agent.pgs.pool`), over the counterexample pools found in

- every check report (each round's and the validation's) of the ``.traj`` files under each
  ``--runs`` folder;
- the bundled candidates of ``bench/feedback.py`` checked here with their scripted Tester's
  properties (in a local sandbox on this Python, one check per ``--seeds`` seed; ``--quick``:
  one seed, 32 inputs, well under a minute);
- with ``--verified``: real SWE-bench Verified records, the record's FAIL_TO_PASS tests
  standing in for the properties (as ``bench/check.py`` does). Per record, in a container of
  its instance image (built, or reused by tag, with ``agent.swebench.Environments``; the
  network off), the record's ``test_patch`` is applied to the ORIGINAL code and the
  FAIL_TO_PASS tests run once with ``CheckSettings.pool_tests`` (the plugin's
  ``PGS_POOL_TESTS=1``): each failing test pools one input, itself (its node id, its
  runtime, the repository lines it runs). The original code, not a wrong candidate patch,
  stands for "the failing candidate": every record has it and fails every one of its
  FAIL_TO_PASS tests there (by the dataset's definition), so the pool is the largest the
  record can give, and a strategy can only differ from another on a pool of two or more; a
  real unresolved patch (``candidates-dev.json``) exists for a third of the records, usually
  passes some FAIL_TO_PASS tests, and often fails only by breaking a PASS_TO_PASS test, which
  leaves no pool of issue tests at all.

For each strategy: the checks it chose in, the median tokens of the input it picks and of the
property-min feedback message rendered from it, the ratio of that message's median to the
fewest-token choice's (Table 1's cost column), and the median runtime and lines of what it
picks; then pgs's own choice (the fewest tokens among the pool and the shrunk inputs). The
Verified records get one line each (tests, failing, pool size) and two tables: every record
with a pool, and those whose pool holds two inputs or more (where the choice matters).

Last line ``strategy_cost_over_fewest=<the largest median message cost of a strategy / that
of tokens-min>`` (of the bundled and recorded checks); with ``--verified`` it is followed by
``verified_cost_over_fewest=<the same, over the Verified records with pools of two or more>``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
with contextlib.suppress(ValueError):  # bench/select.py would stand in for the stdlib's select
    sys.path.remove(str(Path(__file__).resolve().parent))

from agent.pgs.feedback import render_feedback, select_failure
from agent.pgs.pool import STRATEGIES, candidates, choose, count_pool, selection_of, strategy_name
from agent.pgs.runner import CheckSettings, run_pytest
from agent.pgs.tokens import SimpleCounter, TokenCounter
from agent.pgs.validate import validate_properties
from agent.record.check import CheckReport
from agent.record.trajectory import RunRecord
from agent.swebench import TESTBED, Environments, Instance, load_instances, parse_python_map
from bench.check import issue_node_ids
from bench.feedback import PROPERTIES, ROUNDS, repositories
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.local import LocalSandbox, LocalSandboxConfig

PATCH = "/tmp/pgs-bench-strategies.patch"


@dataclass
class Choice:
    """What one strategy picked in one check."""

    input_tokens: int
    message_tokens: int
    runtime: float | None
    lines: int | None


# -- the checks -------------------------------------------------------------------------------


def local_checks(seeds: list[int], max_examples: int) -> list[CheckReport]:
    """Every bundled candidate checked in a local sandbox (this Python), once per seed: its
    properties validated on the original code, the kept ones run on the candidate."""
    reports = []
    for repository in repositories():
        with tempfile.TemporaryDirectory(prefix="pgs-bench-") as tmp:
            path = repository.make(Path(tmp) / repository.name)
            with LocalSandbox(path, LocalSandboxConfig()) as box:
                for name, text in repository.properties.items():
                    box.write_file(name, text)
                for seed in seeds:
                    settings = CheckSettings(
                        python=sys.executable,
                        max_examples=max_examples,
                        test_timeout=2,
                        run_timeout=120,
                        seed=seed,
                    )
                    original = run_pytest(box, [PROPERTIES], settings=settings, timeout=120)
                    kept, _ = validate_properties(original, repository.issue)
                    for candidate in repository.candidates:
                        # In this run's own folder: a local sandbox's /tmp is the host's, which
                        # another bench (or test worker) running at once writes too.
                        patch = Path(tmp) / "candidate.patch"
                        patch.write_text(candidate.patch)
                        applied = box.run(f"git apply {shlex.quote(str(patch))}")
                        assert applied.ok, applied.output
                        reports.append(run_pytest(box, kept, settings=settings, timeout=120))
                        assert box.run("git checkout -q -- .").ok
    return reports


def recorded_checks(folders: list[Path]) -> list[CheckReport]:
    """The check reports of every ``.traj`` under ``folders``: each round's, the validation's."""
    reports = []
    for folder in folders:
        for path in sorted(folder.glob("**/*.traj")):
            record = RunRecord.read(path).pgs_record
            validation = record.validation
            if validation is not None and validation.report is not None:
                reports.append(validation.report)
            reports += [r.report for r in record.rounds if r.report is not None]
    return reports


def verified_check(instance: Instance, envs: Environments, settings: CheckSettings) -> CheckReport:
    """The record's FAIL_TO_PASS tests on the original code (its ``test_patch`` applied), each
    failing one pooled as one input (``pool_tests``)."""
    image = envs.image(instance)
    config = DockerSandboxConfig(image=image.tag, repo_path=TESTBED, network=False)
    with DockerSandbox(config) as box:
        box.write_file(PATCH, instance.test_patch)
        applied = box.run(f"git apply --whitespace=nowarn {PATCH}")
        if not applied.ok:
            raise RuntimeError(f"the test_patch does not apply: {applied.output[-500:]}")
        tests = issue_node_ids(instance, box)
        return run_pytest(box, tests, settings=settings, timeout=settings.run_timeout)


def verified_checks(
    path: Path, repos_dir: Path, wanted: list[str], python_map: list[str]
) -> list[tuple[str, CheckReport]]:
    """Each record's check (a record that cannot be checked is reported and left out)."""
    settings = CheckSettings(pool_tests=True)
    envs = Environments(repos_dir, parse_python_map(python_map))
    found = []
    instances = load_instances(path)
    if wanted:  # in the order given
        instances = sorted(
            (i for i in instances if i.instance_id in wanted),
            key=lambda i: wanted.index(i.instance_id),
        )
    for instance in instances:
        started = time.monotonic()
        try:
            report = verified_check(instance, envs, settings)
        except Exception as e:  # one record's problem is reported, the others still run
            print(f"{instance.instance_id}: failed: {str(e)[:300]}", flush=True)
            continue
        pool = candidates(report)
        failing = report.failures()
        categories = sorted({p.category for r in failing for p in r.pool})
        print(
            f"{instance.instance_id}: {len(report.results)} FAIL_TO_PASS tests run, "
            f"{len(failing)} failing, pool {len(pool)} ({', '.join(categories) or 'empty'}; "
            f"lines by {next((r.pool_lines_by for r in failing if r.pool_lines_by), '-')}), "
            f"{time.monotonic() - started:.0f} s",
            flush=True,
        )
        found.append((instance.instance_id, report))
    return found


# -- the choices ------------------------------------------------------------------------------


def choices(report: CheckReport, counter: TokenCounter) -> dict[str, Choice]:
    """Each strategy's pick in one check (none when the check pooled nothing), and pgs's."""
    if report.pool_counter != counter.name:
        count_pool(report, counter)
    pool = candidates(report)
    if not pool:
        return {}
    picked: dict[str, Choice] = {}
    for feature, statistic in STRATEGIES:
        chosen = choose(pool, feature, statistic)
        if chosen is None:
            continue
        name = strategy_name(feature, statistic)
        selection = selection_of(chosen, counter, candidates=len(pool), why=name)
        message = render_feedback(selection, "property-min", 1, ROUNDS)
        picked[name] = Choice(
            selection.tokens, counter.count(message), chosen[1].runtime, chosen[1].lines
        )
    ours = select_failure(report, "property-min", counter)
    if ours is not None:
        message = render_feedback(ours, "property-min", 1, ROUNDS)
        # The measures of the input fed back: its entry in the pool (a shrunk one is there too).
        # A plain test's own failure has no example: its pool entry is the node id.
        shown = ours.chosen.example or ours.result.nodeid
        same = [p for p in ours.result.pool if _squeezed(p.example) == _squeezed(shown)]
        runtime = same[0].runtime if same else None
        picked["pgs"] = Choice(
            ours.tokens, counter.count(message), runtime, same[0].lines if same else None
        )
    return picked


def _squeezed(text: str | None) -> str:
    return re.sub(r"\s+", "", text or "")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _shown(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(reports: list[CheckReport], counter: TokenCounter) -> tuple[int, float, dict[str, float]]:
    """Print the strategies' table over ``reports``; the checks with a pool, the largest
    ratio of a strategy's median message to the fewest-token choice's, each one's median."""
    per_check = [c for c in (choices(r, counter) for r in reports) if c]
    names = [strategy_name(f, s) for f, s in STRATEGIES] + ["pgs"]
    fewest = _median([c["tokens-min"].message_tokens for c in per_check if "tokens-min" in c])
    print(
        f"{'strategy':<16}{'checks':>7}{'input tok':>11}{'message tok':>13}{'vs tokens-min':>15}"
        f"{'runtime ms':>12}{'lines':>7}"
    )
    worst = 1.0
    costs: dict[str, float] = {}
    for name in names:
        picks = [c[name] for c in per_check if name in c]
        tokens = _median([p.input_tokens for p in picks])
        cost = _median([p.message_tokens for p in picks])
        runtime = _median([p.runtime * 1000 for p in picks if p.runtime is not None])
        lines = _median([p.lines for p in picks if p.lines is not None])
        ratio = cost / fewest if cost is not None and fewest else None
        if cost is not None:
            costs[name] = cost
        if ratio is not None and name != "pgs":
            worst = max(worst, ratio)
        print(
            f"{name:<16}{len(picks):>7}{_shown(tokens, 'g'):>11}{_shown(cost, 'g'):>13}"
            f"{_shown(ratio, '.2f'):>15}{_shown(runtime, '.3f'):>12}{_shown(lines, 'g'):>7}"
        )
    return len(per_check), worst, costs


def _pool_sizes(reports: list[CheckReport]) -> str:
    return _shown(_median([float(len(candidates(r))) for r in reports if candidates(r)]), "g")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--runs",
        action="append",
        default=[],
        metavar="FOLDER",
        help="also every .traj under FOLDER (repeatable)",
    )
    parser.add_argument("--seeds", type=int, default=5, help="checks per bundled candidate")
    parser.add_argument("--max-examples", type=int, default=64, help="Hypothesis examples")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a run for CI, its figures mean nothing: one seed and 32 inputs",
    )
    parser.add_argument(
        "--verified",
        type=Path,
        metavar="RECORDS_JSONL",
        help="also SWE-bench Verified records, FAIL_TO_PASS as properties (Docker)",
    )
    parser.add_argument("--repos-dir", type=Path, help="with --verified: OWNER__NAME clones")
    parser.add_argument(
        "--instances",
        nargs="*",
        default=[],
        help="with --verified: only these instance ids, in this order",
    )
    parser.add_argument("--python-map", action="append", default=[], metavar="WANTED=USED")
    # bench/feedback.py --strategies hands its other options on: they mean nothing here.
    args, _ = parser.parse_known_args(argv)
    if args.verified is not None and (args.repos_dir is None or not args.repos_dir.is_dir()):
        parser.error("--verified needs --repos-dir, a folder of fetched repositories")
    started = time.perf_counter()
    counter = SimpleCounter()
    seeds = [1] if args.quick else list(range(1, args.seeds + 1))
    reports = recorded_checks([Path(f) for f in args.runs])
    found = len(reports)
    reports += local_checks(seeds, 32 if args.quick else args.max_examples)
    pooled, worst, costs = table(reports, counter)
    print(
        f"checks with a pool: {pooled} of {len(reports)} ({found} from recorded runs); "
        f"pool size median {_pool_sizes(reports)}; tokens: {counter.name} counter; message = "
        f"the property-min feedback rendered from the pick; {time.perf_counter() - started:.1f} s"
    )
    verified_worst = None
    if args.verified is not None:
        print(f"\nSWE-bench Verified, FAIL_TO_PASS on the original code: {args.verified}")
        checked = verified_checks(args.verified, args.repos_dir, args.instances, args.python_map)
        verified = [r for _, r in checked]
        several = [r for r in verified if len(candidates(r)) >= 2]
        print(f"\nevery record with a pool ({_pool_sizes(verified)} inputs, median):")
        with_pool, _, _ = table(verified, counter)
        print(f"\nthe records with a pool of two or more ({_pool_sizes(several)}, median):")
        _, verified_worst, _ = table(several, counter)
        print(
            f"records: {len(checked)} checked, {with_pool} with a pool, {len(several)} with two "
            f"or more: {', '.join(i for i, r in checked if len(candidates(r)) >= 2)}; "
            f"{time.perf_counter() - started:.0f} s in all"
        )
    for name, cost in costs.items():
        print(f"feedback_tokens_{name.replace('-', '_')}={cost:g}")
    print(f"strategy_cost_over_fewest={worst:.2f}")
    if verified_worst is not None:
        print(f"verified_cost_over_fewest={verified_worst:.2f}")


if __name__ == "__main__":
    main()
