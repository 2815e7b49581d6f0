"""Repository images: an environment layer, then the repository at one commit.

``pgs-env-<folder>:<hash12>`` is the base image of the chosen Python plus a venv at
``/opt/pgs/venv`` (first on PATH: ``python``, ``pip`` and the repository's test tools are its
own) with the detected dependencies (:mod:`envs.images.detect`) installed. It is keyed by the
dependency files' contents and the index day (below), so a new commit of the same day that
changes no dependency reuses it.
``pgs-repo-<folder>:<hash12>`` adds the repository at ``/repo`` (HEAD at the commit, history back
to its nearest tag, no later commit), installs the project (or, with ``run_install: false``,
only its declared requirements), keeps wheels of its build requirements for offline reinstalls,
adds pytest and Hypothesis for the Tester without changing a version the environment holds, and
ignores what the install left behind. Both are built with the package indexes in reach and
nothing else (:mod:`envs.images.buildnet`); containers of these images run with the network off.

Both resolve against the package index as it was at the start of one day (UTC): by default the
day of the commit's committer date, so an old commit gets the dependencies of its time; ``now``
(``image.index_date``, ``--index-date``) resolves against today's. Exact pins (``==``, a lock
file's versions, pgs's own :data:`TOOL_PINS`) are kept even when newer. The day is in both
images' labels (``pgs-agent.index_date``) and in the environment layer's key: commits of the
same day with the same dependency files share it, two days make two.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envs import scratch
from envs.docker_util import labels
from envs.errors import ImageBuildError
from envs.images import build
from envs.images.base import BuildMethod, ensure_base_image
from envs.images.build import (
    IMAGE_ENV,
    Layer,
    Status,
    cache_dir,
    digest,
    file_lock,
    image_exists,
    quiet,
    recipe,
)
from envs.images.detect import DEPS_DIR, LOCK_CONSTRAINTS, choose_python, detect_dependencies
from envs.images.git import commit_day, dependency_files, history_clone, resolve_commit, show
from envs.images.snapshot import exact_pins, merge_pins
from envs.images.spec import RepoImageSpec

if TYPE_CHECKING:
    import docker

#: Where the repository is inside a repository image.
REPO_PATH = "/repo"
#: Bump to rebuild every repository image (part of the hash).
RECIPE_VERSION = "2"
#: pgs's own requirements, kept whatever the index day: the venv's bootstrap, and the
#: `editables` the offline wheels step fetches (first released in 2020: an older day has none).
TOOL_PINS = (*build.ENV_BOOTSTRAP, "editables==0.5")


@dataclass(frozen=True)
class RepoImage:
    """A built (or found) repository image."""

    tag: str
    image_id: str
    commit: str
    python: str
    #: True when the image already existed and nothing was built.
    cache_hit: bool
    seconds: float
    #: The package index it resolved against: a day (YYYY-MM-DD, as it was at its start, UTC)
    #: or ``now``.
    index_date: str = "now"


def repo_image_name(repo: Path, prefix: str = "pgs-repo") -> str:
    # Cut first, strip after: a cut may end on a separator, which Docker refuses.
    name = re.sub(r"[^a-z0-9]+", "-", Path(repo).resolve().name.lower())[:60].strip("-")
    return f"{prefix}-{name or 'repo'}"


def load_repo_spec(repo: Path, commit: str = "HEAD") -> RepoImageSpec:
    """The ``image`` section of ``.pgs.yaml`` at ``commit`` (empty when absent)."""
    repo = Path(repo).resolve()
    text = show(repo, resolve_commit(repo, commit), ".pgs.yaml")
    return RepoImageSpec() if text is None else RepoImageSpec.from_yaml(text.decode())


def index_day(repo: Path, sha: str, choice: str | None) -> str:
    """The day whose package index a build resolves against: ``choice`` (YYYY-MM-DD or
    ``now``), else (``commit``, None) the UTC day of the commit's committer date."""
    if choice in (None, "commit"):
        return commit_day(repo, sha)
    return str(choice)


def index_moment(day: str) -> str | None:
    """The moment the build proxy filters by (:mod:`envs.images.snapshot`): the start of
    ``day``, UTC; None for ``now`` (no filter)."""
    return None if day == "now" else f"{day}T00:00:00Z"


def _with_hint(error: ImageBuildError, *, detected: bool) -> ImageBuildError:
    """The error with what to do next: give the install commands (or fix the ones given)."""
    if detected:
        hint = (
            "pgs could not install this repository the way it detected; give the commands that "
            "install it (run in /repo with the network, after the detected dependencies): "
            "`pgs env build REPO --install CMD` (repeatable), `pgs run ... --setup CMD`, or "
            "`image: {install: [CMD, ...]}` in the repository's .pgs.yaml"
        )
    else:
        hint = "one of the given install commands (--install, --setup or .pgs.yaml) failed: fix it"
    better = ImageBuildError(error.step, error.output)
    better.args = (f"{better}\n{hint}",)
    return better


def build_layered(
    client: docker.DockerClient,
    env: Layer,
    env_tag: str,
    repo: Layer,
    repo_tag: str,
    status: Status,
) -> tuple[str, bool]:
    """Build the environment layer (if missing), then the repository layer on it (if missing).

    Returns the repository image's ID and whether it existed already."""
    if image_id := image_exists(client, repo_tag):
        return image_id, True
    with file_lock(env_tag.replace(":", "-").replace("/", "-")):
        if not image_exists(client, env_tag):
            status(f"docker build {env_tag} (the environment; package indexes only)")
            env.build(client, env_tag)
    with file_lock(repo_tag.replace(":", "-").replace("/", "-")):
        if image_id := image_exists(client, repo_tag):
            return image_id, True
        status(f"docker build {repo_tag} (the repository; package indexes only)")
        return repo.build(client, repo_tag), False


def build_repo_image(
    repo: Path | str,
    commit: str = "HEAD",
    spec: RepoImageSpec | None = None,
    *,
    base_method: BuildMethod = "debootstrap",
    status: Status | None = None,
    client: docker.DockerClient | None = None,
    run_id: str | None = None,
) -> RepoImage:
    """The image of ``repo`` at ``commit``, built only when no image with its hash exists.

    ``spec`` overrides ``.pgs.yaml`` field by field. The base image is built first if missing.
    With ``run_install`` false no code of the repository runs: ``.pgs.yaml``'s install commands
    are dropped (those of ``spec``, the user's own, still run) and the project is not built.
    """
    from envs.docker_util import docker_client

    started = time.monotonic()
    status = status or quiet
    repo = Path(repo).resolve()
    sha = resolve_commit(repo, commit)
    files = dependency_files(repo, sha)
    user_file = show(repo, sha, ".pgs.yaml")
    merged = RepoImageSpec.from_yaml(user_file.decode()) if user_file else RepoImageSpec()
    if spec is not None:
        merged = merged.overridden_by(spec)
    if not merged.run_install and (spec is None or "install" not in spec.model_fields_set):
        merged = merged.model_copy(update={"install": None})  # the repository's own: not run
    plan = detect_dependencies(files, merged)
    python = choose_python(merged, plan)
    day = index_day(repo, sha, merged.index_date)
    moment = index_moment(day)
    # What is pinned exactly (pgs's own pip/setuptools/wheel, the repository's == pins and lock
    # file) is kept even when newer than the moment; only the rest resolves as of the moment.
    pins = merge_pins(exact_pins(TOOL_PINS), plan.pins())
    client = client or docker_client()
    base = ensure_base_image(python, method=base_method, status=status, client=client)

    if merged.install is None:
        env_steps, project_steps = plan.env_steps(), plan.project_steps(merged.run_install)
        deps = {f"{DEPS_DIR}/{p}": c for p, c in plan.requirement_files.items()}
    else:  # the user's commands replace what was detected; they need the source: repo layer
        env_steps = [s for s in plan.env_steps() if not s.startswith(f"cd {DEPS_DIR}")]
        project_steps, deps = list(merged.install), {}
    if deps:
        env_steps.append(f"rm -rf {DEPS_DIR}")
    if plan.constraints:
        deps[LOCK_CONSTRAINTS] = plan.constraints
    env_layer = Layer(
        base=base,
        steps=[*build.venv_steps(), *env_steps],
        # The folder PIP_FIND_LINKS names, so pip does not warn at every step that it is missing.
        files={**deps, f"{build.OFFLINE_WHEELS}/.pgs-keep": b""},
        env=IMAGE_ENV,
        labels=labels(run_id, kind="env", repo=repo.name, python=python, index_date=day),
        index_moment=moment,
        index_pins=pins,
    )
    files_key = sorted((p, hashlib.sha256(c).hexdigest()) for p, c in deps.items())
    pins_key = sorted((name, sorted(versions)) for name, versions in pins.items())
    env_key = digest(RECIPE_VERSION, base, env_layer.script(), files_key, moment, pins_key)
    env_tag = f"{repo_image_name(repo, 'pgs-env')}:{env_key[:12]}"
    steps = [
        *build.git_setup_steps(),
        *project_steps,
        build.offline_wheels_step(plan.build_requires),
        build.TESTER_STEP,
        *build.finish_repo_steps(),
    ]
    repo_key = digest(env_tag, sha, steps, recipe("pgs-gitignore"))
    tag = f"{repo_image_name(repo)}:{repo_key[:12]}"
    if image_id := image_exists(client, tag):
        return RepoImage(
            tag=tag,
            image_id=image_id,
            commit=sha,
            python=python,
            cache_hit=True,
            seconds=time.monotonic() - started,
            index_date=day,
        )
    builds = cache_dir() / "build"
    builds.mkdir(parents=True, exist_ok=True)
    with scratch.temporary_directory("clone-", builds) as tmp:  # owner named: envs.scratch
        history_clone(repo, sha, Path(tmp) / "repo")
        repo_layer = Layer(
            base=env_tag,
            steps=steps,
            workdir=REPO_PATH,
            files={"/etc/pgs-gitignore": recipe("pgs-gitignore").encode()},
            folders={REPO_PATH: Path(tmp) / "repo"},
            labels=labels(
                run_id, kind="repo", repo=repo.name, commit=sha, python=python, index_date=day
            ),
            index_moment=moment,
            index_pins=pins,
        )
        try:
            image_id, hit = build_layered(client, env_layer, env_tag, repo_layer, tag, status)
        except ImageBuildError as e:
            raise _with_hint(e, detected=merged.install is None) from e
    return RepoImage(
        tag=tag,
        image_id=image_id,
        commit=sha,
        python=python,
        cache_hit=hit,
        seconds=time.monotonic() - started,
        index_date=day,
    )
