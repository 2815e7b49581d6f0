"""The run's sandbox: opened from the run's configuration (the repository's image built and the
tool bundles' layer added when the sandbox starts from an image), given the repository and the
user's uncommitted changes, and closed after an error without hiding it."""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.core.tools import Toolset
from agent.errors import InputError
from agent.run.config import RunConfig
from agent.run.hooks import RunHook
from agent.run.task import head_commit, host_git, own_files
from agent.run.toolimage import needs_image, tools_image
from envs.errors import EnvError
from envs.registry import make_sandbox
from envs.sandbox import SCRATCH_DIRS, Sandbox

if TYPE_CHECKING:
    from envs.images import RepoImageSpec

logger = logging.getLogger(__name__)


def open_sandbox(
    config: RunConfig,
    repo: Path,
    run_id: str,
    hooks: RunHook,
    image_spec: RepoImageSpec | None = None,
    toolset: Toolset | None = None,
    record: dict[str, Any] | None = None,
    leave_out: Iterable[Path] = (),
) -> Sandbox:
    """The run's sandbox (:func:`envs.registry.make_sandbox`). One that starts from an image
    (Docker) gets the repository's image when none is given, with ``toolset``'s bundles
    installed when one has an install.sh (:func:`sandbox_image`). The image
    built, and the day of the package index it resolved against, go into ``record`` (the
    ``task`` of the trajectory's ``replay_config``). What is untracked under ``leave_out``
    (pgs's own files: the issue file, the output folder, :func:`agent.run.task.own_files`)
    is not carried in."""
    sandbox_config = config.sandbox
    if sandbox_config.takes_image:
        if not sandbox_config.image_tag():
            from envs.images import build_repo_image

            hooks.on_status("preparing the repository image (cached after the first time)")
            image = build_repo_image(repo, spec=image_spec, status=hooks.on_status, run_id=run_id)
            sandbox_config = sandbox_config.updated(image=image.tag)
            if record is not None:
                record |= {"image": image.tag, "index_date": image.index_date}
        tag = sandbox_config.image_tag()
        if toolset is not None and tag:
            tools_image = sandbox_image(tag, toolset, hooks.on_status)
            sandbox_config = sandbox_config.updated(image=tools_image)
        hooks.on_status("starting the sandbox")
    box = make_sandbox(sandbox_config, repo=repo, run_id=run_id)
    try:
        copied = sandbox_config.copies_repo or _upload_if_missing(box, repo, hooks)
        _carry_working_tree(box, repo, copied=copied, own=own_files(repo, leave_out))
        hooks.on_sandbox(box)
    except BaseException:
        close_after_error(box)
        raise
    return box


def sandbox_image(image: str, toolset: Toolset, status: Callable[[str], None]) -> str:
    """The image to start: ``image`` itself, or its tools layer when a bundle has install.sh
    (:func:`agent.run.toolimage.tools_image`)."""
    if not needs_image(toolset.bundles):
        return image
    from envs.docker_util import docker_client

    status("installing the tool bundles in the image (cached after the first time)")
    return tools_image(
        docker_client(),
        image,
        toolset.bundles,
        env_variables=toolset.env_variables,
        registry=toolset.registry_variables,
    )


def close_after_error(box: Sandbox) -> None:
    """Close ``box`` while an error or an interrupt unwinds. A failure to close is only a
    warning: what ended the run stays what the user sees, and what the exit code says."""
    try:
        box.close()
    except Exception as e:
        logger.warning("could not close the sandbox: %s", e)


def _upload_if_missing(box: Sandbox, repo: Path, hooks: RunHook) -> bool:
    """Copy the host repository in when the image holds none at ``repo_path`` (a base image,
    an image of the user's own); True when it did. An image that holds the repository (one
    from ``pgs env build``) must hold it at the commit the user is on."""
    head = box.run(f"git -C {shlex.quote(box.repo_path)} rev-parse HEAD", cwd="/")
    ours = head_commit(repo)
    if head.ok:
        if head.output.strip() != ours:
            raise InputError(
                f"the image holds a repository at {box.repo_path} at commit "
                f"{head.output.strip()[:12]}, but {repo} is at {ours[:12]}: build an image "
                "for this commit (`pgs env build`) or leave the image unset"
            )
        return False
    from envs.images import recipe

    hooks.on_status("copying the repository into the sandbox")
    box.upload(repo, box.repo_path)
    # What repository images ignore (envs/recipes/pgs-gitignore): running Python or pytest in
    # the sandbox must not put __pycache__ into the patch. .git/info/exclude is the sandbox's.
    box.write_file("/tmp/pgs-gitignore", recipe("pgs-gitignore"))
    box.run("cat /tmp/pgs-gitignore >> .git/info/exclude")
    return True


def _carry_working_tree(box: Sandbox, repo: Path, *, copied: bool, own: Sequence[str]) -> None:
    """Give the sandbox the user's uncommitted changes, committed there, so the agent's patch
    holds only the agent's own changes and applies on top of the user's tree. ``copied``: the
    sandbox already holds the working tree (LocalSandbox), only the commit is missing.
    An untracked symbolic link is carried as a link (its target's path, never its content:
    a link to a host file or folder brings nothing of the host in). The untracked files
    ``own`` (pgs's own) are not carried: removed from a copy, never written into an image."""
    if copied:
        for start in range(0, len(own), 100):
            names = " ".join(shlex.quote(name) for name in own[start : start + 100])
            box.run(f"rm -f -- {names}")
    patch = host_git(repo, "diff", "HEAD", "--binary")
    listed = host_git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    mine = set(own)
    untracked = [name for name in listed if name and name not in mine]
    if not patch and not untracked:
        return
    if patch and not copied:
        box.write_file("/tmp/pgs-worktree.patch", patch)
        result = box.run("git apply --whitespace=nowarn /tmp/pgs-worktree.patch")
        if not result.ok and "already exists" not in result.output:
            raise EnvError(f"could not carry the uncommitted changes over:\n{result.output}")
    for name in untracked:
        if copied or any(name.startswith(d + "/") for d in SCRATCH_DIRS):
            continue
        path = repo / name
        if path.is_symlink():
            link, target = shlex.quote(name), shlex.quote(str(path.readlink()))
            made = box.run(f'mkdir -p "$(dirname -- {link})" && ln -sfn -- {target} {link}')
            if not made.ok:
                raise EnvError(f"could not carry the link {name} over:\n{made.output}")
        else:
            box.write_file(name, path.read_bytes())
    box.run(
        "git add -A && git -c user.name=pgs -c user.email=pgs@localhost "
        "commit -q --no-verify -m 'pgs: uncommitted changes'"
    )


def base_commit(box: Sandbox) -> str:
    """The sandbox's commit once it is ready (the user's uncommitted changes committed): the
    original code of every check and the base of the patch, whatever the agent later does
    to ``HEAD`` (a commit, a checkout, a reset)."""
    done = box.run("git rev-parse --verify HEAD^{commit}")
    sha = done.output.strip().splitlines()[-1] if done.ok and done.output.strip() else ""
    if not re.fullmatch(r"[0-9a-f]{40,64}", sha):
        raise EnvError(f"cannot read the sandbox's base commit: {done.output[-300:]}")
    return sha
