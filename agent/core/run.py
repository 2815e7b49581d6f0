"""One task from start to finish: check the inputs, open the sandbox, run the Generator, write
``<id>.traj``, ``<id>.patch`` and ``<id>.pred`` under the output folder.

Once the Generator has started, the three files are written whatever ends the run (a submission,
a limit, an error, an interrupt), with the diff so far. A run the loop ended with an error raises
:class:`RunFailed` (its cause chained), an interrupt stays a KeyboardInterrupt; a result file
that cannot be written (disk full, a read-only folder) raises :class:`OutputNotWritten`, naming
what was kept. :func:`check_writable` refuses an output folder pgs cannot write, before any
image work."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import posixpath
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.core.config import RunConfig, config_yaml, dump
from agent.core.hooks import Hooks, RunHook
from agent.core.loop import Agent, RunResult
from agent.core.secrets import Redactor
from agent.core.toolenv import sandbox_image
from agent.core.tools import Toolset
from agent.core.trajectory import Trajectory, write_atomic
from agent.models import GlobalStats, ModelConfig, ModelError, check_priced, get_model
from agent.pgs.compare import prediction_fields
from agent.pgs.feedback import get_counter
from agent.pgs.records import PGSRecord
from agent.pgs.reviewer import PGS
from agent.pgs.shared import SharedProperties
from envs.errors import EnvError, NotAGitRepository
from envs.registry import make_sandbox
from envs.sandbox import SCRATCH_DIRS, Sandbox

if TYPE_CHECKING:
    from envs.images import RepoImageSpec

logger = logging.getLogger(__name__)


class InputError(ValueError):
    """A repository, issue or option the user must fix; the message says how."""


class RunFailed(RuntimeError):
    """An error ended the run once the Generator had started (its exit status: ``exit_error``);
    its ``.traj``, ``.patch`` and ``.pred`` hold the work so far. ``str()`` is the error and
    where the work is; ``.result`` is the run's result."""

    def __init__(self, error: BaseException, result: RunResult, folder: Path) -> None:
        known = (InputError, EnvError, ModelError)
        what = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
        self.result = result
        super().__init__(
            f"{what} (exit status {result.exit_status}; the work so far is in {folder})"
        )


class OutputNotWritten(RuntimeError):
    """A result file could not be written (disk full, a read-only folder). ``str()`` names the
    file, the reason and what was kept; ``.submission`` is the patch, for the caller to show."""

    def __init__(self, path: Path, error: OSError, kept: list[str], submission: str) -> None:
        self.submission = submission
        saved = ", ".join(kept) or "nothing"
        super().__init__(
            f"cannot write {path} ({error.strerror or error}): kept {saved}; free some space "
            "or choose another --output-dir"
        )


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
    return Task(instance_id=instance_id, problem_statement=text.strip(), repo=repo)


def open_sandbox(
    config: RunConfig,
    repo: Path,
    run_id: str,
    hooks: RunHook,
    image_spec: RepoImageSpec | None = None,
    toolset: Toolset | None = None,
    record: dict[str, Any] | None = None,
) -> Sandbox:
    """The run's sandbox (:func:`envs.registry.make_sandbox`). One that starts from an image
    (Docker) gets the repository's image when none is given, with ``toolset``'s bundles
    installed when one has an install.sh (:func:`agent.core.toolenv.sandbox_image`). The image
    built, and the day of the package index it resolved against, go into ``record`` (the
    ``task`` of the trajectory's ``replay_config``)."""
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
    sandbox already holds the working tree (LocalSandbox), only the commit is missing.
    An untracked symbolic link is carried as a link (its target's path, never its content:
    a link to a host file or folder brings nothing of the host in)."""
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


def default_output_dir(model: str) -> Path:
    """``trajectories/<time>-<model>-<random>``: two runs started in the same second get two
    folders."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("trajectories") / f"{stamp}-{model.replace('/', '_')}-{uuid.uuid4().hex[:6]}"


def output_paths(output_dir: Path, instance_id: str) -> dict[str, Path]:
    folder = output_dir / instance_id
    paths = {ext: folder / f"{instance_id}.{ext}" for ext in ("traj", "patch", "pred")}
    paths["properties"] = folder / f"{instance_id}.properties.patch"
    # Not results: the run's log and resolved config (agent.core.runlog; --config takes it).
    paths["log"] = folder / f"{instance_id}.log"
    paths["config"] = folder / f"{instance_id}.config.yaml"
    return paths


#: The files that say a run of the instance was made (its log and config alone do not).
RESULTS = ("traj", "patch", "pred", "properties")


def check_output_dir(output_dir: Path, instance_id: str, *, overwrite: bool) -> None:
    """Refuse a folder that holds a previous run's results for ``instance_id``; with
    ``overwrite`` remove them, so that the folder never mixes two runs' files."""
    paths = output_paths(output_dir, instance_id)
    found = [paths[key] for key in RESULTS if paths[key].exists()]
    if not found:
        return
    if not overwrite:
        names = ", ".join(p.name for p in found)
        raise InputError(
            f"{found[0].parent} already holds a run of {instance_id} ({names}): pass another "
            "--output-dir, or --overwrite to replace it"
        )
    for path in paths.values():
        path.unlink(missing_ok=True)


def _write_probe(folder: Path, probe: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.write(fd, b"x" * 4096)  # a folder on a full disk still takes an empty file
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def check_writable(output_dir: Path) -> None:
    """Refuse an output folder pgs cannot create or write in (read-only, a file in the way, no
    permission, full), before any image work: a run that cannot keep its results is not
    started. A probe file is created, written and removed, and so are the folders made for it."""
    folder = Path(output_dir).absolute()
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    probe = folder / f".pgs-write-check-{os.getpid()}"
    try:
        for attempt in range(3):
            try:
                _write_probe(folder, probe)
                break
            except FileNotFoundError:  # another pgs removed a folder it made for its probe
                if attempt == 2:
                    raise
        for path in made:  # deepest first; the run makes them again
            with contextlib.suppress(OSError):  # in use by a run started beside this one
                path.rmdir()
    except OSError as e:
        reason = "a file is in the way" if e.errno in (errno.EEXIST, errno.ENOTDIR) else None
        raise InputError(
            f"cannot write results in {folder} ({reason or e.strerror or e}): pass a writable "
            "--output-dir"
        ) from None


def write_results(
    paths: dict[str, Path], task: Task, config: RunConfig, traj: Trajectory, submission: str
) -> None:
    """Write the ``.traj``, the ``.patch`` and the ``.pred``, each tried even when one before it
    failed (a full disk may still take a small file); a failure raises
    :class:`OutputNotWritten`, naming the first file not written and what was kept."""
    pred = {
        "instance_id": task.instance_id,
        "model_name_or_path": config.model.name,
        "model_patch": submission,
        **prediction_fields(traj.as_dict(), mode=config.pgs.feedback),
    }
    redact = traj.redactor.redact  # no host secret in any file (agent.core.secrets)
    kept: list[str] = []
    writes = [
        (paths["traj"], traj.save),
        (paths["patch"], lambda: write_atomic(paths["patch"], redact(submission))),
        (paths["pred"], lambda: write_atomic(paths["pred"], redact(json.dumps(pred, indent=1)))),
    ]
    failed: tuple[Path, OSError] | None = None
    for path, write in writes:
        try:
            write()
        except OSError as e:
            failed = failed or (path, e)
            if path == paths["traj"] and path.exists():
                kept.append(f"{path.name} as of an earlier step")
            continue
        kept.append(path.name)
    if failed is not None:
        raise OutputNotWritten(failed[0], failed[1], kept, submission) from failed[1]


def tester_model_config(config: RunConfig) -> ModelConfig:
    """The Tester's model: the Generator's, with ``pgs.tester_model`` / ``tester_base_url``."""
    return config.model.model_copy(
        update={
            "name": config.pgs.tester_model or config.model.name,
            "base_url": config.pgs.tester_base_url or config.model.base_url,
        }
    )


def check_prices(config: RunConfig) -> None:
    """Before a run starts (no clone, image or sandbox yet): every model it calls has a price
    while a cost limit is on (:func:`agent.models.check_priced`), else one line saying how to
    give one or turn the limits off; and its model class can be imported."""
    check_priced(config.model)
    if config.pgs.tester_model not in (None, config.model.name):
        check_priced(tester_model_config(config), who="Tester's model")


def make_reviewer(
    config: RunConfig,
    task: Task,
    sandbox: Sandbox,
    toolset: Toolset,
    traj: Trajectory,
    global_stats: GlobalStats | None,
    hooks: RunHook,
    base: str = "HEAD",
    shared: SharedProperties | None = None,
) -> PGS | None:
    """The PGS Tester and checks, unless ``--feedback none`` (the Generator alone);
    ``shared``: another attempt's property set, adopted instead of a Tester turn."""
    pgs = config.pgs
    if pgs.feedback == "none":
        traj.extra["pgs"] = {"mode": "none"}
        return None

    def on_review(text: str) -> None:
        hooks.on_status(f"PGS: {text}")

    return PGS(
        pgs,
        sandbox=sandbox,
        toolset=toolset,
        tester_model=get_model(tester_model_config(config), global_stats),
        counter=get_counter(config.model, pgs.tokenizer),
        trajectory=traj,
        problem_statement=task.problem_statement,
        function_calling=config.model.function_calling,
        status=on_review,
        base=base,
        on_round=hooks.on_round,
        shared=shared,
        generator_config=config.agent,
    )


def run_task(
    task: Task,
    config: RunConfig,
    output_dir: Path,
    *,
    hooks: Iterable[RunHook] = (),
    global_stats: GlobalStats | None = None,
    paths: dict[str, Path] | None = None,
    shared: SharedProperties | None = None,
) -> RunResult:
    """Run ``task``; ``hooks`` see it start, its progress, each step and its end
    (:mod:`agent.core.hooks`). ``paths``: where its files go (default: :func:`output_paths`);
    ``shared``: a property set to adopt (one attempt of several, :mod:`agent.pgs.attempts`)."""
    run_id = uuid.uuid4().hex[:12]
    hook = Hooks(hooks)
    hook.on_start(task, config)
    paths = paths or output_paths(output_dir, task.instance_id)
    replay = dump(config)
    replay["task"] = {"instance_id": task.instance_id, "repo": str(task.repo)}
    redactor = Redactor.for_config(config)
    write_atomic(paths["config"], redactor.redact(config_yaml(config)))  # --config takes it
    traj = Trajectory(paths["traj"], replay_config=replay, redactor=redactor)
    traj.info["instance_id"] = task.instance_id
    traj.info["base_commit"] = _git(task.repo, "rev-parse", "HEAD").strip()
    model = get_model(config.model, global_stats)
    toolset = Toolset.from_paths(
        config.tools.bundles,
        registry_variables=config.tools.registry_variables,
        env_variables=config.tools.env_variables,
        submit_tools=config.tools.submit_tools,
        submit_commands=config.tools.submit_commands,
        forfeit_tools=config.tools.forfeit_tools,
    )
    sandbox = open_sandbox(
        config, task.repo, run_id, hook, task.image_spec, toolset, record=replay["task"]
    )
    agent: Agent | None = None
    try:
        base = base_commit(sandbox)
        traj.info["sandbox_base_commit"] = base
        hook.on_status("the agent is working")
        reviewer = make_reviewer(
            config, task, sandbox, toolset, traj, global_stats, hook, base, shared
        )
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
            write_atomic(paths["properties"], redactor.redact(reviewer.properties_patch()))
    except BaseException as e:
        close_after_error(sandbox)
        if agent is None:  # the Generator never started: no exit status, nothing to keep
            raise
        _keep_work_after(e, task, config, traj, paths)
        raise
    sandbox.close()
    write_results(paths, task, config, traj, result.submission)
    hook.on_done(result, paths)
    return result


def _keep_work_after(
    error: BaseException, task: Task, config: RunConfig, traj: Trajectory, paths: dict[str, Path]
) -> None:
    """Write the results of a run the loop ended with ``error`` (its exit status and the diff
    so far are in ``traj.info``); raise :class:`RunFailed` for an error. An interrupt is left
    to propagate: a file that cannot be written then is only a warning."""
    submission = str(traj.info.get("submission") or "")
    try:
        write_results(paths, task, config, traj, submission)
    except OutputNotWritten as unwritten:
        if not isinstance(error, Exception):
            logger.warning("%s", unwritten)
            return
        raise unwritten from error
    if isinstance(error, Exception):
        status = str(traj.info.get("exit_status") or "exit_error")
        result = RunResult(
            exit_status=status,
            submission=submission,
            steps=int(traj.info.get("steps") or 0),
            trajectory=traj,
        )
        raise RunFailed(error, result, paths["traj"].parent) from error


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


def apply_patch(
    repo: Path,
    patch: str,
    *,
    exit_status: str = "submitted",
    force: bool = False,
    redacted: Sequence[str] = (),
    patch_file: Path | None = None,
) -> None:
    """Apply the agent's patch to the user's working tree (checked first, all or nothing).

    Refused, each with one :class:`InputError` naming the fix: an empty patch; a patch of a
    run whose ``exit_status`` is not ``submitted`` (a limit, an error, an interrupt ended it),
    unless ``force``; a patch whose secret values were redacted (``redacted``: the variables'
    names; it no longer holds what the agent wrote); a patch that makes a symbolic link point
    outside the repository (:func:`links_outside`)."""
    where = f" (the patch is in {patch_file})" if patch_file else ""
    if not patch.strip():
        raise InputError("the run produced an empty patch: nothing to apply")
    if exit_status != "submitted" and not force:
        raise InputError(
            f"the run ended with {exit_status}, not a submitted patch, so --apply left your "
            f"tree alone{where}: review it and pass --force with --apply to apply it anyway"
        )
    if redacted:
        raise InputError(
            f"the patch held the value of {', '.join(redacted)}, written as *** in its place, "
            f"so it is not applied{where}: put the value back by hand and apply it with "
            "`git apply`"
        )
    outside = links_outside(patch, repo)
    if outside:
        raise InputError(
            f"the patch makes the symbolic link {outside[0]} point outside the repository, so "
            f"it is not applied{where}: review it, remove that link and apply it with "
            "`git apply`"
        )
    for check in (True, False):
        args = ["git", "apply", "--whitespace=nowarn", *(["--check"] if check else []), "-"]
        done = subprocess.run(args, cwd=repo, input=patch, text=True, capture_output=True)
        if done.returncode != 0:
            raise InputError(
                f"the patch does not apply to {repo}: {done.stderr.strip()}; the patch file "
                "is kept, apply it by hand"
            )


_LINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000$|^index \S+ 120000$")


def links_outside(patch: str, repo: Path) -> list[str]:
    """``link -> target`` of each symbolic link the git patch makes (new, changed, renamed or
    copied) whose target lies outside the repository: absolute, or ``..`` past its top."""
    found = []
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        lines = section.splitlines()
        path = old = ""
        added = []
        for line in lines:
            if line.startswith("+++ "):
                path = _patch_path(line[4:])
            elif line.startswith(("rename to ", "copy to ")):
                path = _unquote(line.split(" to ", 1)[1])
            elif line.startswith(("rename from ", "copy from ")):
                old = _unquote(line.split(" from ", 1)[1])
            elif line.startswith("+") and not line.startswith("+++"):
                added.append(line[1:])
        to_file = any(re.match(r"(?:new file mode|new mode) 100", line) for line in lines)
        moved_link = bool(old) and (repo / old).is_symlink() and not to_file
        if not path or not (moved_link or any(_LINK_MODE.match(line) for line in lines)):
            continue
        if added:
            target = "\n".join(added)
        elif moved_link:  # renamed or copied as it is: the same target, from a new place
            target = str((repo / old).readlink())
        else:
            continue
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if posixpath.isabs(target) or inside == ".." or inside.startswith("../"):
            found.append(f"{path} -> {target}")
    return found


def _unquote(name: str) -> str:
    """A path as git writes it in a patch header (C-quoted when it holds special bytes)."""
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        name = name.encode("latin-1", "replace").decode("utf-8", "replace")
    return name


def _patch_path(header: str) -> str:
    """``b/PATH`` of a ``+++`` line, without the ``b/``."""
    name = _unquote(header.split("\t", 1)[0])
    return "" if name == "/dev/null" else name.removeprefix("b/")
