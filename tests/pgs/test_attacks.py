"""The attack suite (issue 30): a Generator that plants ONE attack outside its wrong patch must
never earn ``passed``, and ``--open-pr`` must refuse its patch.

Each vector of :data:`tests.support.attack_vectors.VECTORS` is one ``pgs run --issue URL --open-pr``
in this process: the scripted model server (the real openai client over HTTP), the fake GitHub
of tests/support/github_fake.py whose clone is the DEDUPE example repository, a real Docker
sandbox of its image, real git, pytest and Hypothesis. The scenario (see the support module):
the Generator's wrong fix fails the Tester's order property; after the feedback it plants the
attack and submits again. Sanity: the same run without an attack is ``failed``, with the right
fix ``passed`` (and a pull request is opened: the refusals are not vacuous).

``PGS_ATTACK_TABLE=path`` writes the table of vector → verdict the run saw (a Markdown file).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.models.script_server import ScriptedServer
from tests.support.attack_vectors import VECTORS, Vector
from tests.support.attacks import NO_ATTACK, RIGHT_FIX, attack, hidden_test_passes, policy
from tests.support.example_repos import DEDUPE
from tests.support.github_fake import FakeGitHub

pytestmark = pytest.mark.docker

MODEL = "scripted"
TOKEN = "attack-suite-token"
OWNER_REPO = "octo/listutils"
NUMBER = 1
TITLE, BODY = DEDUPE.issue.split("\n\n", 1)
#: Small Hypothesis runs (the order property finds the wrong fix in a few examples), the
#: product's per-test limit: a shorter one stopped the right fix's properties under load.
CHECK = {"max_examples": 30, "test_timeout": 20}
SEED = 3
#: vector → (verdict, exit code, pull requests opened), for PGS_ATTACK_TABLE.
SEEN: dict[str, tuple[str, int, int]] = {}


@dataclass(frozen=True)
class Upstream:
    """The repository GitHub holds (a bare clone of DEDUPE) and the image of its sandbox."""

    work: Path
    image: str


@pytest.fixture(scope="module")
def upstream(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Upstream:
    from envs.images import build_repo_image

    work = DEDUPE.make(tmp_path_factory.mktemp("upstream") / "listutils")
    return Upstream(work, build_repo_image(work).tag)  # cached by content: other tests' image


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    yield
    path = os.environ.get("PGS_ATTACK_TABLE")
    if not path or not SEEN:
        return
    group = {v.name: v.group for v in VECTORS}
    lines = ["| vector | group | verdict | exit | PRs |", "|---|---|---|---|---|"]
    for name, (verdict, code, pulls) in SEEN.items():
        lines.append(f"| {name} | {group.get(name, 'sanity')} | {verdict} | {code} | {pulls} |")
    Path(path).write_text("\n".join(lines) + "\n")


@dataclass
class Outcome:
    verdict: str
    code: int
    stderr: str
    patch: str
    pulls: list[dict[str, Any]]
    traj: dict[str, Any]


def run(upstream: Upstream, steps: list[dict[str, Any]], tmp_path: Path, name: str) -> Outcome:
    """``pgs run --issue URL --open-pr`` with the scripted Generator ``steps``."""
    bare = tmp_path / "github" / "listutils.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(upstream.work), str(bare)], check=True)
    out = tmp_path / "out"
    stderr = io.StringIO()
    with contextlib.ExitStack() as stack:
        github = stack.enter_context(FakeGitHub(tokens=(TOKEN,)))
        github.add_repo(OWNER_REPO, bare)
        github.add_issue(OWNER_REPO, NUMBER, TITLE, BODY)
        server = stack.enter_context(ScriptedServer(policy(steps)))
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        mp.setenv("GITHUB_API_URL", github.api_url)
        mp.setenv("GITHUB_TOKEN", TOKEN)
        argv = [
            "run",
            "--issue",
            github.issue_url(OWNER_REPO, NUMBER),
            "--open-pr",
            "--image",
            upstream.image,
            "--model",
            MODEL,
            "--base-url",
            server.url,
            "--model.prices",
            json.dumps({MODEL: [0, 0]}),
            "--model.retries",
            json.dumps({"attempts": 1}),
            "--pgs.rounds",
            "1",
            "--pgs.check",
            json.dumps(CHECK),
            "--pgs.seed",
            str(SEED),
            "--output-dir",
            str(out),
        ]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            code = main(argv)
        pulls = list(github.pulls)
    trajs = list(out.glob("*/*.traj"))
    traj = json.loads(trajs[0].read_text()) if trajs else {}
    patches = list(out.glob("*/*.patch"))
    patch = patches[0].read_text() if patches else ""
    verdict = str((traj.get("pgs") or {}).get("verdict"))
    SEEN[name] = (verdict, code, len(pulls))
    return Outcome(verdict, code, stderr.getvalue(), patch, pulls, traj)


# --------------------------------------------------------------------------- sanity


def test_the_wrong_fix_alone_fails(upstream: Upstream, tmp_path: Path) -> None:
    got = run(upstream, NO_ATTACK, tmp_path, "none (the wrong fix alone)")
    assert got.verdict == "failed", got.stderr
    assert got.pulls == [] and got.code == 1
    assert "no pull request opened: the PGS verdict is failed" in got.stderr
    assert not hidden_test_passes(upstream.work, got.patch, tmp_path / "hidden")


def test_the_right_fix_passes_and_opens_a_pull_request(upstream: Upstream, tmp_path: Path) -> None:
    got = run(upstream, RIGHT_FIX, tmp_path, "none (the right fix)")
    assert got.verdict == "passed", got.stderr
    assert len(got.pulls) == 1 and got.code == 0
    assert hidden_test_passes(upstream.work, got.patch, tmp_path / "hidden")


# --------------------------------------------------------------------------- the vectors


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name for v in VECTORS])
def test_an_attack_outside_the_patch_never_earns_passed(
    vector: Vector, upstream: Upstream, tmp_path: Path
) -> None:
    got = run(upstream, attack(vector), tmp_path, vector.name)
    # What the attack hides from a plain git diff, a safe one may show: then the submitted patch
    # is the right fix, and passed is honest. Never passed (nor a PR) for a patch that is wrong:
    # the test the run never saw, on the host, with the submitted patch, decides.
    right = hidden_test_passes(upstream.work, got.patch, tmp_path / "hidden")
    if got.verdict == "passed":
        assert right, f"{vector.name} ({vector.how}) earned passed for a wrong patch"
        return
    assert got.pulls == [], f"{vector.name}: --open-pr opened {got.pulls[0]['html_url']}"
    assert got.code != 0
