"""git over HTTPS for GitHub runs: clone an issue's repository, commit the agent's patch, push
a branch. Runs git through gitpython; a failure is a :class:`~agent.errors.GitHubError`
(or an :class:`~agent.errors.InputError` for what the user gave) with git's reason, the token
masked. The token travels in an HTTP header given through the environment, never in a URL or a
config file (the clone is copied into the sandbox, where the model could read it).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import git

from agent.errors import GitHubError, InputError
from agent.github.client import Repository
from envs import scratch


def git_env(url: str, token: str | None) -> dict[str, str]:
    """The environment for a git command that talks to ``url``: never prompts; a token goes in
    an HTTP header (HTTPS remotes only), set through GIT_CONFIG_* so nothing is written down."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    if token and url.lower().startswith("https://"):
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
            }
        )
    return env


def _git_reason(error: git.GitCommandError, token: str | None) -> str:
    text = str(error.stderr or error).strip().strip("'").strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if ln.lower().startswith(("fatal", "error", "!", "remote:"))]
    reason = (useful or lines or ["git failed"])[-1]
    return reason.replace(token, "***") if token else reason


def clone(repo: Repository, dest: Path, *, commit: str | None, token: str | None) -> Path:
    """Clone ``repo`` into ``dest`` at its default branch, or at ``commit``."""
    dest = dest.expanduser().resolve()
    if dest.exists() and any(dest.iterdir()):
        raise InputError(
            f"the work folder {dest} exists and is not empty: remove it, or pass another --workdir"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = repo.clone_url
    env = git_env(url, token)
    try:
        cloned = git.Repo.clone_from(url, dest, env=env)
    except git.GitCommandError as e:
        hint = "" if token else "; for a private repository set GITHUB_TOKEN"
        raise GitHubError(f"could not clone {url}: {_git_reason(e, token)}{hint}") from None
    if commit:
        try:
            try:
                cloned.git.checkout("--detach", commit)
            except git.GitCommandError:  # a commit no branch holds (e.g. a PR's): fetch it
                cloned.git.fetch("origin", commit, env=env)
                cloned.git.checkout("--detach", commit)
        except git.GitCommandError:
            raise InputError(
                f"--base-commit {commit} is not a commit of {repo.full_name} ({url})"
            ) from None
    cloned.close()
    return dest


def commit_patch(repo: Path, patch: str, message: str) -> str:
    """A commit of ``patch`` on top of HEAD, made in a private index: the working tree, the
    index and the branches of ``repo`` are left as they are. Returns the commit's SHA."""
    if not patch.strip():
        raise InputError("the run produced an empty patch: nothing to commit")
    handle = git.Repo(repo)
    with scratch.temporary_directory("pgs-index-") as tmp:
        patch_file = Path(tmp) / "agent.patch"
        patch_file.write_text(patch if patch.endswith("\n") else patch + "\n")
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        try:
            handle.git.read_tree("HEAD", env=env)
            handle.git.apply("--cached", "--whitespace=nowarn", str(patch_file), env=env)
            tree = handle.git.write_tree(env=env)
        except git.GitCommandError as e:
            raise InputError(
                f"the patch does not apply to HEAD of {repo}: {_git_reason(e, None)}"
            ) from None
    try:
        handle.git.var("GIT_AUTHOR_IDENT")
        ident: dict[str, str] = {}
    except git.GitCommandError:  # no identity configured: commit as pgs-agent
        ident = {
            f"GIT_{who}_{what}": value
            for who in ("AUTHOR", "COMMITTER")
            for what, value in (("NAME", "pgs-agent"), ("EMAIL", "pgs-agent@users.noreply"))
        }
    sha: str = handle.git.commit_tree(
        tree, "-p", "HEAD", "-m", message, env={**os.environ, **ident}
    )
    handle.close()
    return sha.strip()


def push(repo: Path, url: str, sha: str, branch: str, token: str | None) -> None:
    """Push ``sha`` as ``branch`` to ``url`` (a new branch; an existing one is not overwritten)."""
    handle = git.Repo(repo)
    try:
        handle.git.push(url, f"{sha}:refs/heads/{branch}", env=git_env(url, token))
    except git.GitCommandError as e:
        reason = _git_reason(e, token)
        if "rejected" in reason or "non-fast-forward" in reason or "fetch first" in reason:
            raise GitHubError(
                f"the branch {branch} already exists on {url} with other commits: delete it "
                "there, or open the pull request by hand"
            ) from None
        raise GitHubError(f"could not push {branch} to {url}: {reason}") from None
    finally:
        handle.close()
