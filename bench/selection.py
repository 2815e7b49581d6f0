"""``pgs select`` on real patches of real agents, scored by their official labels.

    .venv/bin/python bench/selection.py --repos-dir DIR [--candidates FILE] [--records FILE]
        [--output-dir OUT] [--workers N] [--budget S] [--filter REGEX] [--python-map A=B]
        [--score-only] [--all-labels]

FILE is ``../shared/swebench/candidates-dev.json`` (86 Verified instances, each with the distinct
patches public agent runs submitted and their labels) beside the records
``candidates-dev.jsonl``; the pool is the patches with an official label (``--all-labels``:
every patch); DIR the repositories (``prepare.sh``'s ``--repos-dir`` layout). One
predictions file per run is written to ``OUT/predictions`` and ``pgs select`` runs on them all
into ``OUT`` (resumable: a rerun checks only what is missing); ``--score-only`` scores what
``OUT`` holds. The labels are read only here, after the selection, to score it.

A patch's label is the majority of its official labels (leaderboard results, official reports,
the official harness's summaries); a patch with none falls back to its other labels (counted
apart). Printed, on the instances the selection checked: chosen-resolved next to the best single
submission, a random pick (the mean over the distinct patches), the exact-patch majority vote
(most submissions; ties averaged) and the oracle (some patch resolves); the evidence as a verifier
(how often the candidate ranked first is unresolved, how often the repository tests alone flag
an unresolved candidate, and a resolved one); the order with each key left out; why the wrong
choices were wrong (which evidence the instance lacked); the speed: candidates checked per
minute and the share of time in image builds, in the original code's runs, in the candidates'
checks. Last line ``select_resolved=K/N``.
"""

# ruff: noqa: E402 (the path is fixed before the imports: see below)
from __future__ import annotations

import os
import sys

# This file is named as the standard library's ``select``: its folder must not shadow it.
sys.path[:] = [p for p in sys.path if p not in ("", os.path.dirname(os.path.abspath(__file__)))]

import argparse
import json
import re
import statistics
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.pgs.runner import CheckSettings
from agent.record.selection import (
    SELECT_ORDER,
    Evidence,
    InstanceSelection,
    SelectCandidate,
    SelectionRecord,
    Source,
)
from agent.swebench import Environments, load_instances, parse_python_map
from agent.swebench.selection.candidates import (
    changed_paths,
    read_candidates,
    split_patch,
    write_predictions_files,
)
from agent.swebench.selection.evidence import named_files
from agent.swebench.selection.rank import choose
from agent.swebench.selection.run import select_all

SHARED = Path(__file__).resolve().parents[2] / "shared" / "swebench"
OFFICIAL = (
    "leaderboard results.json (official)",
    "official report.json",
    "official harness summary",
)


def labels_of(candidates: dict[str, list[dict]]) -> dict[str, dict[str, tuple[bool, bool]]]:
    """{instance: {patch: (resolved, from official labels)}}."""
    out: dict[str, dict[str, tuple[bool, bool]]] = {}
    for iid, entries in candidates.items():
        by: dict[str, list[tuple[bool, str]]] = {}
        for e in entries:
            by.setdefault(e["model_patch"], []).append((bool(e["resolved"]), e["label"]))
        for patch, labels in by.items():
            official = [r for r, label in labels if label in OFFICIAL]
            used = official or [r for r, _ in labels]
            out.setdefault(iid, {})[patch] = (sum(used) * 2 > len(used), bool(official))
    return out


def resolved(labels: dict[str, tuple[bool, bool]], patch: str) -> bool:
    return labels.get(patch, (False, False))[0]


def score(
    record: SelectionRecord,
    candidates: dict[str, list[dict]],
    order: tuple[str, ...] = SELECT_ORDER,
) -> int:
    labels = labels_of(candidates)
    done = 0
    for iid, s in record.instances.items():
        if s.error:
            continue
        again = choose(InstanceSelection.model_validate(s.model_dump()), order)
        chosen = next(c for c in again.candidates if c.index == again.chosen)
        done += resolved(labels[iid], chosen.patch)
    return done


#: The keys that need no container: computed from the patches and the issue alone.
TEXT_KEYS = (
    "changes no test files",
    "agreement with the other patches",
    "identical submissions",
    "touches the files the issue names",
    "patch size",
)


def text_only(candidates: dict[str, list[dict]], records: Path) -> float:
    """Chosen-resolved on every instance of ``candidates`` by the keys that need no container
    (:data:`TEXT_KEYS`): what the patches alone tell."""
    statements = {i.instance_id: i.problem_statement for i in load_instances(records)}
    labels = labels_of(candidates)
    total = 0.0
    for iid, entries in candidates.items():
        by: dict[str, list[Source]] = {}
        for e in entries:
            by.setdefault(e["model_patch"], []).append(Source(file=e["run"]))
        selection = InstanceSelection(instance_id=iid)
        for n, (patch, sources) in enumerate(by.items(), 1):
            code, tests = split_patch(patch)
            named, code_files = named_files(changed_paths(code), statements[iid])
            evidence = Evidence(
                tests_changed=changed_paths(tests),
                issue_files=named,
                code_files=code_files,
                patch_lines=sum(
                    1
                    for line in patch.splitlines()
                    if line[:1] in "+-" and not line.startswith(("+++", "---"))
                ),
            )
            selection.candidates.append(
                SelectCandidate(index=n, patch=patch, sources=sources, evidence=evidence)
            )
        choose(selection, TEXT_KEYS)
        best = next(c.key for c in selection.candidates if c.index == selection.chosen)
        tied = [c for c in selection.candidates if c.key == best]
        total += sum(resolved(labels[iid], c.patch) for c in tied) / len(tied)
    return total


def report(record: SelectionRecord, candidates: dict[str, list[dict]], records: Path) -> None:
    labels = labels_of(candidates)
    # chosen again by the order as it is now (the evidence is what the selection stored)
    checked = {
        iid: choose(InstanceSelection.model_validate(s.model_dump()))
        for iid, s in record.instances.items()
        if not s.error
    }
    errors = {iid: s.error for iid, s in record.instances.items() if s.error}
    n = len(checked)
    for iid, why in sorted(errors.items()):
        print(f"not checked: {iid}: {str(why)[:200]}")
    if not n:
        print("select_resolved=0/0")
        return
    chosen_ok = averaged = random = majority = oracle = 0.0
    runs: Counter[str] = Counter()
    first_unresolved = regress_flags_unres = regress_flags_res = unres = res = 0
    unofficial_chosen = 0
    missing: Counter[str] = Counter()
    for iid, s in checked.items():
        mine = labels[iid]
        chosen = next(c for c in s.candidates if c.index == s.chosen)
        ok = resolved(mine, chosen.patch)
        chosen_ok += ok
        tied_best = [c for c in s.candidates if c.key == chosen.key]
        averaged += sum(resolved(mine, c.patch) for c in tied_best) / len(tied_best)
        unofficial_chosen += not mine.get(chosen.patch, (False, False))[1]
        flags = [resolved(mine, c.patch) for c in s.candidates]
        random += sum(flags) / len(flags)
        oracle += any(flags)
        most = max(len(c.sources) for c in s.candidates)
        tied = [resolved(mine, c.patch) for c in s.candidates if len(c.sources) == most]
        majority += sum(tied) / len(tied)
        for entry in candidates[iid]:
            runs[entry["run"]] += resolved(mine, entry["model_patch"])
        first_unresolved += not ok
        for c, flag in zip(s.candidates, flags, strict=True):
            broken = bool(c.evidence.broken) or not c.evidence.applies
            if flag:
                res += 1
                regress_flags_res += broken
            else:
                unres += 1
                regress_flags_unres += broken
        if not ok and any(flags):
            good = [c for c, f in zip(s.candidates, flags, strict=True) if f]
            if not s.probes and not s.added_tests:
                missing["no behaviour evidence (no issue code, no added tests)"] += 1
            elif all(
                c.evidence.probes == chosen.evidence.probes
                and c.evidence.cross == chosen.evidence.cross
                for c in good
            ):
                missing["a right patch behaved as the chosen one on every probe and test"] += 1
            elif chosen.evidence.broken == [] and any(c.evidence.broken for c in good):
                missing["the right patches broke a related test (flaky or a real side effect)"] += 1
            else:
                missing["the largest behaviour cluster was wrong"] += 1
    best_run, best = runs.most_common(1)[0]
    print(f"instances checked: {n} of {len(candidates)} ({len(errors)} could not be checked)")
    print(
        f"chosen resolved {chosen_ok:.0f}/{n} ({averaged:.1f} with ties averaged, not broken by "
        f"the order the files were read); best single submission {best}/{n} ({best_run}); "
        f"random pick {random:.1f}/{n}; exact-patch majority vote {majority:.1f}/{n}; "
        f"oracle {oracle:.0f}/{n}"
    )
    print(f"chosen patches whose label is not official: {unofficial_chosen}")
    print(
        f"verifier: ranked first and unresolved {first_unresolved}/{n}; regression tests alone "
        f"(broken or does not apply) flag {regress_flags_unres}/{unres} unresolved candidates "
        f"and {regress_flags_res}/{res} resolved ones"
    )
    decided: dict[str, list[int]] = {}
    for iid, s in checked.items():
        mine = labels[iid]
        right = [c for c in s.candidates if resolved(mine, c.patch)]
        wrong = [c for c in s.candidates if not resolved(mine, c.patch)]
        for r in right:
            for w in wrong:
                at = next(
                    (i for i, (a, b) in enumerate(zip(r.key, w.key, strict=True)) if a != b), None
                )
                if at is not None:
                    tally = decided.setdefault(SELECT_ORDER[at], [0, 0])
                    tally[0 if r.key[at] < w.key[at] else 1] += 1
    for name, (good, bad) in decided.items():
        print(
            f"key {name!r} decides {good + bad} resolved-against-unresolved pairs: "
            f"the resolved one first in {good}"
        )
    for name in SELECT_ORDER:
        order = tuple(k for k in SELECT_ORDER if k != name)
        print(f"without {name!r}: {score(record, candidates, order)}/{n}")
    print(
        f"the keys that need no container alone, on all {len(candidates)} instances: "
        f"{text_only(candidates, records):.1f}/{len(candidates)} (ties averaged)"
    )
    for why, count in missing.most_common():
        print(f"wrong where a right patch existed: {count}: {why}")
    seconds = Counter[str]()
    for s in checked.values():
        seconds.update(s.seconds)
    total = sum(seconds.values()) or 1.0
    cands = sum(len(s.candidates) for s in checked.values())
    print(
        f"candidates checked per minute {cands / total * 60:.1f} ({cands} in {total / 60:.0f} "
        f"instance-minutes); time in image builds {seconds['image'] / total:.0%}, in the original "
        f"code's runs {seconds['base'] / total:.0%}, in the candidates' checks "
        f"{seconds['candidates'] / total:.0%}"
    )
    per = [c.evidence.seconds for s in checked.values() for c in s.candidates]
    print(f"candidate check p50 {statistics.median(per):.1f}s")
    print(f"select_resolved={chosen_ok:.0f}/{n}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos-dir", type=Path)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    parser.add_argument("--candidates", type=Path, default=SHARED / "candidates-dev.json")
    parser.add_argument("--records", type=Path, default=SHARED / "candidates-dev.jsonl")
    parser.add_argument("--output-dir", type=Path, default=Path("/tmp/pgs-bench-select"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget", type=float, default=15.0)
    parser.add_argument("--test-timeout", type=float, default=30.0)
    parser.add_argument("--filter", default="", help="regex on instance ids")
    parser.add_argument(
        "--python-map",
        action="append",
        default=[],
        metavar="WANTED=USED",
        help="as for pgs select (xarray's records need 3.10=3.11 here)",
    )
    parser.add_argument("--score-only", action="store_true")
    parser.add_argument(
        "--all-labels",
        action="store_true",
        help="also the patches whose labels are not official (pre-docker Lite, F2P-only): "
        "their runs become prediction files too (default: the officially labelled pool, "
        "the one the issue's baselines are measured on)",
    )
    args = parser.parse_args()
    if args.quick and not (
        args.candidates.is_file()
        and (args.score_only or (args.repos_dir is not None and args.repos_dir.is_dir()))
    ):
        # Quick mode without the candidates and their repositories: nothing to measure.
        print(f"no {args.candidates} or --repos-dir {args.repos_dir}: skipped")
        print("select_resolved=skipped")
        return
    candidates = json.loads(args.candidates.read_text(encoding="utf-8"))
    candidates = {
        iid: [e for e in entries if args.all_labels or e["label"] in OFFICIAL]
        for iid, entries in candidates.items()
        if re.search(args.filter, iid)
    }
    candidates = {iid: entries for iid, entries in candidates.items() if entries}
    out = args.output_dir
    if not args.score_only:
        by_run: dict[str, dict[str, str]] = {}
        for iid, entries in candidates.items():
            for e in entries:
                by_run.setdefault(e["run"], {})[iid] = e["model_patch"]
        files = write_predictions_files(by_run, out / "predictions")
        instances = [i for i in load_instances(args.records) if i.instance_id in candidates]
        envs = Environments(
            repos_dir=args.repos_dir,
            python_map=parse_python_map(args.python_map),
            run_id="bench-select",
        )
        settings = CheckSettings(budget=args.budget, test_timeout=args.test_timeout)
        started = time.monotonic()
        select_all(
            instances,
            read_candidates(files),
            envs,
            settings,
            out,
            predictions=[str(f) for f in files],
            workers=args.workers,
            on_done=lambda s, reused: print(
                f"{s.instance_id}: {'kept' if reused else s.error or f'chose {s.chosen}'}",
                flush=True,
            ),
        )
        print(f"selection took {time.monotonic() - started:.0f}s")
    # Every instance the output folder holds (instances/<id>.json), whichever run checked it.
    record = SelectionRecord()
    for path in sorted((out / "instances").glob("*.json")):
        if path.name.endswith(".tester.json"):
            continue
        selection = InstanceSelection.model_validate(json.loads(path.read_text(encoding="utf-8")))
        if selection.instance_id in candidates:
            record.instances[selection.instance_id] = selection
    report(record, candidates, args.records)


if __name__ == "__main__":
    main()
