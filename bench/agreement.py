"""Real model patches graded by ``pgs eval`` against the official harness's reports of them,
test for test: same label, same status for every FAIL_TO_PASS and PASS_TO_PASS test.

    .venv/bin/python bench/agreement.py --repos-dir DIR [--official FILE.json]
        [--instances FILE.jsonl] [--only REGEX] [--workers 1] [--apply-commands harness|cloud]
        [--network] [--report-dir DIR]

FILE.json maps each instance id to ``model_patch`` (a real model's patch) and
``official_report`` (the official harness's report.json entry for it, graded in the official
images); default ``../shared/swebench/official-dev.json`` (30 SWE-bench Verified instances, from
public mini-swe-agent results), with its records in the ``.jsonl`` beside it. DIR holds the
repositories as ``OWNER__NAME`` clones (``../shared/swebench/prepare.sh SNAPSHOTS OUT
RECORDS.jsonl`` lays them out in ``OUT/repos``). Images are built on first use (minutes per
environment), then cached.

Printed: one line per instance (``agree``, ``DIFFERS``, ``not checkable here`` with the reason,
or ``pgs error``), then every difference, test by test. An instance whose record carries an
evaluation script unlike the one the installed harness writes for it (a later fix of the
dataset: astropy-8872's ``export SETUPTOOLS_USE_DISTUTILS=stdlib``) and that differs is graded
again with the harness's own script, as reports made before the fix were graded; its line says
which script agreed. Instances pgs marks as not checkable
here (tests that needed a service this run could not reach) are explained and left out of N.
Last line: official_agreement=K/N.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.swebench import Environments, Instance, eval_script, load_instances, parse_python_map
from agent.swebench.evaluate import evaluate
from agent.swebench.reports import Outcome

SHARED = Path("..") / "shared" / "swebench"
PARTS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def statuses(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``{(part, test): "success" | "failure"}`` of a report.json entry."""
    out: dict[tuple[str, str], str] = {}
    for part in PARTS:
        for status in ("success", "failure"):
            for test in ((report.get("tests_status") or {}).get(part) or {}).get(status, []):
                out[(part, test)] = status
    return out


def differences(official: dict[str, Any], ours: dict[str, Any] | None) -> list[str]:
    """What pgs's report entry says unlike the official one: the label, then test by test."""
    if ours is None:
        return ["pgs wrote no report"]
    out: list[str] = []
    for key in ("patch_successfully_applied", "resolved"):
        if bool(official.get(key)) != bool(ours.get(key)):
            out.append(f"{key}: official {official.get(key)}, pgs {ours.get(key)}")
    theirs, mine = statuses(official), statuses(ours)
    for part, test in sorted(set(theirs) | set(mine)):
        a, b = theirs.get((part, test), "absent"), mine.get((part, test), "absent")
        if a != b:
            out.append(f"{part} {test}: official {a}, pgs {b}")
    return out


def script_change(instance: Instance, envs: Environments) -> str:
    """What the record's evaluation script has that the installed harness's lacks (its lines,
    quoted), or "" when they are the same."""
    spec = envs.spec(instance)
    record, harness = eval_script(instance, spec), eval_script(instance, spec, "harness")
    if record == harness:
        return ""
    theirs = set(harness.splitlines())
    added = [line for line in record.splitlines() if line not in theirs]
    return "; ".join(f"`{line.strip()}`" for line in added) or "line order"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    parser.add_argument("--official", type=Path, default=SHARED / "official-dev.json")
    parser.add_argument("--instances", type=Path, help="records (default: FILE.jsonl beside it)")
    parser.add_argument("--only", default="", help="grade the instances whose id matches REGEX")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--apply-commands", choices=["harness", "cloud"], default="harness")
    parser.add_argument("--network", action="store_true")
    parser.add_argument("--python-map", action="append", default=[], metavar="WANTED=USED")
    parser.add_argument("--report-dir", type=Path, help="default: a folder under /tmp")
    args = parser.parse_args()
    if args.repos_dir is None or not args.repos_dir.is_dir():
        if not args.quick:
            parser.error("--repos-dir: a folder of fetched repositories is needed")
        # Quick mode without the fetched repositories: nothing to measure, and it says so.
        print(f"no repositories at --repos-dir {args.repos_dir}: skipped")
        print("official_agreement=skipped")
        return
    official: dict[str, dict[str, Any]] = json.loads(args.official.read_text())
    records = args.instances or args.official.with_suffix(".jsonl")
    instances = [
        i
        for i in load_instances(records)
        if i.instance_id in official and re.search(args.only, i.instance_id)
    ]
    predictions = {
        i.instance_id: {
            "instance_id": i.instance_id,
            "model_name_or_path": "official-dev",
            "model_patch": official[i.instance_id]["model_patch"],
        }
        for i in instances
    }
    run_id = "agreement-" + time.strftime("%Y%m%d-%H%M%S")
    report_dir = args.report_dir or Path("/tmp") / "pgs-agreement" / run_id
    envs = Environments(args.repos_dir, parse_python_map(args.python_map), run_id=run_id)

    def on_done(o: Outcome) -> None:
        print(f"graded {o.instance_id}: {o.kind} in {o.seconds:.0f}s", flush=True)

    outcomes, summary = evaluate(
        predictions,
        instances,
        envs,
        report_dir,
        workers=args.workers,
        run_id=run_id,
        on_done=on_done,
        network=args.network,
        commands=args.apply_commands,
    )
    # An instance whose record carries an evaluation script unlike the one the installed harness
    # writes for it (a later fix of the dataset) may have been graded officially with either:
    # where the record's disagrees, it is graded again with the harness's own.
    by_id = {i.instance_id: i for i in instances}
    again = [
        by_id[o.instance_id]
        for o in outcomes
        if o.kind != "not_checkable"
        and differences(
            official[o.instance_id]["official_report"], (o.report or {}).get(o.instance_id)
        )
        and script_change(by_id[o.instance_id], envs)
    ]
    second: dict[str, Outcome] = {}
    if again:
        redo, _ = evaluate(
            {i.instance_id: predictions[i.instance_id] for i in again},
            again,
            envs,
            report_dir / "harness-scripts",
            workers=args.workers,
            run_id=run_id,
            on_done=on_done,
            network=args.network,
            commands=args.apply_commands,
            scripts="harness",
        )
        second = {o.instance_id: o for o in redo}
    agree, checked, found = 0, 0, []
    for o in outcomes:
        want = official[o.instance_id]["official_report"]
        ours = (o.report or {}).get(o.instance_id)
        diff = differences(want, ours)
        if o.kind == "not_checkable":
            print(f"{o.instance_id}: not checkable here: {o.reason}")
            continue
        note = ""
        redone = second.get(o.instance_id)
        if diff and redone is not None:
            change = script_change(by_id[o.instance_id], envs)
            if not differences(want, (redone.report or {}).get(o.instance_id)):
                diff, note = (
                    [],
                    f", with the harness's evaluation script, without the record's {change}",
                )
            else:
                note = f"; with the harness's evaluation script too (the record's adds {change})"
        checked += 1
        agree += not diff
        label = "agree" if not diff else ("pgs error: " + o.error if o.error else "DIFFERS")
        print(f"{o.instance_id}: {label} (official resolved={want.get('resolved')}{note})")
        found += [f"  {o.instance_id}: {d}" for d in diff]
    if found:
        print("differences:")
        print("\n".join(found))
    print(f"reports: {report_dir} (summary {summary.name})")
    print(f"official_agreement={agree}/{checked}")


if __name__ == "__main__":
    main()
