"""Instance images: the official harness's environment, built here in two layers.

``pgs-sweb-env-<repo>-<version>:<hash12>`` (shared by every instance of one repository and
version, as the harness's environment images are): a base image with the instance's Python
(:mod:`envs.images.base`), a venv at ``/opt/pgs/venv`` first on PATH (``python``, ``pip``),
the environment steps of :func:`agent.swebench.specs.env_steps`, wheels of the project's
build requirements for offline reinstalls, and pytest and Hypothesis for the Tester, added
without changing a version the environment holds. ``pgs-sweb-<instance>:<hash12>`` adds the
repository in ``/testbed`` at ``base_commit`` (history back to its nearest tag, no later
commit), runs the spec's ``pre_install`` and ``install``, and commits what the setup changed in
tracked files
(as the harness does) so the tree is clean. Both are built with the host's network, like the
harness builds; every container of them runs with the network off. A ``conda`` no-op and an
empty ``/opt/miniconda3/bin/activate`` let the harness's evaluation scripts, written for its
conda images, run unchanged.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.swebench.official import official_image
from agent.swebench.records import (
    Instance,
    InstanceError,
    Status,
    check_commits,
    find_mirror,
    quiet,
)
from agent.swebench.specs import InstanceSpec, env_steps, instance_spec
from envs import images
from envs.docker_util import docker_client, labels
from envs.errors import ImageBuildError

#: Where the repository is in an instance image (as in swebench's images).
TESTBED = "/testbed"
#: Bump to rebuild every instance image.
IMAGE_RECIPE_VERSION = "3"
CONDA_SHIM = b"""#!/bin/sh
# pgs instance images have no conda: the harness's `conda activate testbed` is a no-op here
# (the venv of the testbed is first on PATH already).
exit 0
"""


@dataclass(frozen=True)
class InstanceImage:
    tag: str
    python: str
    cache_hit: bool
    seconds: float
    deviations: list[str]


def _name(prefix: str, text: str) -> str:
    return f"{prefix}-" + re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80].strip("-")


def image_name(instance: Instance) -> str:
    return _name("pgs-sweb", instance.instance_id)


def env_name(instance: Instance) -> str:
    """The name of the environment image shared by the instances of one repository version."""
    return _name("pgs-sweb-env", f"{instance.repo}-{instance.version}")


def _build_requires(mirror: Path, sha: str) -> list[str]:
    import tomllib

    text = images.show(mirror, sha, "pyproject.toml")
    try:
        data = tomllib.loads(text.decode(errors="replace")) if text else {}
    except tomllib.TOMLDecodeError:
        data = {}
    return [str(r) for r in data.get("build-system", {}).get("requires", [])]


def add_submodules(tree: Path, repos_dir: Path | None) -> list[str]:
    """Check out the submodules of the clone at ``tree`` from ``repos_dir/OWNER__NAME``, at the
    commits the clone records (the harness's images get them from GitHub when the install runs
    `git submodule update`). Returns what could not be found, one sentence each."""
    import configparser
    import subprocess

    modules = tree / ".gitmodules"
    if not modules.is_file():
        return []
    parser = configparser.ConfigParser()
    parser.read_string(modules.read_text(errors="replace"))
    missing = []
    for section in parser.sections():
        path, url = (
            parser.get(section, "path", fallback=""),
            parser.get(section, "url", fallback=""),
        )
        match = re.search(r"[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url)
        listed = subprocess.run(
            ["git", "-C", str(tree), "ls-tree", "HEAD", path], capture_output=True, text=True
        ).stdout.split()
        if not path or not match or len(listed) < 3 or listed[1] != "commit":
            continue
        source = repos_dir / f"{match[1]}__{match[2]}" if repos_dir else None
        if source is None or not images.has_commit(source, listed[2]):
            missing.append(f"submodule {path} ({url} at {listed[2][:12]}) is not in --repos-dir")
            continue
        if (tree / path).is_dir():  # the empty folder git leaves for a submodule
            (tree / path).rmdir()
        images.history_clone(source, listed[2], tree / path)
    return missing


def build_instance_image(
    instance: Instance,
    spec: InstanceSpec,
    mirror: Path,
    *,
    repos_dir: Path | None = None,
    status: Status = quiet,
    client: Any = None,
    run_id: str | None = None,
) -> InstanceImage:
    """The instance's image, built only when no image with its content hash exists."""
    started = time.monotonic()
    check_commits(instance, mirror)
    client = client or docker_client()
    base = images.ensure_base_image(spec.python, status=status, client=client)
    steps = [
        *images.venv_steps(),
        *env_steps(instance, spec, mirror),
        images.offline_wheels_step(_build_requires(mirror, instance.environment_setup_commit)),
        # In the shared layer: a second instance of the environment only clones and installs.
        images.TESTER_STEP,
    ]
    env_layer = images.Layer(
        base=base,
        steps=steps,
        env=images.IMAGE_ENV,
        files={
            "/usr/local/bin/conda": CONDA_SHIM,
            "/opt/miniconda3/bin/activate": b"# pgs: no conda; the venv is on PATH\n",
        },
        labels=labels(run_id, kind="swebench-env", repo=instance.repo, version=instance.version),
        index_moment=spec.index_moment,
    )
    env_steps_text = env_layer.script()
    env_key = images.digest(
        IMAGE_RECIPE_VERSION, base, env_steps_text, spec.python, spec.index_moment
    )
    env_tag = f"{env_name(instance)}:{env_key[:12]}"
    repo_steps = [
        "chmod +x /usr/local/bin/conda",
        *images.git_setup_steps(),
        *spec.pre_install,
        *spec.install,
        *images.finish_repo_steps(),
    ]
    key = images.digest(env_tag, instance.base_commit, repo_steps, images.recipe("pgs-gitignore"))
    tag = f"{image_name(instance)}:{key[:12]}"
    deviations = list(spec.deviations)
    if images.image_exists(client, tag):
        return InstanceImage(tag, spec.python, True, time.monotonic() - started, deviations)
    builds = images.cache_dir() / "build"
    builds.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="testbed-", dir=builds) as tmp:
        try:
            images.history_clone(mirror, instance.base_commit, Path(tmp) / "testbed")
            deviations += add_submodules(Path(tmp) / "testbed", repos_dir)
        except ImageBuildError as e:
            raise InstanceError(
                f"{instance.instance_id}: base_commit {instance.base_commit[:12]} cannot be "
                f"checked out from {mirror} (a data problem of this copy, e.g. a snapshot "
                f"without some large files, not of pgs): {e}"
            ) from None
        repo_layer = images.Layer(
            base=env_tag,
            steps=repo_steps,
            workdir=TESTBED,
            files={"/etc/pgs-gitignore": images.recipe("pgs-gitignore").encode()},
            folders={TESTBED: Path(tmp) / "testbed"},
            index_moment=spec.index_moment,
            labels=labels(
                run_id,
                kind="swebench",
                instance=instance.instance_id,
                commit=instance.base_commit,
                python=spec.python,
                deviations="; ".join(deviations),
            ),
        )
        _, hit = images.build_layered(client, env_layer, env_tag, repo_layer, tag, status)
    return InstanceImage(tag, spec.python, hit, time.monotonic() - started, deviations)


@dataclass
class Environments:
    """Instance images for a batch or an evaluation: one build per instance, thread-safe."""

    repos_dir: Path | None
    python_map: Mapping[str, str]
    image_source: str = "build"
    run_id: str | None = None
    #: Where official images come from: a mirror registry HOST:PORT (default: Docker Hub).
    registry: str | None = None
    _done: dict[str, InstanceImage] = field(default_factory=dict)

    def spec(self, instance: Instance) -> InstanceSpec:
        """The instance's spec; an official image brings its own Python, so none is chosen."""
        return instance_spec(instance, self.python_map, own_python=self.image_source == "official")

    def image(self, instance: Instance, status: Status = quiet) -> InstanceImage:
        if instance.instance_id in self._done:
            return self._done[instance.instance_id]
        started = time.monotonic()
        if self.image_source == "official":
            status("pulling the official image (once)")
            tag = official_image(instance, registry=self.registry)
            result = InstanceImage(tag, "official", True, time.monotonic() - started, [])
        else:
            spec = self.spec(instance)
            mirror = find_mirror(instance, self.repos_dir, status)
            status("preparing the instance image (cached after the first time)")
            result = build_instance_image(
                instance,
                spec,
                mirror,
                repos_dir=self.repos_dir,
                status=status,
                run_id=self.run_id,
            )
        self._done[instance.instance_id] = result
        return result
