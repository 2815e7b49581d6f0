"""One task from start to finish: check the inputs, open the sandbox, run the Generator, write
``<id>.traj``, ``<id>.patch`` and ``<id>.pred`` under the output folder."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.core.config import RunConfig, dump
from agent.core.hooks import Hooks, RunHook
from agent.core.loop import Agent, RunResult
from agent.core.toolenv import sandbox_image
from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory, secrets_from_env, write_atomic
from agent.models import GlobalStats, get_model
from agent.pgs.compare import prediction_fields
from agent.pgs.feedback import get_counter
from agent.pgs.method import PGS
from agent.pgs.records import PGSRecord
from envs.errors import EnvError, NotAGitRepository
from envs.registry import make_sandbox
from envs.sandbox import SCRATCH_DIRS, Sandbox

if TYPE_CHECKING:
    from envs.images import RepoImageSpec

logger = logging.getLogger(__name__)


class InputError(ValueError):
    """A repository, issue or option the user must fix; the message says how."""


@dataclass(frozen=True)
class Task:
    instance_id: str
    problem_statement: str
    repo: Path
    #: Overrides of the repository image (``--setup``), over the repository's ``.pgs.yaml``.
    image_spec: RepoImageSpec | None = None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def check_repo(repo: Path, *, allow_dirty: bool) -> Path:
    repo = Path(repo).expanduser()
    if not repo.exists():
        raise InputError(f"the repository path {repo} does not exist")
    repo = repo.resolve()
    try:
        top = Path(_git(repo, "rev-parse", "--show-toplevel").strip())
        _git(repo, "rev-parse", "--verify", "HEAD")
    except subprocess.CalledProcessError:
        raise NotAGitRepository(
            f"{repo} is not a git repository with a commit: run `git init` and commit, or "
            "point --repo at the folder that holds .git"
        ) from None
    if top != repo:
        raise InputError(f"{repo} is inside the repository {top}: pass --repo {top}")
    dirty = _git(repo, "status", "--porcelain", "--untracked-files=normal").strip()
    if dirty and not allow_dirty:
        first = dirty.splitlines()[0]
        raise InputError(
            f"the working tree of {repo} has uncommitted changes ({first.strip()!r}...): commit "
            "or stash them, or pass --allow-dirty to work on top of them"
        )
    return repo


def looks_like_path(issue: str) -> bool:
    """One word that ends in .md or .txt or holds a '/': meant as a file, not as the issue's
    text (which has spaces: "parse_date('2024/02/30') should raise" is text)."""
    word = issue.strip()
    return (
        bool(word)
        and not any(c.isspace() for c in word)
        and ("/" in word or word.lower().endswith((".md", ".txt")))
    )


def load_issue(issue: str, repo: Path) -> Task:
    """``issue`` is a file's path or the issue's text itself; a word that looks like a path
    (:func:`looks_like_path`) must be an existing file."""
    path = Path(issue.strip()).expanduser()
    is_file = len(issue) < 1024 and "\n" not in issue and path.is_file()
    if not is_file and looks_like_path(issue):
        what = "is a folder" if path.is_dir() else "no such file"
        raise InputError(
            f"--issue {issue.strip()}: {what}; give an existing file or the issue's text"
        )
    try:
        text = path.read_text(encoding="utf-8") if is_file else issue
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--issue {path}: cannot read it as UTF-8 text ({e})") from None
    if not text.strip():
        where = f"the file {path}" if is_file else "the --issue text"
        raise InputError(f"{where} is empty: describe the problem to fix")
    stem = path.stem if is_file else "issue-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    instance_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{repo.name}__{stem}").strip("-")
    return Task(instance_id, text.strip(), repo)


def open_sandbox(
    config: RunConfig,
    repo: Path,
    run_id: str,
    hooks: RunHook,
    image_spec: RepoImageSpec | None = None,
    toolset: Toolset | None = None,
) -> Sandbox:
    """The run's sandbox (:func:`envs.registry.make_sandbox`). One that starts from an image
    (Docker) gets the repository's image when none is given, with ``toolset``'s bundles
    installed when one has an install.sh (:func:`agent.core.toolenv.sandbox_image`)."""
    sandbox_config = config.sandbox
    if sandbox_config.takes_image:
        if not sandbox_config.image_tag():
            from envs.images import build_repo_image

            hooks.on_status("preparing the repository image (cached after the first time)")
            image = build_repo_image(repo, spec=image_spec, status=hooks.on_status, run_id=run_id)
            sandbox_config = sandbox_config.updated(image=image.tag)
        tag = sandbox_config.image_tag()
        if toolset is not None and tag:
            tools_image = sandbox_image(tag, toolset, hooks.on_status)
            sandbox_config = sandbox_config.updated(image=tools_image)
        hooks.on_status("starting the sandbox")
    box = make_sandbox(sandbox_config, repo=repo, run_id=run_id)
    try:
        copied = sandbox_config.copies_repo or _upload_if_missing(box, repo, hooks)
        _carry_working_tree(box, repo, copied=copied)
    except BaseException:
        close_after_error(box)
        raise
    return box


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
    ours = _git(repo, "rev-parse", "HEAD").strip()
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


def _carry_working_tree(box: Sandbox, repo: Path, *, copied: bool) -> None:
    """Give the sandbox the user's uncommitted changes, committed there, so the agent's patch
    holds only the agent's own changes and applies on top of the user's tree. ``copied``: the
    sandbox already holds the working tree (LocalSandbox), only the commit is missing."""
    patch = _git(repo, "diff", "HEAD", "--binary")
    untracked = _git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    if not patch and not any(untracked):
        return
    if patch and not copied:
        box.write_file("/tmp/pgs-worktree.patch", patch)
        result = box.run("git apply --whitespace=nowarn /tmp/pgs-worktree.patch")
        if not result.ok and "already exists" not in result.output:
            raise EnvError(f"could not carry the uncommitted changes over:\n{result.output}")
    for name in filter(None, untracked):
        if not copied and not any(name.startswith(d + "/") for d in SCRATCH_DIRS):
            box.write_file(name, (repo / name).read_bytes())
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


def default_output_dir(model: str) -> Path:
    """``trajectories/<time>-<model>-<random>``: two runs started in the same second get two
    folders."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("trajectories") / f"{stamp}-{model.replace('/', '_')}-{uuid.uuid4().hex[:6]}"


def output_paths(output_dir: Path, instance_id: str) -> dict[str, Path]:
    folder = output_dir / instance_id
    paths = {ext: folder / f"{instance_id}.{ext}" for ext in ("traj", "patch", "pred")}
    paths["properties"] = folder / f"{instance_id}.properties.patch"
    return paths


def check_output_dir(output_dir: Path, instance_id: str, *, overwrite: bool) -> None:
    """Refuse a folder that holds a previous run's results for ``instance_id``; with
    ``overwrite`` remove them, so that the folder never mixes two runs' files."""
    found = [p for p in output_paths(output_dir, instance_id).values() if p.exists()]
    if not found:
        return
    if not overwrite:
        names = ", ".join(p.name for p in found)
        raise InputError(
            f"{found[0].parent} already holds a run of {instance_id} ({names}): pass another "
            "--output-dir, or --overwrite to replace it"
        )
    for path in found:
        path.unlink()


def make_reviewer(
    config: RunConfig,
    task: Task,
    sandbox: Sandbox,
    toolset: Toolset,
    traj: Trajectory,
    global_stats: GlobalStats | None,
    hooks: RunHook,
    base: str = "HEAD",
) -> PGS | None:
    """The PGS Tester and checks, unless ``--feedback none`` (the Generator alone)."""
    pgs = config.pgs
    if pgs.feedback == "none":
        traj.extra["pgs"] = {"mode": "none"}
        return None
    tester_model_config = config.model.model_copy(
        update={
            "name": pgs.tester_model or config.model.name,
            "base_url": pgs.tester_base_url or config.model.base_url,
        }
    )

    def on_review(text: str) -> None:
        hooks.on_status(f"PGS: {text}")

    return PGS(
        pgs,
        sandbox=sandbox,
        toolset=toolset,
        tester_model=get_model(tester_model_config, global_stats),
        counter=get_counter(config.model, pgs.tokenizer),
        trajectory=traj,
        problem_statement=task.problem_statement,
        function_calling=config.model.function_calling,
        status=on_review,
        base=base,
    )


def run_task(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    *,
    hooks: Iterable[RunHook] = (),
    global_stats: GlobalStats | None = None,
) -> RunResult:
    """Run ``task``; ``hooks`` see it start, its progress, each step and its end
    (:mod:`agent.core.hooks`)."""
    run_id = uuid.uuid4().hex[:12]
    hook = Hooks(hooks)
    hook.on_start(task, config)
    paths = output_paths(output_dir, task.instance_id)
    replay = dump(config)
    replay["task"] = {"instance_id": task.instance_id, "repo": str(task.repo)}
    traj = Trajectory(
        paths["traj"], replay_config=replay, secrets=secrets_from_env([config.model.api_key_env])
    )
    traj.info["instance_id"] = task.instance_id
    traj.info["base_commit"] = _git(task.repo, "rev-parse", "HEAD").strip()
    model = get_model(config.model, global_stats)
    toolset = Toolset.from_paths(
        config.tools.bundles,
        registry_variables=config.tools.registry_variables,
        env_variables=config.tools.env_variables,
    )
    sandbox = open_sandbox(config, task.repo, run_id, hook, task.image_spec, toolset)
    try:
        base = base_commit(sandbox)
        traj.info["sandbox_base_commit"] = base
        hook.on_status("the agent is working")
        reviewer = make_reviewer(config, task, sandbox, toolset, traj, global_stats, hook, base)
        agent = Agent(
            config.agent,
            model,
            sandbox,
            toolset,
            traj,
            function_calling=config.model.function_calling,
            on_step=hook.on_step,
            reviewer=reviewer,
            base=base,
        )
        result = agent.run(task.problem_statement)
        if reviewer is not None and config.pgs.keep_properties:
            write_atomic(paths["properties"], reviewer.properties_patch())
    except BaseException:
        close_after_error(sandbox)
        raise
    sandbox.close()
    write_atomic(paths["patch"], result.submission)
    pred = {
        "instance_id": task.instance_id,
        "model_name_or_path": config.model.name,
        "model_patch": result.submission,
        **prediction_fields(traj.as_dict(), mode=config.pgs.feedback),
    }
    write_atomic(paths["pred"], json.dumps(pred, indent=1))
    hook.on_done(result, paths)
    return result


def usage(result: RunResult) -> dict[str, float]:
    """Tokens and cost of the whole run: the Generator's ``model_stats`` plus every Tester
    turn's (``pgs.tester``, ``pgs.tester_2``, ...)."""
    out = {"tokens_sent": 0.0, "tokens_received": 0.0, "instance_cost": 0.0, "tester_cost": 0.0}
    pgs = PGSRecord.from_trajectory(result.trajectory)
    testers = [c.info.get("model_stats") for c in pgs.conversations().values()]
    runs = [(result.trajectory.info.get("model_stats"), False), *((t, True) for t in testers)]
    for stats, is_tester in runs:
        for key in ("tokens_sent", "tokens_received", "instance_cost"):
            out[key] += float((stats or {}).get(key, 0) or 0)
        if is_tester:
            out["tester_cost"] += float((stats or {}).get("instance_cost", 0) or 0)
    return out


def apply_patch(repo: Path, patch: str) -> None:
    """Apply the agent's patch to the user's working tree (checked first, all or nothing)."""
    if not patch.strip():
        raise InputError("the run produced an empty patch: nothing to apply")
    for check in (True, False):
        args = ["git", "apply", "--whitespace=nowarn", *(["--check"] if check else []), "-"]
        done = subprocess.run(args, cwd=repo, input=patch, text=True, capture_output=True)
        if done.returncode != 0:
            raise InputError(
                f"the patch does not apply to {repo}: {done.stderr.strip()}; the patch file "
                "is kept, apply it by hand"
            )
