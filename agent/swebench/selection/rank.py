"""The order of ``pgs select``: which candidate the evidence puts first, and why.

Candidates are sorted by the keys of :data:`~agent.record.selection.SELECT_ORDER`, each
computed by :data:`KEYS` (smaller is better), in this order:

1. **applies**: a patch no harness command applies is last;
2. **repository tests broken**: related tests that pass on the original code and fail on it;
3. **issue properties passed**: with ``--model``, of the Tester's kept issue properties that
   fail on the original code (written once per instance, validated there), the ones passing
   on it, with the same Hypothesis seed and replayed inputs for every candidate (0 for all
   without a model: the order is then the rest);
4. **candidates' fail-to-pass tests passed**: of the tests any candidate adds that fail on the
   original code (each candidate's idea of what shows the bug), the ones passing on it (the
   cross-execution matrix, CodeT's dual agreement);
5. **changes the issue's behaviour**: the issue's own code prints something else on it than
   on the original code (a candidate that changes nothing the issue shows comes after one
   that does; no key when the issue has no code);
6. **behaviour cluster**: the submissions of all the candidates that behave exactly as it
   does on the probes and the added tests (Agentless's vote, on behaviour rather than text;
   a candidate that changes nothing the issue shows gets no votes);
7. **own tests pass**: the tests its own patch adds, failing on it;
8. **changes no test files**: a patch that leaves the test files alone comes first (the
   evaluation's own tests go onto the same files);
9. **agreement with the other patches**: the sum of the shares of changed lines it has in
   common with each other candidate (the patch the others resemble most; a vote over
   normalised patches with partial credit);
10. **identical submissions**: how many times this very patch was submitted;
11. **touches the files the issue names**: a larger share of its changed code files first;
12. **patch size**: lines added and removed, the smaller first.

Still tied: the candidate read first, recorded as a tie. The order was chosen on the dev set
(``bench/selection.py`` prints chosen-resolved for the default and for each key left out; the
keys 8 to 12 need no container and were compared on all 86 instances of
``candidates-dev.json``: docs/select.md); it never looks at which submission or model a patch
came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.record.selection import SELECT_ORDER, Evidence, InstanceSelection, Probe
from agent.swebench.selection.candidates import split_patch


@dataclass
class Ranked:
    """One candidate as the order sees it."""

    index: int
    sources: int
    evidence: Evidence
    lines: frozenset[str] = frozenset()


def changed_lines(patch: str) -> frozenset[str]:
    """The lines a patch's code part adds and removes, whitespace folded, each with its sign
    (what two patches share when they make the same change)."""
    code, _ = split_patch(patch)
    return frozenset(
        line[0] + " ".join(line[1:].split())
        for line in code.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    )


def text_agreement(candidates: Sequence[Ranked]) -> None:
    """Set each candidate's ``text_agreement``: the sum, over the other candidates, of the
    share of changed lines the two have in common (Jaccard): the patch most others resemble
    scores highest (a vote over normalised patches, with partial credit)."""
    for c in candidates:
        total = 0.0
        for other in candidates:
            if other is not c and (c.lines or other.lines):
                total += len(c.lines & other.lines) / len(c.lines | other.lines)
        c.evidence.text_agreement = round(total, 3)


def behaviour(e: Evidence) -> tuple[tuple[str, str], ...]:
    """What a candidate does on the probes and the added tests (its cluster's key)."""
    return tuple(sorted(e.probes.items())) + tuple(sorted(e.cross.items()))


def cluster(candidates: Sequence[Ranked], probes: Sequence[Probe]) -> None:
    """Set each candidate's ``cluster`` (0: the most submissions) and ``cluster_sources``.
    A candidate whose patch did not apply or whose check failed is in no cluster, and one
    that changes nothing the issue's code shows gets no votes."""
    groups: dict[tuple[tuple[str, str], ...], list[Ranked]] = {}
    for c in candidates:
        if c.evidence.applies and not c.evidence.error:
            groups.setdefault(behaviour(c.evidence), []).append(c)
    weights = {key: sum(c.sources for c in members) for key, members in groups.items()}
    order = sorted(groups, key=lambda k: (-weights[k], min(c.index for c in groups[k])))
    for number, key in enumerate(order):
        for c in groups[key]:
            c.evidence.cluster = number
            unchanged = bool(probes) and c.evidence.probes_changed == 0
            c.evidence.cluster_sources = 0 if unchanged else weights[key]
    for c in candidates:
        if not c.evidence.applies or c.evidence.error:
            c.evidence.cluster, c.evidence.cluster_sources = -1, 0


#: The keys, by name, each a function of a candidate and whether the issue has probes.
KEYS: dict[str, Callable[[Ranked, bool], float]] = {
    "applies": lambda c, _: 0 if c.evidence.applies and not c.evidence.error else 1,
    "repository tests broken": lambda c, _: len(c.evidence.broken),
    "issue properties passed": lambda c, _: -c.evidence.issue_properties_passed,
    "candidates' fail-to-pass tests passed": lambda c, _: -c.evidence.fail_to_pass_passed,
    "changes the issue's behaviour": lambda c, has: (
        1 if has and c.evidence.probes_changed == 0 else 0
    ),
    "behaviour cluster": lambda c, _: -c.evidence.cluster_sources,
    "own tests pass": lambda c, _: c.evidence.own_tests_failing,
    "changes no test files": lambda c, _: 1 if c.evidence.tests_changed else 0,
    "agreement with the other patches": lambda c, _: -c.evidence.text_agreement,
    "identical submissions": lambda c, _: -c.sources,
    "touches the files the issue names": lambda c, _: (
        -round(c.evidence.issue_files / max(c.evidence.code_files, 1), 2)
    ),
    "patch size": lambda c, _: c.evidence.patch_lines,
}
assert tuple(KEYS) == SELECT_ORDER


def key_of(c: Ranked, has_probes: bool, order: Sequence[str] = SELECT_ORDER) -> list[float]:
    return [float(KEYS[name](c, has_probes)) for name in order]


def _value(c: Ranked, name: str, has: bool) -> str:
    e = c.evidence
    return {
        "applies": "does not apply" if not e.applies else "check failed" if e.error else "applies",
        "repository tests broken": f"{len(e.broken)} broken",
        "issue properties passed": f"{e.issue_properties_passed} of "
        f"{e.issue_properties_total} issue properties passed",
        "candidates' fail-to-pass tests passed": f"{e.fail_to_pass_passed} of "
        f"{e.fail_to_pass_total} passed",
        "changes the issue's behaviour": f"{e.probes_changed} probes changed",
        "behaviour cluster": f"{e.cluster_sources} submissions behave alike",
        "own tests pass": f"{e.own_tests_failing} of {e.own_tests} own tests failing",
        "touches the files the issue names": f"{e.issue_files} of {e.code_files} changed "
        "files named",
        "changes no test files": f"{len(e.tests_changed)} test files changed",
        "agreement with the other patches": f"text agreement {e.text_agreement:.2f}",
        "identical submissions": f"{c.sources} submissions",
        "patch size": f"{e.patch_lines} lines",
    }[name]


def choose(selection: InstanceSelection, order: Sequence[str] = SELECT_ORDER) -> InstanceSelection:
    """Rank ``selection``'s candidates (their evidence set), set ``chosen``, ``reason``,
    ``ties``, each candidate's ``rank`` and ``key``; returns it."""
    ranked = [
        Ranked(c.index, len(c.sources), c.evidence, changed_lines(c.patch))
        for c in selection.candidates
    ]
    has = bool(selection.probes)
    cluster(ranked, selection.probes)
    text_agreement(ranked)
    ranked.sort(key=lambda c: (key_of(c, has, order), c.index))
    by_index = {c.index: c for c in selection.candidates}
    for place, c in enumerate(ranked, 1):
        by_index[c.index].rank = place
        by_index[c.index].key = key_of(c, has, order)
    selection.order = list(order)
    if not ranked:
        selection.chosen, selection.reason, selection.ties = None, "no candidate", []
        return selection
    best = ranked[0]
    selection.chosen = best.index
    first = key_of(best, has, order)
    selection.ties = [c.index for c in ranked[1:] if key_of(c, has, order) == first]
    if len(ranked) == 1:
        selection.reason = f"candidate {best.index} is the only one"
        return selection
    reasons: dict[str, list[int]] = {}
    for other in ranked[1:]:
        theirs = key_of(other, has, order)
        if theirs == first:
            continue
        at = next(i for i, (a, b) in enumerate(zip(first, theirs, strict=True)) if a != b)
        reasons.setdefault(order[at], []).append(other.index)
    parts = [
        f"over {_list(indices)} by {name} ({_value(best, name, has)} against "
        f"{_value(by_rank, name, has)})"
        for name, indices in reasons.items()
        for by_rank in [next(c for c in ranked if c.index == indices[0])]
    ]
    if selection.ties:
        parts.append(f"tied on every key with {_list(selection.ties)} (the first read is chosen)")
    reason = f"candidate {best.index}: " + "; ".join(parts)
    selection.reason = reason
    return selection


def _list(indices: Sequence[int]) -> str:
    shown = ", ".join(map(str, indices[:8])) + (
        f" and {len(indices) - 8} more" if len(indices) > 8 else ""
    )
    return ("candidate " if len(indices) == 1 else "candidates ") + shown
