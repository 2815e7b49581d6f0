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
(as the harness does) so the tree is clean. Both are built step by step as the harness builds,
but with the package indexes (and the Debian mirror, for apt in ``pre_install``) in reach and
nothing else (:mod:`envs.images.buildnet`); every container of them runs with the network off.
A ``conda`` no-op and an empty ``/opt/miniconda3/bin/activate`` let the harness's evaluation
scripts, written for its conda images, run unchanged.

Images are cached per Docker daemon (per node of a Ray cluster). With a ``registry``
(``--registry HOST:PORT``) they are shared: an image missing here is first pulled as
``HOST:PORT/<name>:<hash12>`` (the environment image likewise before it is built), and an image
built here is pushed there once, so the next node pulls it rather than builds it. A failed pull
falls back to building; a failed push is a warning and the run goes on. The content hash in the
tag makes a pulled image the same as a built one.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import MissingData
from agent.swebench.official import _reason, official_image
from agent.swebench.records import Instance, Status, check_commits, find_mirror, quiet
from agent.swebench.specs import InstanceSpec, env_steps, instance_spec
from envs import images, scratch
from envs.docker_util import docker_client, labels
from envs.errors import ImageBuildError

log = logging.getLogger(__name__)

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
    #: Pulled from the registry (built by another node), not built here.
    pulled: bool = False


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


def _unreadable(mirror: Path, sha: str, error: str) -> str:
    """Why ``sha`` cannot be checked out of ``mirror``, in one phrase: the files whose objects
    the copy lacks (a snapshot without some large files), else git's last word."""
    import subprocess

    objects = set(re.findall(r"unable to read ([0-9a-f]{40})", error))
    listed = subprocess.run(
        ["git", "--git-dir", str(mirror), "ls-tree", "-r", sha], capture_output=True, text=True
    ).stdout.splitlines()
    files = [
        line.split("\t", 1)[1] for line in listed if line.split()[2:3] in ([o] for o in objects)
    ]
    if files:
        return f"a file of the commit is not in the repository snapshot ({', '.join(files)})"
    last = [line.strip() for line in error.splitlines() if line.strip().startswith("fatal:")]
    why = last[0] if last else error.strip().splitlines()[-1] if error.strip() else "unknown"
    return f"the commit cannot be checked out from the repository snapshot ({why})"


def pull_from_registry(client: Any, registry: str, tag: str, status: Status = quiet) -> bool:
    """Pull ``registry/tag`` and name it ``tag`` here; False when it cannot be had (then the
    caller builds it: a registry without the image is the first node's normal case)."""
    import docker.errors
    import requests.exceptions

    ref = f"{registry}/{tag}"
    repository, version = ref.rsplit(":", 1)
    status(f"docker pull {ref} (built by another node?)")
    try:
        for chunk in client.api.pull(repository, tag=version, stream=True, decode=True):
            if chunk.get("error"):  # the daemon reports some failures inside the stream
                raise docker.errors.APIError(str(chunk["error"]))
        client.images.get(ref).tag(*tag.rsplit(":", 1))
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        reason = _reason(e)
        if "no such image" not in reason:
            log.warning("cannot pull %s: %s; building it here", ref, reason)
        return False
    finally:
        with contextlib.suppress(Exception):  # one name per image here: the registry's goes
            client.images.remove(ref, noprune=True)
    return True


def push_to_registry(client: Any, registry: str, tags: list[str], status: Status = quiet) -> bool:
    """Push ``tags`` to ``registry`` as ``registry/<tag>``; a failure is a warning, not an error
    (the run goes on; other nodes build the image themselves). Whether all were pushed."""
    import docker.errors
    import requests.exceptions

    for tag in tags:
        ref = f"{registry}/{tag}"
        repository, version = ref.rsplit(":", 1)
        status(f"docker push {ref} (once, for the other nodes)")
        try:
            client.images.get(tag).tag(repository, version)
            for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
                if chunk.get("error"):
                    raise docker.errors.APIError(str(chunk["error"]))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            log.warning("cannot push %s: %s; the run goes on", ref, _reason(e))
            return False
        finally:
            with contextlib.suppress(Exception):
                client.images.remove(ref, noprune=True)
    return True


def build_instance_image(
    instance: Instance,
    spec: InstanceSpec,
    mirror: Path,
    *,
    repos_dir: Path | None = None,
    status: Status = quiet,
    client: Any = None,
    run_id: str | None = None,
    registry: str | None = None,
) -> InstanceImage:
    """The instance's image, built only when no image with its content hash exists here (or,
    with ``registry``, in the registry: then it is pulled; a built one is pushed there)."""
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
        return InstanceImage(
            tag=tag,
            python=spec.python,
            cache_hit=True,
            seconds=time.monotonic() - started,
            deviations=deviations,
        )
    if registry and pull_from_registry(client, registry, tag, status):
        seconds = time.monotonic() - started
        return InstanceImage(
            tag=tag,
            python=spec.python,
            cache_hit=True,
            seconds=seconds,
            deviations=deviations,
            pulled=True,
        )
    if registry and not images.image_exists(client, env_tag):
        pull_from_registry(client, registry, env_tag, status)
    builds = images.cache_dir() / "build"
    builds.mkdir(parents=True, exist_ok=True)
    with scratch.temporary_directory("testbed-", builds) as tmp:
        try:
            images.history_clone(mirror, instance.base_commit, Path(tmp) / "testbed")
            deviations += add_submodules(Path(tmp) / "testbed", repos_dir)
        except ImageBuildError as e:
            raise MissingData(
                f"{instance.instance_id}: base_commit {instance.base_commit[:12]} cannot be "
                f"checked out from {mirror} (a data problem of this copy, e.g. a snapshot "
                f"without some large files, not of pgs): {e}",
                _unreadable(mirror, instance.base_commit, str(e)),
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
    if registry and not hit:
        push_to_registry(client, registry, [env_tag, tag], status)
    return InstanceImage(
        tag=tag,
        python=spec.python,
        cache_hit=hit,
        seconds=time.monotonic() - started,
        deviations=deviations,
    )


@dataclass
class Environments:
    """Instance images for a batch or an evaluation: one build per instance, thread-safe."""

    repos_dir: Path | None
    python_map: Mapping[str, str]
    image_source: str = "build"
    run_id: str | None = None
    #: A registry HOST:PORT: official images are pulled from it (a mirror; default: Docker
    #: Hub); built images are pulled from it when it has them, else pushed to it once built.
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
            result = InstanceImage(
                tag=tag,
                python="official",
                cache_hit=True,
                seconds=time.monotonic() - started,
                deviations=[],
            )
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
                registry=self.registry,
            )
        self._done[instance.instance_id] = result
        return result
