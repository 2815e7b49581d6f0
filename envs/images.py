"""Images the sandbox runs in: one base image per Python, one image per repository commit.

**Base images** (``pgs-base:py3.9``, ``pgs-base:py3.11``, ``pgs-base:py3.13``) hold Debian, its
Python, pip, venv, git and procps. Python versions come from Debian releases: 3.9 (bullseye),
3.11 (bookworm), 3.13 (trixie); other versions are refused. Two recipes:

- ``debootstrap`` (the default; for machines that reach a Debian mirror but no registry):
  ``debootstrap --variant=minbase`` a root file system, allow pip to install system-wide, then
  ``docker import`` it. Needs root.
- ``dockerfile`` (for machines that reach a registry): ``FROM python:3.X-slim`` plus git.

**Repository images** (``pgs-repo-<folder name>:<hash12>``) are a base image plus the repository
at one commit, as a git repository at ``/repo`` (a one-commit shallow clone: ``HEAD`` is the real
commit), with its Python dependencies installed system-wide. The hash covers the recipes, the
commit, the dependency files, the Python version and the user's overrides, so an unchanged
repository is never rebuilt. Dependencies are resolved by the *target* interpreter in a
throwaway container of the base image on the host network (``pip download`` into a wheelhouse,
cached under ``~/.cache/pgs/wheels/<hash>``), then installed by ``docker build --network none``
from that wheelhouse. The wheelhouse stays in the image at ``/wheels`` and pip is configured
to use it, so ``pip install`` works offline in the sandbox for what it holds.

Dependency detection, at the given commit:

1. Requirement files: top-level ``requirements*.txt`` and ``*-requirements.txt`` /
   ``*_requirements.txt``, and ``requirements/*.txt``; files whose name mentions ``doc`` are
   skipped.
2. The project itself, when it is installable (a ``setup.py``, or a ``pyproject.toml`` with a
   ``[build-system]`` or ``[project]`` table): installed editable (``pip install -e .``) with those
   of the extras ``test``, ``tests``, ``testing``, ``dev`` that it declares (in
   ``[project.optional-dependencies]``, ``[tool.poetry.extras]``, setup.cfg's
   ``[options.extras_require]``, or, best effort, ``extras_require`` in setup.py). Its
   ``[build-system] requires`` (default: setuptools, wheel) and whatever the build backend asks
   for besides (e.g. hatchling's ``editables``) go into the wheelhouse so the offline build
   works.
3. Always ``pytest`` and ``hypothesis`` (the Tester needs them), plus ``pip``, ``setuptools``
   and ``wheel``.

Everything is installed with one ``pip install`` so the resolver sees every constraint.
Source-only distributions are built into wheels while the network is on. Packages that must be
compiled need a compiler the minimal base image does not have: list their binary wheels' versions
instead, or give your own install commands.

Override, in the repository's ``.pgs.yaml`` (key ``image``) or with CLI flags (flags win)::

    image:
      python: "3.9"           # one of 3.9, 3.11, 3.13
      pip_packages: [numpy<2]  # extra requirements, resolved together with the detected ones
      extras: [test]           # the project's extras to install instead of the detected ones
      install:                 # shell commands run in /repo instead of the detected install;
        - pip install -e .     # offline: what they install must be in the wheelhouse (detected
                               # requirements and pip_packages are downloaded either way)

Without ``python``: 3.11 if the project's ``requires-python`` allows it, else the newest
supported version it allows.
"""

from __future__ import annotations

import configparser
import fcntl
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs.docker_util import (
    LABEL,
    RUN_LABEL,
    container_labels,
    docker_client,
    labels,
    translate_errors,
)
from envs.errors import (
    DISK_FULL_HINT,
    DiskFull,
    EnvError,
    ImageBuildError,
    ImageNotFound,
    NotAGitRepository,
    looks_like_disk_full,
)

if TYPE_CHECKING:
    import docker

#: Python version -> the Debian release that ships it.
DEBIAN_SUITES: dict[str, str] = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
SUPPORTED_PYTHONS: tuple[str, ...] = tuple(DEBIAN_SUITES)
DEFAULT_PYTHON = "3.11"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPOSITORY = "pgs-base"
BASE_PACKAGES: tuple[str, ...] = (
    "python3",
    "python3-pip",
    "python3-venv",
    "git",
    "ca-certificates",
    "procps",
)
#: Always installed in a repository image: the Tester writes pytest + Hypothesis properties.
ALWAYS_INSTALL: tuple[str, ...] = ("pytest", "hypothesis")
#: Extras of the project installed when it declares them.
TEST_EXTRAS: tuple[str, ...] = ("test", "tests", "testing", "dev")
#: Where the repository is inside a repository image.
REPO_PATH = "/repo"
#: Bump to rebuild every repository image (part of the hash).
RECIPE_VERSION = "1"
BASE_ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Host variables passed to the download container so pip reaches the same index as the host.
PASSED_ENV: tuple[str, ...] = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
CA_IN_CONTAINER = "/etc/pgs-host-ca.crt"
#: Printed before each step of a script, so a failure can be named.
STEP_MARKER = "### step: "

BuildMethod = Literal["debootstrap", "dockerfile"]
#: Receives a short description of each long step (the CLI shows it in a spinner).
Status = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def recipe(name: str) -> str:
    """The text of one file in ``envs/recipes``."""
    return resources.files("envs").joinpath("recipes", name).read_text(encoding="utf-8")


def _render(name: str, **values: Any) -> str:
    import jinja2

    env = jinja2.Environment(keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(recipe(name)).render(**values)


def cache_dir() -> Path:
    """``$PGS_CACHE_DIR``, else ``$XDG_CACHE_HOME/pgs``, else ``~/.cache/pgs``."""
    if os.environ.get("PGS_CACHE_DIR"):
        return Path(os.environ["PGS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pgs"


@contextmanager
def _file_lock(name: str) -> Iterator[None]:
    """Serialise builds of the same image across processes (parallel test runs, two CLIs)."""
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _image_exists(client: docker.DockerClient, tag: str) -> str | None:
    """The image ID of ``tag``, or None."""
    import docker.errors

    with translate_errors(f"look up image {tag}"):
        try:
            return str(client.images.get(tag).id)
        except docker.errors.ImageNotFound:
            return None


# --------------------------------------------------------------------------------------------
# Base images


def check_python(python: str) -> str:
    """``python`` normalised ("py3.9", "3.9" -> "3.9"); EnvError naming the supported ones."""
    version = python.strip().removeprefix("python").removeprefix("py")
    if version not in DEBIAN_SUITES:
        supported = ", ".join(f"{v} ({s})" for v, s in DEBIAN_SUITES.items())
        raise EnvError(
            f"Python {python} is not supported: base images exist for {supported}, one per "
            "Debian release; pick one of them with --python"
        )
    return version


def base_tag(python: str) -> str:
    return f"{BASE_REPOSITORY}:py{check_python(python)}"


def ensure_base_image(
    python: str = "3.9",
    *,
    method: BuildMethod = "debootstrap",
    mirror: str = DEFAULT_MIRROR,
    rebuild: bool = False,
    status: Status | None = None,
    client: docker.DockerClient | None = None,
) -> str:
    """The tag of the base image for ``python``, building it first if it is missing."""
    python = check_python(python)
    tag = base_tag(python)
    client = client or docker_client()
    if not rebuild and _image_exists(client, tag):
        return tag
    with _file_lock(f"base-py{python}"):
        if not rebuild and _image_exists(client, tag):  # built by another process meanwhile
            return tag
        if method == "debootstrap":
            _debootstrap_base(client, python, mirror, status or _quiet)
        elif method == "dockerfile":
            _dockerfile_base(client, python, status or _quiet)
        else:
            raise EnvError(f"unknown base image method {method!r}: use debootstrap or dockerfile")
    return tag


def _base_labels(python: str) -> dict[str, str]:
    return labels(kind="base", python=python)


def _label_text(values: Mapping[str, str]) -> str:
    """The arguments of one Dockerfile LABEL line (one line: one layer, not one per label)."""
    return " ".join(f"{k}={json.dumps(v)}" for k, v in values.items())


def _debootstrap_base(
    client: docker.DockerClient, python: str, mirror: str, status: Status
) -> None:
    suite = DEBIAN_SUITES[python]
    if os.geteuid() != 0:
        raise EnvError(
            "building a base image with debootstrap needs root: run `sudo pgs env base`, or use "
            "`--method dockerfile` on a machine that can pull from a registry"
        )
    if shutil.which("debootstrap") is None:
        raise EnvError(
            "debootstrap is not installed: `sudo apt-get install debootstrap`, or use "
            "`--method dockerfile` on a machine that can pull from a registry"
        )
    tmp = Path(tempfile.mkdtemp(prefix=f"pgs-debootstrap-{suite}-"))
    root = tmp / "root"
    try:
        status(f"debootstrap {suite} from {mirror} (about a minute)")
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(BASE_PACKAGES)}",
            suite,
            str(root),
            mirror,
        ]
        done = subprocess.run(command, capture_output=True, text=True, errors="replace")
        if done.returncode != 0:
            output = done.stdout + done.stderr
            log = root / "debootstrap" / "debootstrap.log"
            if log.exists():
                output += "\n" + log.read_text(errors="replace")
            _raise_build_error(f"debootstrap {suite} (mirror {mirror})", output)
        # Debian 12+ marks its Python as externally managed; the image is ours, pip may install.
        for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        for folder in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for path in (root / folder).glob("*"):
                if path.is_file():
                    path.unlink()
        status(f"docker import {base_tag(python)}")
        _import_root(client, root, python)
    finally:
        _unmount_below(root)
        shutil.rmtree(tmp, ignore_errors=True)


def _import_root(client: docker.DockerClient, root: Path, python: str) -> None:
    changes = [
        f"LABEL {_label_text(_base_labels(python))}",
        f"ENV LANG=C.UTF-8 PATH={BASE_ENV_PATH}",
        'CMD ["bash"]',
    ]
    tar = subprocess.Popen(
        [
            "tar",
            "-C",
            str(root),
            "--numeric-owner",
            "--exclude=./dev/*",
            "--exclude=./proc/*",
            "--exclude=./sys/*",
            "-c",
            ".",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tar.stdout is not None and tar.stderr is not None
    stdout = tar.stdout

    def chunks() -> Iterator[bytes]:
        while block := stdout.read(1 << 20):
            yield block

    try:
        with translate_errors(f"import {base_tag(python)}"):
            client.api.import_image(
                src=chunks(),
                repository=BASE_REPOSITORY,
                tag=f"py{python}",
                changes=changes,
                stream_src=True,
            )
    finally:
        stdout.close()
        err = tar.stderr.read().decode(errors="replace")
        tar.stderr.close()
        if tar.wait() != 0:
            _raise_build_error("tar of the root file system", err)


def _unmount_below(root: Path) -> None:
    """A failed debootstrap can leave /proc or /sys mounted in the root; never rmtree into them."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return
    prefix = str(root) + "/"
    points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def _dockerfile_base(client: docker.DockerClient, python: str, status: Status) -> None:
    status(f"docker build {base_tag(python)} from python:{python}-slim")
    dockerfile = _render("base.Dockerfile", python=python, labels=_label_text(_base_labels(python)))
    _docker_build(
        client,
        tag=base_tag(python),
        network_mode="default",
        fileobj=io.BytesIO(dockerfile.encode()),
    )


# --------------------------------------------------------------------------------------------
# Building with Docker, and what a failure says


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _raise_build_error(step: str, output: str) -> None:
    if looks_like_disk_full(output):
        raise DiskFull(f"{step}: {DISK_FULL_HINT}")
    raise ImageBuildError(step, output)


def _docker_build(
    client: docker.DockerClient,
    *,
    tag: str,
    network_mode: str,
    path: str | None = None,
    fileobj: io.BytesIO | None = None,
) -> str:
    """``docker build``; returns the image ID. A failure names the Dockerfile step that failed."""
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
                _raise_build_error(f"docker build {tag}: {_short(step)}", "".join(output))
    image_id = _image_exists(client, tag)
    if image_id is None:
        _raise_build_error(f"docker build {tag}", "".join(output) or "no image was produced")
    assert image_id is not None
    return image_id


# --------------------------------------------------------------------------------------------
# Repository images: what to install


class RepoImageSpec(BaseModel):
    """What a user may override about a repository image (``.pgs.yaml`` key ``image``)."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(
        default=None, description="3.9, 3.11 or 3.13; default: from requires-python, else 3.11"
    )
    pip_packages: list[str] = Field(
        default_factory=list, description="extra requirements, resolved with the detected ones"
    )
    extras: list[str] | None = Field(
        default=None, description="extras of the project to install; default: the test/dev extras"
    )
    install: list[str] | None = Field(
        default=None,
        description="shell commands run in /repo, offline, instead of the detected install",
    )

    @field_validator("python")
    @classmethod
    def _supported(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_python(value)
        except EnvError as e:
            raise ValueError(str(e)) from e

    @field_validator("install")
    @classmethod
    def _one_line_each(cls, value: list[str] | None) -> list[str] | None:
        if value and any("\n" in command for command in value):
            raise ValueError("give one single-line shell command per entry of install")
        return value

    @classmethod
    def from_yaml(cls, text: str, *, source: str = ".pgs.yaml") -> RepoImageSpec:
        """The ``image`` section of a ``.pgs.yaml`` (an empty spec when there is none)."""
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise EnvError(f"{source} is not valid YAML: {e}") from e
        section = data.get("image") if isinstance(data, dict) else None
        if section is None:
            return cls()
        return cls.checked(section, source=f"{source}, section image")

    @classmethod
    def checked(cls, data: object, *, source: str = "image options") -> RepoImageSpec:
        """Validate ``data``; a problem is one EnvError sentence, not pydantic's report."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'image'}: "
                f"{err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()
            )
            raise EnvError(f"{source}: {problems}") from e

    def overridden_by(self, other: RepoImageSpec) -> RepoImageSpec:
        """This spec with every field ``other`` sets explicitly replaced (CLI flags over file)."""
        return self.model_copy(update=other.model_dump(exclude_unset=True))


def _is_dependency_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    if path in ("pyproject.toml", "setup.py", "setup.cfg"):
        return True
    if "doc" in name or not name.endswith(".txt"):
        return False
    if "/" not in path:
        return name.startswith("requirements") or name.endswith(
            ("-requirements.txt", "_requirements.txt")
        )
    folder = path.rsplit("/", 1)[0]
    return folder == "requirements"


@dataclass(frozen=True)
class DependencyPlan:
    """What goes into the wheelhouse and how the repository image installs it."""

    requirement_files: tuple[str, ...] = ()
    #: None when the repository is not an installable project.
    project_extras: tuple[str, ...] | None = None
    build_requires: tuple[str, ...] = ()
    requires_python: str | None = None
    extra_packages: tuple[str, ...] = field(default=())

    @property
    def project_target(self) -> str | None:
        if self.project_extras is None:
            return None
        return f".[{','.join(self.project_extras)}]" if self.project_extras else "."

    def download_args(self, src: str) -> list[str]:
        """Arguments of the ``pip download`` that fills the wheelhouse (run in ``src``)."""
        args = [a for f in self.requirement_files for a in ("-r", f"{src}/{f}")]
        if self.project_target is not None:
            args.append(src + self.project_target.removeprefix("."))
        return [*args, *ALWAYS_INSTALL, *self.extra_packages]

    def install_commands(self) -> list[str]:
        """The offline install, run in /repo: one pip call so the resolver sees everything."""
        args = [a for f in self.requirement_files for a in ("-r", f)]
        if self.project_target is not None:
            args += ["-e", self.project_target]
        args += [*ALWAYS_INSTALL, *self.extra_packages]
        return ["python3 -m pip install " + " ".join(shlex.quote(a) for a in args)]


def _declared_extras(files: Mapping[str, bytes], pyproject: dict[str, Any]) -> set[str]:
    declared: set[str] = set(pyproject.get("project", {}).get("optional-dependencies", {}))
    declared |= set(pyproject.get("tool", {}).get("poetry", {}).get("extras", {}))
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_section("options.extras_require"):
                declared |= set(parser.options("options.extras_require"))
        except configparser.Error:
            pass
    setup_py = files.get("setup.py", b"").decode(errors="replace")
    if "extras_require" in setup_py:
        for extra in TEST_EXTRAS:
            if re.search(rf"""["']{extra}["']\s*:|\b{extra}\s*=\s*[\[(]""", setup_py):
                declared.add(extra)
    return declared


def _requires_python(files: Mapping[str, bytes], pyproject: dict[str, Any]) -> str | None:
    value = pyproject.get("project", {}).get("requires-python")
    if isinstance(value, str):
        return value
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_option("options", "python_requires"):
                return parser.get("options", "python_requires").strip()
        except configparser.Error:
            pass
    match = re.search(
        r"""python_requires\s*=\s*["']([^"']+)["']""",
        files.get("setup.py", b"").decode(errors="replace"),
    )
    return match.group(1) if match else None


def detect_dependencies(files: Mapping[str, bytes], spec: RepoImageSpec) -> DependencyPlan:
    """The plan for a repository whose dependency files (path -> contents) are ``files``."""
    pyproject: dict[str, Any] = {}
    if "pyproject.toml" in files:
        try:
            pyproject = tomllib.loads(files["pyproject.toml"].decode(errors="replace"))
        except tomllib.TOMLDecodeError as e:
            raise EnvError(f"pyproject.toml is not valid TOML: {e}") from e
    installable = "setup.py" in files or "build-system" in pyproject or "project" in pyproject
    extras: tuple[str, ...] | None = None
    if installable:
        if spec.extras is not None:
            extras = tuple(spec.extras)
        else:
            declared = _declared_extras(files, pyproject)
            extras = tuple(e for e in TEST_EXTRAS if e in declared)
    build_requires = pyproject.get("build-system", {}).get("requires", [])
    if installable and not build_requires:
        build_requires = ["setuptools>=40.8.0", "wheel"]
    return DependencyPlan(
        requirement_files=tuple(sorted(f for f in files if f.endswith(".txt"))),
        project_extras=extras,
        build_requires=tuple(str(r) for r in build_requires),
        requires_python=_requires_python(files, pyproject),
        extra_packages=tuple(spec.pip_packages),
    )


def choose_python(spec: RepoImageSpec, plan: DependencyPlan) -> str:
    """The user's choice, else 3.11 if requires-python allows it, else the newest it allows."""
    if spec.python:
        return spec.python
    if not plan.requires_python:
        return DEFAULT_PYTHON
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
    except ImportError:  # packaging is almost always there (pip, pytest); if not, the default
        return DEFAULT_PYTHON
    try:
        allowed = SpecifierSet(plan.requires_python)
    except InvalidSpecifier:
        return DEFAULT_PYTHON
    ok = [v for v in SUPPORTED_PYTHONS if allowed.contains(f"{v}.0") or allowed.contains(v)]
    if DEFAULT_PYTHON in ok or not ok:
        return DEFAULT_PYTHON
    return ok[-1]


# --------------------------------------------------------------------------------------------
# Repository images: git


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if check and done.returncode != 0:
        raise EnvError(
            f"git {' '.join(args)} failed in {repo}: {done.stderr.decode(errors='replace').strip()}"
        )
    return done


def resolve_commit(repo: Path, commit: str = "HEAD") -> str:
    """The full sha of ``commit`` in the repository at ``repo`` (its top folder)."""
    repo = Path(repo).resolve()
    if not repo.is_dir():
        raise NotAGitRepository(f"{repo} does not exist or is not a folder: give a repository")
    top = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != repo:
        raise NotAGitRepository(
            f"{repo} is not the top folder of a git repository: run `git init` and commit there, "
            "or give the folder that holds .git"
        )
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", check=False)
    if done.returncode != 0:
        raise NotAGitRepository(
            f"{commit!r} is not a commit of {repo}: give a commit sha, branch or tag that "
            "`git log` there shows (a repository without commits needs one first)"
        )
    return done.stdout.decode().strip()


def _dependency_files(repo: Path, sha: str) -> dict[str, bytes]:
    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", sha).stdout.decode()
    paths = [p for p in listing.split("\0") if p and _is_dependency_file(p)]
    return {p: _git(repo, "show", f"{sha}:{p}").stdout for p in paths}


def _user_spec_file(repo: Path, sha: str) -> str | None:
    done = _git(repo, "show", f"{sha}:.pgs.yaml", check=False)
    return done.stdout.decode(errors="replace") if done.returncode == 0 else None


def load_repo_spec(repo: Path, commit: str = "HEAD") -> RepoImageSpec:
    """The ``image`` section of ``.pgs.yaml`` at ``commit`` (empty when absent)."""
    repo = Path(repo).resolve()
    text = _user_spec_file(repo, resolve_commit(repo, commit))
    return RepoImageSpec() if text is None else RepoImageSpec.from_yaml(text)


def _export_tree(repo: Path, sha: str, dest: Path) -> None:
    """The files of ``sha`` (no .git) in ``dest``, for ``pip download`` to resolve the project."""
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", sha], stdout=subprocess.PIPE)
    untar = subprocess.run(
        ["tar", "-x", "-C", str(dest)], stdin=archive.stdout, capture_output=True
    )
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        _raise_build_error(f"git archive {sha}", untar.stderr.decode(errors="replace"))


def _shallow_clone(repo: Path, sha: str, dest: Path) -> None:
    """A one-commit clone of ``repo`` at ``sha``: HEAD is the real commit, history is cheap."""
    dest.mkdir(parents=True)
    steps = [
        ["init", "-q"],
        [
            "fetch",
            "-q",
            "--depth",
            "1",
            "--upload-pack",
            "git -c uploadpack.allowAnySHA1InWant=true upload-pack",
            f"file://{repo}",
            sha,
        ],
        ["checkout", "-q", "--detach", sha],
    ]
    for args in steps:
        done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
        if done.returncode != 0:
            _raise_build_error(f"git {args[0]} of {repo} at {sha}", done.stderr.decode())


# --------------------------------------------------------------------------------------------
# Repository images: the build


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


def repo_image_name(repo: Path) -> str:
    # Cut first, strip after: a cut may end on a separator, which Docker refuses.
    name = re.sub(r"[^a-z0-9]+", "-", Path(repo).resolve().name.lower())[:60].strip("-")
    return f"pgs-repo-{name or 'repo'}"


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _ca_bundle() -> str | None:
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        path = os.environ.get(name)
        if path and Path(path).is_file():
            return path
    default = "/etc/ssl/certs/ca-certificates.crt"
    return default if Path(default).is_file() else None


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
    """
    started = time.monotonic()
    status = status or _quiet
    repo = Path(repo).resolve()
    sha = resolve_commit(repo, commit)
    files = _dependency_files(repo, sha)
    user_file = _user_spec_file(repo, sha)
    merged = RepoImageSpec.from_yaml(user_file) if user_file else RepoImageSpec()
    if spec is not None:
        merged = merged.overridden_by(spec)
    plan = detect_dependencies(files, merged)
    python = choose_python(merged, plan)
    install = merged.install if merged.install is not None else plan.install_commands()
    file_digests = {p: hashlib.sha256(c).hexdigest() for p, c in sorted(files.items())}
    downloads = merged.model_dump(exclude={"install"})  # install commands download nothing
    wheel_key = _digest(RECIPE_VERSION, recipe("wheelhouse.sh"), python, file_digests, downloads)
    image_key = _digest(wheel_key, recipe("repo.Dockerfile"), recipe("pgs-gitignore"), sha, install)
    tag = f"{repo_image_name(repo)}:{image_key[:12]}"
    client = client or docker_client()
    if image_id := _image_exists(client, tag):
        return RepoImage(tag, image_id, sha, python, True, time.monotonic() - started)
    base = ensure_base_image(python, method=base_method, status=status, client=client)
    with _file_lock(tag.replace(":", "-")):
        if image_id := _image_exists(client, tag):
            return RepoImage(tag, image_id, sha, python, True, time.monotonic() - started)
        wheels = _wheelhouse(client, repo, sha, base, plan, wheel_key, status, run_id)
        status(f"docker build {tag} (network off)")
        image_id = _build_from_context(
            client, repo, sha, base, wheels, install, tag, python, run_id
        )
    return RepoImage(tag, image_id, sha, python, False, time.monotonic() - started)


def _build_from_context(
    client: docker.DockerClient,
    repo: Path,
    sha: str,
    base: str,
    wheels: Path,
    install: Sequence[str],
    tag: str,
    python: str,
    run_id: str | None,
) -> str:
    builds = cache_dir() / "build"
    builds.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix="ctx-", dir=builds))
    try:
        root = context / "root"  # copied to / in one step
        _shallow_clone(repo, sha, root / "repo")
        try:  # hard links: the wheelhouse can be large, and the cache is on the same disk
            shutil.copytree(wheels, root / "wheels", copy_function=os.link)
        except OSError:
            shutil.rmtree(root / "wheels", ignore_errors=True)
            shutil.copytree(wheels, root / "wheels")
        (root / "etc").mkdir()
        (root / "etc" / "pgs-gitignore").write_text(recipe("pgs-gitignore"))
        image_labels = labels(run_id, kind="repo", repo=repo.name, commit=sha, python=python)
        steps = [(shlex.quote(f"{STEP_MARKER}{command}"), command) for command in install]
        dockerfile = _render(
            "repo.Dockerfile", base=base, install=steps, labels=_label_text(image_labels)
        )
        (context / "Dockerfile").write_text(dockerfile)
        return _docker_build(client, tag=tag, network_mode="none", path=str(context))
    finally:
        shutil.rmtree(context, ignore_errors=True)


def _wheelhouse(
    client: docker.DockerClient,
    repo: Path,
    sha: str,
    base: str,
    plan: DependencyPlan,
    key: str,
    status: Status,
    run_id: str | None,
) -> Path:
    """The cached wheelhouse for ``key``, downloaded by the base image's own pip if missing."""
    wheels = cache_dir() / "wheels" / key[:16]
    if (wheels / ".complete").exists():
        return wheels
    wheels.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="wheelhouse-", dir=wheels.parent))
    try:
        _export_tree(repo, sha, work / "src")
        (work / "wheels").mkdir()
        script = _render(
            "wheelhouse.sh",
            build_requires=" ".join(shlex.quote(r) for r in plan.build_requires),
            requirements=" ".join(shlex.quote(a) for a in plan.download_args("/src")),
            owner=f"{os.getuid()}:{os.getgid()}",
        )
        volumes = {
            str(work / "src"): {"bind": "/src", "mode": "rw"},
            str(work / "wheels"): {"bind": "/wheels", "mode": "rw"},
        }
        environment = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
        environment |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"}
        if ca := _ca_bundle():
            volumes[ca] = {"bind": CA_IN_CONTAINER, "mode": "ro"}
            environment["PIP_CERT"] = CA_IN_CONTAINER
        status("pip download into the wheelhouse (host network)")
        output, code = _run_throwaway(
            client,
            base,
            ["bash", "-c", script],
            volumes=volumes,
            environment=environment,
            container_labels=container_labels(run_id, kind="wheelhouse"),
        )
        if code != 0:
            steps = output.rsplit(STEP_MARKER, 1)
            step = steps[1].splitlines()[0] if len(steps) == 2 else "pip download"
            _raise_build_error(f"wheelhouse: {step}", output)
        (work / "wheels" / ".complete").write_text(sha + "\n")
        shutil.rmtree(wheels, ignore_errors=True)
        (work / "wheels").rename(wheels)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return wheels


def _run_throwaway(
    client: docker.DockerClient,
    image: str,
    command: list[str],
    *,
    volumes: dict[str, dict[str, str]],
    environment: dict[str, str],
    container_labels: dict[str, str],
) -> tuple[str, int]:
    """Run ``command`` in a labelled container on the host network; its output and exit code."""
    container = None
    with translate_errors(f"run a container of {image}"):
        try:
            container = client.containers.run(
                image,
                command,
                detach=True,
                network_mode="host",
                volumes=volumes,
                environment=environment,
                labels=container_labels,
                working_dir="/src",
            )
            code = int(container.wait(timeout=None)["StatusCode"])
            output = container.logs(stdout=True, stderr=True).decode(errors="replace")
            return output, code
        finally:
            if container is not None:
                container.remove(force=True)


# --------------------------------------------------------------------------------------------
# Housekeeping


@dataclass(frozen=True)
class PgsObjects:
    """Images and containers labelled pgs-agent=1."""

    images: list[Any]
    containers: list[Any]


def _filters(run_id: str | None) -> dict[str, list[str]]:
    wanted = [f"{LABEL}=1"]
    if run_id:
        wanted.append(f"{RUN_LABEL}={run_id}")
    return {"label": wanted}


def list_pgs(client: docker.DockerClient | None = None, *, run_id: str | None = None) -> PgsObjects:
    """Every pgs image and container (all states), or only those of ``run_id``."""
    client = client or docker_client()
    with translate_errors("list pgs images and containers"):
        return PgsObjects(
            images=client.images.list(filters=_filters(run_id)),
            containers=client.containers.list(all=True, filters=_filters(run_id)),
        )


def prune(
    client: docker.DockerClient | None = None, *, run_id: str | None = None
) -> tuple[int, int]:
    """Remove every container, then every image, labelled pgs-agent=1 (or only ``run_id``'s).

    Returns (containers removed, images removed).
    """
    import docker.errors

    client = client or docker_client()
    found = list_pgs(client, run_id=run_id)
    containers = 0
    with translate_errors("remove pgs containers"):
        for container in found.containers:
            try:
                container.remove(force=True)
                containers += 1
            except docker.errors.NotFound:
                pass
    # Repository images are children of base images: remove them first, retry what refused.
    pending = sorted(found.images, key=lambda i: (i.labels or {}).get(f"{LABEL}.kind") == "base")
    images = 0
    for _ in range(3):
        refused = []
        for image in pending:
            try:
                with translate_errors(f"remove image {image.short_id}"):
                    client.images.remove(image.id, force=True)
                images += 1
            except ImageNotFound:  # gone already (removed with its child, or by someone else)
                images += 1
            except EnvError:
                refused.append(image)
        if not refused:
            break
        pending = refused
    else:
        names = ", ".join(i.tags[0] if i.tags else i.short_id for i in pending)
        raise EnvError(f"could not remove {names}: see `docker image rm` for the reason")
    return containers, images
