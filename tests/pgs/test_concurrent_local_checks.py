"""Two local runs at once (a batch's workers with ``--sandbox local``, two users of one
machine) never share a file a check writes: each sandbox's candidate patch is its own. The
patch once went to a fixed /tmp/pgs-candidate.patch, which local sandboxes share with the
host: a check applied the other run's patch, or a half-written one ("No valid patches in
input", seen in CI with two suites running)."""

from __future__ import annotations

from pathlib import Path

from agent.pgs.reviewer import candidate_path
from envs.local import LocalSandbox
from tests.support.repos import make_repo


def _patch(value: str) -> str:
    return (
        "diff --git a/calc.py b/calc.py\n"
        "--- a/calc.py\n"
        "+++ b/calc.py\n"
        "@@ -1 +1 @@\n"
        "-X = 0\n"
        f"+X = {value}\n"
    )


def test_two_local_sandboxes_apply_each_their_own_candidate(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"calc.py": "X = 0\n"})
    with LocalSandbox(repo) as first, LocalSandbox(repo) as second:
        # Both write before either applies: what two checks at once do.
        for box, value in ((first, "1"), (second, "2")):
            box.write_file(candidate_path(box), _patch(value))
        assert candidate_path(first) != candidate_path(second)
        for box, value in ((first, "1"), (second, "2")):
            applied = box.run(f"git apply {candidate_path(box)}")
            assert applied.ok, applied.output
            assert box.read_file("calc.py") == f"X = {value}\n".encode()
    assert (repo / "calc.py").read_text() == "X = 0\n"  # the user's tree untouched
