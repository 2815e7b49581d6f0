"""``pgs run --issue URL``: issue URLs parse back to their owner, repository and number; pull
request, repository and malformed URLs are refused, each saying which, before GitHub is asked
anything."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.errors import InputError
from agent.github.client import parse_issue_url
from tests.support.github_cli import argv, cli_error
from tests.support.github_fake import NUMBER, REPO, FakeGitHub

# isort: split
# Fixtures: pytest finds them by their names in this module.
from tests.support.github_cli import _env, issue_labels, upstream_files  # noqa: F401

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True).filter(
    lambda s: not s.endswith(".git")
)


@given(owner=names, name=names, number=st.integers(1, 10**7))
def test_issue_urls_parse_back_to_owner_repo_number(owner: str, name: str, number: int) -> None:
    for url in (
        f"https://github.com/{owner}/{name}/issues/{number}",
        f"github.com/{owner}/{name}/issues/{number}/",
        f"https://www.github.com/{owner}/{name}/issues/{number}#issuecomment-1",
    ):
        ref = parse_issue_url(url, "https://api.github.com")
        assert (ref.owner, ref.name, ref.number) == (owner, name, number)


@given(owner=names, name=names, number=st.integers(1, 10**7))
def test_pull_request_and_repository_urls_are_refused_naming_what_they_are(
    owner: str, name: str, number: int
) -> None:
    with pytest.raises(InputError, match="is a pull request URL, not an issue"):
        parse_issue_url(
            f"https://github.com/{owner}/{name}/pull/{number}", "https://api.github.com"
        )
    with pytest.raises(InputError, match="is a repository URL, not an issue"):
        parse_issue_url(f"https://github.com/{owner}/{name}", "https://api.github.com")


def test_enterprise_issue_urls_live_on_the_api_host() -> None:
    ref = parse_issue_url("https://ghe.example/team/lib/issues/3", "https://ghe.example/api/v3")
    assert (ref.full_name, ref.number) == ("team/lib", 3)
    with pytest.raises(InputError, match=r"host github.com is not GitHub's \(ghe.example\)"):
        parse_issue_url("https://github.com/a/b/issues/1", "https://ghe.example/api/v3")


def test_cli_rejects_malformed_issue_urls_saying_which(
    fake: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    base = f"http://{fake.host}/{REPO}"
    cases = {
        f"{base}/pull/{NUMBER}": "is a pull request URL, not an issue",
        base: "is a repository URL, not an issue",
        f"{base}/issues": "names no issue: add its number",
        f"{base}/issues/seven": "'seven' is not a positive number",
        f"{base}/wiki/Home": "is not a GitHub issue URL",
        f"https://gitlab.com/{REPO}/issues/1": "host gitlab.com is not GitHub's",
        "fix the bug please": "without --repo, --issue must be a GitHub issue URL",
    }
    for url, expected in cases.items():
        assert expected in cli_error(capsys, *argv(url)), url
    assert fake.requests == []  # refused before asking GitHub anything
