"""What every image build shares: the cache folder, locks, recipes, layers built with only the
package indexes in reach (:mod:`envs.images.buildnet`), and what a failed build says."""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import re
import shlex
import tarfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs import scratch
from envs.docker_util import HOST_LABEL, PID_LABEL, STARTED_LABEL, translate_errors
from envs.errors import DISK_FULL_HINT, DiskFull, ImageBuildError, looks_like_disk_full
from envs.scratch import cache_dir

if TYPE_CHECKING:
    import docker

#: Receives a short description of each long step (the CLI shows it in a spinner).
Status = Callable[[str], None]
#: Printed before each step of a build script, so a failure can be named.
STEP_MARKER = "### step: "
#: The Python environment of every image (a venv: `python`, `pip`, `pytest` are its own).
VENV = "/opt/pgs/venv"
#: Wheels of the repository's build requirements, so `pip install -e .` works offline.
OFFLINE_WHEELS = "/opt/pgs/wheels"
#: pip, setuptools and wheel of a new environment: what a conda environment of late 2024 held.
ENV_BOOTSTRAP = ("pip==24.2", "setuptools==75.1.0", "wheel==0.44.0")


def quiet(_: str) -> None:
    pass


def recipe(name: str) -> str:
    """The text of one file in ``envs/recipes``."""
    return resources.files("envs").joinpath("recipes", name).read_text(encoding="utf-8")


def render(name: str, **values: Any) -> str:
    import jinja2

    env = jinja2.Environment(keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(recipe(name)).render(**values)


@contextmanager
def file_lock(name: str) -> Iterator[None]:
    """Serialise builds of the same image across processes (parallel test runs, two CLIs)."""
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def image_exists(client: docker.DockerClient, tag: str) -> str | None:
    """The image ID of ``tag``, or None."""
    import docker.errors

    with translate_errors(f"look up image {tag}"):
        try:
            return str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            return None


def image_labels(client: docker.DockerClient, tag: str) -> dict[str, str]:
    with translate_errors(f"inspect image {tag}"):
        return dict(client.images.get(tag).labels or {})


def label_text(values: Mapping[str, str]) -> str:
    """The arguments of one Dockerfile LABEL line (one line: one layer, not one per label)."""
    return " ".join(f"{k}={json.dumps(v)}" for k, v in values.items())


def short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def raise_build_error(step: str, output: str) -> None:
    if looks_like_disk_full(output):
        raise DiskFull(f"{step}: {DISK_FULL_HINT}")
    raise ImageBuildError(step, output)


def docker_build(
    client: docker.DockerClient,
    *,
    tag: str,
    network_mode: str,
    path: str | None = None,
    fileobj: io.BytesIO | None = None,
    buildargs: Mapping[str, str] | None = None,
) -> str:
    """``docker build``; returns the image ID. A failure names the step that failed."""
    step, output = "docker build", list[str]()
    with translate_errors(f"build {tag}"):
        stream = client.api.build(
            path=path,
            fileobj=fileobj,
            tag=tag,
            network_mode=network_mode,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
            timeout=None,
            buildargs=dict(buildargs or {}),
        )
        for chunk in stream:
            text = chunk.get("stream", "")
            if text.startswith("Step "):
                step, output = text.strip(), []
            for line in text.splitlines():  # one command of a RUN that does several
                if line.startswith(STEP_MARKER):
                    step = line.removeprefix(STEP_MARKER).strip()
            output.append(text)
            if "error" in chunk:
                output.append(str(chunk["error"]))
                raise_build_error(f"docker build {tag}: {short(step)}", "".join(output))
    image_id = image_exists(client, tag)
    if image_id is None:
        raise_build_error(f"docker build {tag}", "".join(output) or "no image was produced")
    assert image_id is not None
    return image_id


@dataclass
class Layer:
    """One image made from another: files copied to ``/``, then shell steps, each named.

    Built as ``docker create`` + one ``docker exec`` of the steps + ``docker commit`` (one
    layer). With ``network=True`` the steps reach the package indexes and nothing else
    (:mod:`envs.images.buildnet`); the build-time settings are given to the exec only, so
    nothing of the host is stored in the layer, the image's config or its history. The image's
    containers never get the network from this. A step is one shell command; a failure names it.
    """

    base: str
    steps: Sequence[str]
    labels: Mapping[str, str]
    workdir: str = "/"
    network: bool = True
    #: Files for the image: path inside the image -> contents.
    files: Mapping[str, bytes] = field(default_factory=dict)
    #: Folders for the image: path inside the image -> a host folder copied whole.
    folders: Mapping[str, Path] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    #: Resolve against the package index as it was at this moment (ISO 8601, UTC), or today.
    index_moment: str | None = None
    #: Exact pins kept visible whatever the moment: canonical name -> versions.
    index_pins: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def script(self) -> str:
        """The steps as one bash script: each announced by its marker, the first failure ends it."""
        run = ["set -e"]
        for command in self.steps:
            run.append(f"printf '%s\\n' {shlex.quote(STEP_MARKER + short(command, 300))}")
            run.append(f"( {command}\n)")
        return "\n".join(run) + "\n"

    def changes(self, base_config: Mapping[str, Any]) -> list[str]:
        """The image config a commit sets: the layer's ENV, WORKDIR and labels; the base's
        entrypoint and command (the build container ran its own); the build container's owner
        labels emptied (a commit keeps the container's labels; they name this host)."""
        owner = dict.fromkeys((PID_LABEL, HOST_LABEL, STARTED_LABEL), "")
        out = [f"WORKDIR {self.workdir}", f"LABEL {label_text({**owner, **self.labels})}"]
        if self.env:
            out.append("ENV " + " ".join(f"{k}={json.dumps(v)}" for k, v in self.env.items()))
        if base_config.get("Entrypoint"):
            out.append(f"ENTRYPOINT {json.dumps(base_config['Entrypoint'])}")
        out.append(f"CMD {json.dumps(base_config.get('Cmd') or ['/bin/sh'])}")
        return out

    def _archive(self, path: Path) -> None:
        """The files and folders as one tar, owned by root as COPY would make them."""

        def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        with tarfile.open(path, "w") as tar:
            for inside, data in self.files.items():
                info = as_root(tarfile.TarInfo(inside.lstrip("/")))
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
            for inside, folder in self.folders.items():
                tar.add(str(folder), arcname=inside.lstrip("/"), filter=as_root)

    def build(self, client: docker.DockerClient, tag: str) -> str:
        from docker.types import Mount

        from envs.docker_util import container_labels
        from envs.images.buildnet import MOUNT, WAIT_FOR_RELAY, build_network

        builds = cache_dir() / "build"
        builds.mkdir(parents=True, exist_ok=True)
        context = scratch.mkdtemp("ctx-", builds)  # its owner in its name (envs.scratch)
        container = None
        try:
            context.chmod(0o755)
            mount = context / "mount"
            mount.mkdir()
            prelude = WAIT_FOR_RELAY + "\n" if self.network else ""
            (mount / "steps.sh").write_text(prelude + self.script())
            archive = context / "files.tar"
            self._archive(archive)
            with (
                translate_errors(f"build {tag}"),
                build_network(
                    mount, network=self.network, moment=self.index_moment, pins=self.index_pins
                ) as net,
            ):
                base_config = client.images.get(self.base).attrs.get("Config") or {}
                relay = f"python3 {MOUNT}/relay.py || python {MOUNT}/relay.py"
                first = (
                    f"({relay}) & exec sleep infinity" if self.network else "exec sleep infinity"
                )
                start = ["/bin/sh", "-c", first]
                # The base's entrypoint is replaced only when it has one: a commit cannot reset
                # an entrypoint to none (changes() restores the base's).
                container = client.containers.create(
                    self.base,
                    **(
                        {"entrypoint": start, "command": []}
                        if base_config.get("Entrypoint")
                        else {"command": start}
                    ),
                    network_mode="none",
                    working_dir=self.workdir,
                    mounts=[Mount(MOUNT, str(mount), type="bind", read_only=True)],
                    labels={**container_labels(), **self.labels},
                )
                with open(archive, "rb") as handle:
                    container.put_archive("/", handle)
                archive.unlink()
                container.start()
                output = _exec(client, container.id, f"{MOUNT}/steps.sh", {**self.env, **net.env})
                if output is not None:
                    step = "docker build"
                    for line in output.splitlines():
                        if line.startswith(STEP_MARKER):
                            step = line.removeprefix(STEP_MARKER).strip()
                    if net.proxy is not None and net.proxy.refusals:
                        output += "\nThe build's proxy refused: " + "; ".join(
                            dict.fromkeys(net.proxy.refusals)
                        )
                    raise_build_error(f"build {tag}: {short(step)}", output)
                container.stop(timeout=1)
                repository, sep, version = tag.rpartition(":")
                if not sep or "/" in version:  # no tag, or the colon of a registry's port
                    repository, version = tag, "latest"
                container.commit(
                    repository=repository,
                    tag=version,
                    changes=self.changes(base_config),
                    message=f"pgs: {len(self.steps)} build steps",
                )
        finally:
            if container is not None:
                with suppress(Exception):
                    container.remove(force=True)
            scratch.remove_tree(context)
        image_id = image_exists(client, tag)
        if image_id is None:
            raise_build_error(f"build {tag}", "no image was produced")
        assert image_id is not None
        return image_id


def _exec(
    client: docker.DockerClient, container: str, script: str, env: Mapping[str, str]
) -> str | None:
    """Run ``script`` with bash in the container, ``env`` given to this command only; None
    when it succeeds, else its output."""
    exec_id = client.api.exec_create(container, ["bash", script], environment=dict(env))["Id"]
    chunks = [c.decode(errors="replace") for c in client.api.exec_start(exec_id, stream=True)]
    if client.api.exec_inspect(exec_id).get("ExitCode") == 0:
        return None
    return "".join(chunks)


def venv_steps(python: str = "python3") -> list[str]:
    """The image's environment: a venv with the pip, setuptools and wheel of ENV_BOOTSTRAP."""
    packages = " ".join(shlex.quote(p) for p in ENV_BOOTSTRAP)
    # Tools that run "the current interpreter" through a symlink of their own (tox-current-env,
    # as SWE-bench's sphinx tests do) reach the base interpreter, which knows no venv: it gets
    # the venv's packages (and their .pth files, editable installs) through a .pth of its own.
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    link = (
        f'site=$({VENV}/bin/python -c "{purelib}")'
        f" && base=$(readlink -f {VENV}/bin/python)"
        ' && dest=$("$base" -c "import site; print(site.getsitepackages()[0])")'
        ' && mkdir -p "$dest"'
        ' && echo "import site; site.addsitedir(\'$site\')" > "$dest/pgs-venv.pth"'
    )
    return [
        f"{python} -m venv {VENV}",
        f"{VENV}/bin/python -m pip install --no-cache-dir -q {packages}",
        link,
    ]


#: The environment every image gets: the venv first on PATH, pip pointed at the offline wheels.
IMAGE_ENV = {
    "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "VIRTUAL_ENV": VENV,
    "LANG": "C.UTF-8",
    "PIP_FIND_LINKS": OFFLINE_WHEELS,
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_ROOT_USER_ACTION": "ignore",
}


def offline_wheels_step(build_requires: Sequence[str]) -> str:
    """Download the build requirements into :data:`OFFLINE_WHEELS`, so that reinstalling the
    project (``pip install -e .``, as SWE-bench's evaluation scripts do) works with the network
    off. Nothing is installed."""
    wanted = ["setuptools>=40.8.0", "wheel", "editables", *build_requires]
    quoted = " ".join(shlex.quote(r) for r in dict.fromkeys(wanted))
    return f"mkdir -p {OFFLINE_WHEELS} && python -m pip download -q -d {OFFLINE_WHEELS} {quoted}"


#: The Tester's tools, added without changing any version the repository's environment holds.
TESTER_STEP = (
    "python -m pip list --format=freeze --exclude-editable | grep -v '^-e' > /tmp/pgs-pins.txt"
    " && python -m pip install -q -c /tmp/pgs-pins.txt pytest hypothesis"
    " && rm -f /tmp/pgs-pins.txt"
)


def git_setup_steps() -> list[str]:
    return [
        "git config --system --add safe.directory '*'",
        "git config --system core.excludesFile /etc/pgs-gitignore",
        "git config --system user.name pgs && git config --system user.email pgs@localhost",
    ]


def finish_repo_steps() -> list[str]:
    """After the install: what it left untracked is ignored, what it changed is committed
    (as the SWE-bench harness does), so a patch holds only the agent's work."""
    return [
        "git ls-files --others --exclude-standard | sed 's|^|/|' >> .git/info/exclude",
        "git diff --quiet || git commit -qam 'pgs: changes made by the environment setup'",
    ]


def quote_requirement(requirement: str) -> str:
    """A requirement as one shell word (``numpy<2`` must not become a redirection)."""
    if re.fullmatch(r"[A-Za-z0-9_.\-\[\],=<>!~*+]+", requirement) and not re.search(
        r"[<>]", requirement
    ):
        return requirement
    if len(requirement) > 1 and requirement[0] == requirement[-1] and requirement[0] in "'\"":
        requirement = requirement[1:-1]  # quoted in the source: the quotes are not part of it
    return shlex.quote(requirement)
