"""``pgs select``'s order (:func:`~agent.swebench.selection.rank.choose`) on evidence built by hand,
without a container, and a rerun: a finished instance reused, one with an error or with more
submissions of the same patches ranked again. The sealed checks themselves:
tests/swebench/test_select.py."""

from __future__ import annotations

import json
from pathlib import Path

from agent.record.selection import (
    SELECT_ORDER,
    Evidence,
    InstanceSelection,
    Probe,
    SelectCandidate,
    Source,
)
from agent.swebench.selection.rank import choose
from tests.support.select_patches import FIX, OTHER
from tests.support.swe_dataset import I1

# --- rank ---------------------------------------------------------------------------------


def selection(
    *evidence: Evidence, sources: list[int] | None = None, probes: int = 0
) -> InstanceSelection:
    """An instance whose candidate ``k`` (1, 2, ...) has ``evidence[k - 1]``."""
    counts = sources or [1] * len(evidence)
    return InstanceSelection(
        instance_id=I1,
        candidates=[
            SelectCandidate(
                index=k,
                patch=f"patch {k}\n",
                sources=[Source(file=f"agent-{k}-{n}.json") for n in range(counts[k - 1])],
                evidence=e,
            )
            for k, e in enumerate(evidence, 1)
        ],
        probes=[
            Probe(name=f"probe-{i}", code="print(1)", original="old") for i in range(1, probes + 1)
        ],
    )


def ranks(s: InstanceSelection) -> list[int]:
    return [c.rank for c in s.candidates]


def test_a_candidate_breaking_a_repository_test_loses_to_one_that_does_not() -> None:
    breaks = Evidence(broken=["tests/test_core.py::test_shout"], fail_to_pass_passed=1)
    s = choose(selection(breaks, Evidence(patch_lines=40)))
    assert s.chosen == 2 and ranks(s) == [2, 1] and s.ties == []
    assert s.reason == (
        "candidate 2: over candidate 1 by repository tests broken (0 broken against 1 broken)"
    )
    assert s.order == list(SELECT_ORDER)
    assert s.candidates[1].key[SELECT_ORDER.index("repository tests broken")] == 0
    assert s.candidates[0].key[SELECT_ORDER.index("repository tests broken")] == 1


def test_passing_more_of_the_candidates_fail_to_pass_tests_wins() -> None:
    s = choose(
        selection(
            Evidence(fail_to_pass_total=2, fail_to_pass_passed=1),
            Evidence(fail_to_pass_total=2, fail_to_pass_passed=2, patch_lines=30),
        )
    )
    assert s.chosen == 2 and ranks(s) == [2, 1]
    assert "by candidates' fail-to-pass tests passed (2 of 2 passed against 1 of 2 passed)" in (
        s.reason
    )


def test_the_largest_behaviour_cluster_wins_and_ties_are_recorded() -> None:
    alike = {"probe-1": "new"}
    s = choose(
        selection(
            Evidence(probes={"probe-1": "other"}, probes_changed=1),
            Evidence(probes=alike, probes_changed=1, cross={"t::a": "passed"}),
            Evidence(probes=alike, probes_changed=1, cross={"t::a": "passed"}),
            probes=1,
        )
    )
    by = {c.index: c.evidence for c in s.candidates}
    assert (by[2].cluster, by[2].cluster_sources) == (0, 2)
    assert (by[3].cluster, by[3].cluster_sources) == (0, 2)
    assert (by[1].cluster, by[1].cluster_sources) == (1, 1)
    assert s.chosen == 2 and s.ties == [3] and ranks(s) == [3, 1, 2]
    assert s.reason == (
        "candidate 2: over candidate 1 by behaviour cluster (2 submissions behave alike against "
        "1 submissions behave alike); tied on every key with candidate 3 (the first read is chosen)"
    )


def test_submissions_of_the_same_patch_vote_for_its_cluster() -> None:
    s = choose(selection(Evidence(probes={"p": "x"}), Evidence(probes={"p": "y"}), sources=[1, 3]))
    assert s.chosen == 2 and s.candidates[1].evidence.cluster_sources == 3
    assert "by behaviour cluster (3 submissions" in s.reason


def test_a_candidate_whose_probes_print_what_the_original_did_gets_no_votes() -> None:
    unchanged = {"probe-1": "old"}
    s = choose(
        selection(
            Evidence(probes=unchanged),
            Evidence(probes=unchanged),
            Evidence(probes={"probe-1": "new"}, probes_changed=1, patch_lines=99),
            sources=[2, 2, 1],
            probes=1,
        )
    )
    by = {c.index: c.evidence for c in s.candidates}
    assert by[1].cluster_sources == by[2].cluster_sources == 0  # 4 submissions, no votes
    assert by[3].cluster_sources == 1
    assert s.chosen == 3
    assert s.reason.startswith(
        "candidate 3: over candidates 1, 2 by changes the issue's behaviour (1 probes changed "
        "against 0 probes changed)"
    )


def test_without_probes_changing_nothing_is_no_key() -> None:
    s = choose(selection(Evidence(patch_lines=9), Evidence(patch_lines=3)))
    assert s.chosen == 2 and s.reason.endswith("by patch size (3 lines against 9 lines)")


def test_a_patch_that_does_not_apply_is_last_even_against_a_broken_one() -> None:
    s = choose(
        selection(
            Evidence(applies=False, apply_error="error: patch failed: textkit/core.py:1"),
            Evidence(broken=["t::a", "t::b", "t::c"]),
            Evidence(error="DockerError: the container died"),
        )
    )
    assert s.chosen == 2 and ranks(s) == [2, 1, 3]
    assert s.reason == (
        "candidate 2: over candidates 1, 3 by applies (applies against does not apply)"
    )
    assert [c.evidence.cluster for c in s.candidates] == [-1, 0, -1]
    # A check that failed is named so, not taken for a patch that does not apply.
    s = choose(selection(Evidence(error="DockerError: the container died"), Evidence()))
    assert s.chosen == 2
    assert s.reason == "candidate 2: over candidate 1 by applies (applies against check failed)"


def test_one_candidate_and_none() -> None:
    s = choose(selection(Evidence(applies=False)))
    assert s.chosen == 1 and s.reason == "candidate 1 is the only one" and ranks(s) == [1]
    s = choose(selection())
    assert s.chosen is None and s.reason == "no candidate"


# --- resuming -----------------------------------------------------------------------------


def test_a_finished_instance_is_reused_and_one_with_an_error_is_not(tmp_path: Path) -> None:
    from agent.pgs.runner import CheckSettings
    from agent.swebench import Instance
    from agent.swebench.selection.candidates import Candidate, candidates_hash
    from agent.swebench.selection.run import _reusable, select_all

    mine = [Candidate(1, OTHER), Candidate(2, FIX + "\n\n")]
    done = choose(selection(Evidence(broken=["t::a"]), Evidence()))
    for c, patch in zip(done.candidates, (OTHER, FIX + "\n\n"), strict=True):
        c.patch = patch
    done.candidates_hash = candidates_hash(mine)
    out = tmp_path / "out"
    (out / "instances").mkdir(parents=True)
    saved = out / "instances" / f"{I1}.json"
    saved.write_text(done.model_dump_json(indent=1))
    instance = Instance.from_record({"instance_id": I1, "repo": "acme/textkit", "base_commit": "b"})
    # Nothing to check: no image, no container (envs is never used).
    result = select_all(
        [instance],
        {I1: mine},
        None,
        CheckSettings(),
        out,
        predictions=["p.json"],
    )
    assert result.reused == [I1] and result.checked == []
    preds = json.loads((out / "preds.json").read_text())
    assert preds == {
        I1: {"instance_id": I1, "model_name_or_path": "pgs-select", "model_patch": FIX + "\n\n"}
    }
    record = json.loads((out / "selection.json").read_text())
    assert record["predictions"] == ["p.json"] and record["instances"][I1]["chosen"] == 2

    assert _reusable(saved, mine[:1]) is None  # other candidates
    done.candidates[0].evidence.error = "DockerError: the container died"
    saved.write_text(done.model_dump_json(indent=1))
    assert _reusable(saved, mine) is None  # a candidate's check to do again
    done.candidates[0].evidence.error = None
    done.error = "ImageBuildError: no network"
    saved.write_text(done.model_dump_json(indent=1))
    assert _reusable(saved, mine) is None
    saved.write_text("{half a file")
    assert _reusable(saved, mine) is None


def test_a_rerun_with_more_submissions_of_the_same_patches_ranks_them_again(
    tmp_path: Path,
) -> None:
    from agent.pgs.runner import CheckSettings
    from agent.swebench import Instance
    from agent.swebench.selection.candidates import Candidate, candidates_hash
    from agent.swebench.selection.run import select_all

    # Two patches the checks cannot tell apart: the first read is chosen...
    first = [
        Candidate(1, OTHER, [Source(file="a.json")]),
        Candidate(2, FIX, [Source(file="b.json")]),
    ]
    done = choose(selection(Evidence(), Evidence()))
    for c, patch in zip(done.candidates, (OTHER, FIX), strict=True):
        c.patch = patch
    done.candidates_hash = candidates_hash(first)
    assert done.chosen == 1 and done.ties == [2]
    out = tmp_path / "out"
    (out / "instances").mkdir(parents=True)
    (out / "instances" / f"{I1}.json").write_text(done.model_dump_json(indent=1))
    # ...until a third file submits the second one too: no check again, a new order.
    again = [first[0], Candidate(2, FIX, [Source(file="b.json"), Source(file="c.json")])]
    instance = Instance.from_record({"instance_id": I1, "repo": "acme/textkit", "base_commit": "b"})
    result = select_all([instance], {I1: again}, None, CheckSettings(), out, predictions=[])
    assert result.reused == [I1]
    mine = json.loads((out / "instances" / f"{I1}.json").read_text())
    assert [len(c["sources"]) for c in mine["candidates"]] == [1, 2]
    assert mine["chosen"] == 2 and mine["ties"] == []
    assert "by identical submissions (2 submissions against 1 submissions)" in mine["reason"]
    assert json.loads((out / "preds.json").read_text())[I1]["model_patch"] == FIX
    assert json.loads((out / "selection.json").read_text())["instances"][I1] == mine
