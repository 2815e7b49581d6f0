"""What the checking tests share: settings, the property roles validation sees, and small
helpers that write properties, apply a patch or commit files in a sandbox."""

from __future__ import annotations

from typing import Any

from agent.pgs.runner import CheckSettings
from agent.record.check import CheckReport, TestResult
from envs.docker_sandbox import DockerSandbox
from tests.support.example_repos import ExampleRepo

#: The per-test time limit is the product's default (20 s): a limit of a few seconds stopped
#: properties of a loaded machine and changed their reports (a test of timeouts sets its own).
SETTINGS = CheckSettings(test_timeout=20, run_timeout=120)


VALIDATED = [
    "issue_sound",
    "issue_generated",
    "regression_sound",
    "issue_unsound_passes",
    "regression_unsound_fails",
    "name_error",
    "import_error",
    "bad_strategy",
]


def result_of(nodeid: str, category: str, kind: str = "repo") -> TestResult:
    outcome = "passed" if category == "pass" else "failed"
    return TestResult.model_validate(
        {"nodeid": nodeid, "kind": kind, "outcome": outcome, "category": category}
    )


def write_properties(sandbox: DockerSandbox, repo: ExampleRepo, *roles: str) -> list[str]:
    paths = []
    for role in roles:
        sandbox.write_file(repo.property_path(role), repo.properties[role])
        paths.append(repo.property_path(role))
    return paths


def apply_patch(sandbox: DockerSandbox, patch: str) -> None:
    sandbox.write_file("/tmp/candidate.patch", patch)
    assert sandbox.run("git apply /tmp/candidate.patch").ok


def by_role(report: CheckReport, repo: ExampleRepo) -> dict[str, TestResult]:
    """Results of files with one property, by role."""
    by_file = {r.nodeid.split("::")[0]: r for r in report.results}
    return {
        role: by_file[repo.property_path(role)]
        for role in repo.properties
        if repo.property_path(role) in by_file
    }


def commit_files(sandbox: DockerSandbox, files: dict[str, str]) -> str:
    for path, text in files.items():
        sandbox.write_file(path, text)
    done = sandbox.run("git add -A && git -c user.name=t -c user.email=t@t commit -qm extra")
    assert done.ok, done.output
    return sandbox.run("git rev-parse HEAD").output.strip()


def assert_unsound_dropped(reasons: dict[str, str]) -> None:
    """The five unsound DEDUPE properties are dropped, each for its own reason (``reasons``:
    file path -> reason, as the validation records it)."""
    from tests.support.example_repos import DEDUPE

    path = DEDUPE.property_path
    unsound = (
        "issue_unsound_passes",
        "regression_unsound_fails",
        "name_error",
        "import_error",
        "bad_strategy",
    )
    assert set(reasons) == {path(role) for role in unsound}
    assert "does not capture the bug" in reasons[path("issue_unsound_passes")]
    assert reasons[path("regression_unsound_fails")].startswith("unsound: fails on the original")
    assert "itself raised NameError" in reasons[path("name_error")]
    assert reasons[path("import_error")].startswith("the file does not import")
    assert reasons[path("bad_strategy")].startswith("bad strategy (InvalidArgument)")


def without_durations(report: Any) -> Any:
    """A report without its timings: each test's duration, each pooled input's runtime."""
    if isinstance(report, dict):
        return {
            k: without_durations(v) for k, v in report.items() if k not in ("duration", "runtime")
        }
    if isinstance(report, list):
        return [without_durations(v) for v in report]
    return report
