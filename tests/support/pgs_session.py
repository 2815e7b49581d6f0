"""Scripting and running PGS sessions end to end, for tests/pgs/test_pgs*.py and the tests that
build on them: the Generator and the Tester over the scripted server (the real openai client over
HTTP), real Docker sandboxes of the planted-bug repositories of ``example_repos``.

A session is scripted with a policy that tells the two conversations apart by their system
prompt (the Tester's starts with "You are a test engineer") and answers each by how far it has
got, so the order in which the two ask does not matter. A :class:`Run` is what a user sees: the
``.traj``, the messages each model received, the printed output, the output files.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main
from agent.core.loop import RunResult
from agent.models.script_server import ScriptedServer
from agent.run.config import load_config
from agent.run.outputs import RunPaths, output_paths
from agent.run.run_task import run_task
from agent.run.task import check_repo, load_issue
from tests.support.example_repos import ExampleRepo

MODEL = "scripted"
TESTER_MODEL = "scripted-tester"
PRICES = {MODEL: [0.0, 0.0], TESTER_MODEL: [0.0, 0.0]}
FAST_RETRIES = {"attempts": 2, "min_wait": 0.01, "max_wait": 0.05}
#: Small Hypothesis runs, the product's per-test limit (20 s): a limit of a few seconds stopped
#: sound properties of a loaded machine and changed the reports. The hanging candidate's test
#: sets a shorter one (HANGS, tests/pgs/test_pgs.py).
CHECK = {"max_examples": 50, "test_timeout": 20}


#: The run's seed (--pgs.seed): each check draws its own inputs from it, the same on a replay.
SEED = 1
TESTER_PROMPT = "You are a test engineer"
#: Words only the Generator's (or only the Tester's) reasoning holds, to see who saw what.
GENERATOR_SECRET = "generator-reasoning-7f3a"
TESTER_SECRET = "tester-reasoning-91c2"


def call(name: str, content: str = "", **arguments: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


def write_files(files: Mapping[str, str], thought: str) -> dict[str, Any]:
    """One bash step writing ``files`` (paths relative to the repository) with heredocs."""
    parts = []
    for path, text in files.items():
        folder = path.rsplit("/", 1)[0] if "/" in path else "."
        parts.append(f"mkdir -p {folder} && cat > {path} <<'PGS_EOF'\n{text}PGS_EOF")
    return call("bash", thought, command="\n".join(parts))


def submit(thought: str) -> dict[str, Any]:
    return call("submit", thought)


def candidate(repo: ExampleRepo, text: str, why: str) -> dict[str, Any]:
    return write_files({repo.module: text}, f"{GENERATOR_SECRET}: {why}")


def is_tester(request: Mapping[str, Any]) -> bool:
    return str(request["messages"][0]["content"]).startswith(TESTER_PROMPT)


def asked(request: Mapping[str, Any]) -> int:
    """How many replies this conversation already holds: the index of the next step."""
    return sum(m["role"] == "assistant" for m in request["messages"])


Policy = Callable[[dict[str, Any]], Any]


def session(generator: list[dict[str, Any]], tester: list[dict[str, Any]]) -> Policy:
    """One policy for both conversations; a step past the end is a 400 (the run errors)."""

    def policy(request: dict[str, Any]) -> Any:
        steps = tester if is_tester(request) else generator
        n = asked(request)
        return steps[n] if n < len(steps) else None

    return policy


def only_the_generator(generator: list[dict[str, Any]]) -> Policy:
    """For a server the Tester must never reach."""

    def policy(request: dict[str, Any]) -> Any:
        assert not is_tester(request), "the Tester asked the Generator's server"
        return generator[asked(request)]

    return policy


def only_the_tester(tester: list[dict[str, Any]]) -> Policy:
    def policy(request: dict[str, Any]) -> Any:
        assert is_tester(request), "the Generator asked the Tester's server"
        return tester[asked(request)]

    return policy


def writing_properties(repo: ExampleRepo, files: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        call(
            "str_replace_editor",
            f"{TESTER_SECRET}: read the code the issue names.",
            command="view",
            path=f"/repo/{repo.module}",
        ),
        write_files(files, f"{TESTER_SECRET}: properties for the rule and what must not change."),
        submit("Properties written."),
    ]


#: Removes repeats but sorts lists of five or more: the repository's example tests (four
#: elements at most) still pass, so only the properties find it, with a five-element list and
#: with a twenty-element one.
SORTS_LONG_LISTS = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    if len(xs) > 4:
        return sorted(set(xs))
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out
'''


@dataclass
class Run:
    result: RunResult | None
    paths: RunPaths
    requests: list[dict[str, Any]]
    tester_requests: list[dict[str, Any]]
    stdout: str = ""
    stderr: str = ""
    code: int = 0

    @property
    def traj(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.paths.traj.read_text())
        return data

    @property
    def pgs(self) -> dict[str, Any]:
        record: dict[str, Any] = self.traj["pgs"]
        return record

    @property
    def generator_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if not is_tester(r)]

    @property
    def feedback(self) -> list[str]:
        return [r["feedback"] for r in self.pgs["rounds"] if r.get("feedback")]


@dataclass(frozen=True)
class Example:
    repo: ExampleRepo
    path: Path
    image: str


def _example(repo: ExampleRepo, tmp_path_factory: pytest.TempPathFactory) -> Example:
    from envs.images import build_repo_image

    path = repo.make(tmp_path_factory.mktemp(repo.name) / repo.name)
    return Example(repo, path, build_repo_image(path).tag)  # cached by content


def run_session(
    example: Example,
    out: Path,
    policy: Policy,
    pgs: Mapping[str, Any],
    *,
    tester_policy: Policy | None = None,
) -> Run:
    """run_task over one scripted server (or two: ``tester_policy`` serves the Tester)."""
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ScriptedServer(policy))
        options: dict[str, Any] = {"check": CHECK, "seed": SEED, **pgs}
        tester = None
        if tester_policy is not None:
            tester = stack.enter_context(ScriptedServer(tester_policy, model=TESTER_MODEL))
            options.update(tester_model=TESTER_MODEL, tester_base_url=tester.url)
        base = {
            "model": {
                "name": MODEL,
                "base_url": server.url,
                "prices": PRICES,
                "retries": FAST_RETRIES,
            },
            "sandbox": {"image": example.image},
            "pgs": options,
        }
        config = load_config(None, base)
        task = load_issue(example.repo.issue, check_repo(example.path, allow_dirty=False))
        result = run_task(task, config, out)
        return Run(
            result,
            output_paths(out, task.instance_id),
            server.requests,
            tester.requests if tester else [],
        )


def pgs_run(example: Example, out: Path, policy: Policy, *flags: str) -> Run:
    """``pgs run`` in this process, its stdout and stderr captured."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with ScriptedServer(policy) as server:
        argv = [
            "run",
            "--repo",
            str(example.path),
            "--issue",
            example.repo.issue,
            "--model",
            MODEL,
            "--base-url",
            server.url,
            "--image",
            example.image,
            "--model.prices",
            json.dumps(PRICES),
            "--model.retries",
            json.dumps(FAST_RETRIES),
            "--pgs.check",
            json.dumps(CHECK),
            "--pgs.seed",
            str(SEED),
            "--output-dir",
            str(out),
            *flags,
        ]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
        requests = server.requests
    (traj,) = out.glob("*/*.traj")
    paths = output_paths(out, traj.stem)
    return Run(None, paths, requests, [], stdout.getvalue(), stderr.getvalue(), code)


def counterexample(text: str) -> list[int]:
    """The list in ``xs=[...]`` of a feedback message or selection input."""
    match = re.search(r"xs=\[([-\d, ]*)\]", text)
    assert match, text
    return [int(x) for x in match[1].split(",") if x.strip()]
