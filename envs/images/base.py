"""Base images: Debian, its Python, a compiler and git; one per Python version.

``pgs-base:py3.9``, ``pgs-base:py3.11``, ``pgs-base:py3.13``: Python versions come from Debian
releases (3.9 bullseye, 3.11 bookworm, 3.13 trixie); other versions are refused. Each holds
``python`` and ``python3`` (``python-is-python3``), pip and venv, git, a C/C++ compiler with the
Python headers and the system libraries common C extensions build against, so repositories that
compile (astropy, matplotlib, scikit-learn) install. Two recipes:

- ``debootstrap`` (the default; for machines that reach a Debian mirror but no registry):
  ``debootstrap --variant=minbase`` a root file system, then ``docker import`` it. Needs root.
- ``dockerfile`` (for machines that reach a registry): ``FROM python:3.X-slim`` plus the same
  packages.

An image made by an older recipe (label ``pgs-agent.recipe``) is rebuilt on first use.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from envs.docker_util import labels, translate_errors
from envs.errors import EnvError
from envs.images.build import (
    Status,
    docker_build,
    file_lock,
    image_exists,
    image_labels,
    label_text,
    quiet,
    raise_build_error,
    render,
)

if TYPE_CHECKING:
    import docker

#: Python version -> the Debian release that ships it.
DEBIAN_SUITES: dict[str, str] = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
SUPPORTED_PYTHONS: tuple[str, ...] = tuple(DEBIAN_SUITES)
DEFAULT_PYTHON = "3.11"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_REPOSITORY = "pgs-base"
#: Bump when BASE_PACKAGES or the recipes change: older base images are rebuilt.
BASE_RECIPE = "2"
BASE_PACKAGES: tuple[str, ...] = (
    "python3",
    "python3-pip",
    "python3-venv",
    "python3-dev",
    "python-is-python3",
    "git",
    "ca-certificates",
    "procps",
    "curl",
    "patch",
    "build-essential",
    "pkg-config",
    "libffi-dev",
    "libssl-dev",
    "zlib1g-dev",
    "libjpeg-dev",
    "libpng-dev",
    "libfreetype-dev",  # libfreetype6-dev before bookworm; trixie has only this name
    "libxml2-dev",
    "libxslt1-dev",
    "locales",
)
BASE_ENV_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BuildMethod = Literal["debootstrap", "dockerfile"]


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
    """The tag of the base image for ``python``, building it first if it is missing or old."""
    from envs.docker_util import docker_client

    python = check_python(python)
    tag = base_tag(python)
    client = client or docker_client()

    def current() -> bool:
        if rebuild or not image_exists(client, tag):
            return False
        return image_labels(client, tag).get("pgs-agent.recipe") == BASE_RECIPE

    if current():
        return tag
    with file_lock(f"base-py{python}"):
        if current():  # built by another process meanwhile
            return tag
        if method == "debootstrap":
            _debootstrap_base(client, python, mirror, status or quiet)
        elif method == "dockerfile":
            _dockerfile_base(client, python, status or quiet)
        else:
            raise EnvError(f"unknown base image method {method!r}: use debootstrap or dockerfile")
    return tag


def _base_labels(python: str) -> dict[str, str]:
    return labels(kind="base", python=python, recipe=BASE_RECIPE)


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
            raise_build_error(f"debootstrap {suite} (mirror {mirror})", output)
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
        f"LABEL {label_text(_base_labels(python))}",
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
            raise_build_error("tar of the root file system", err)


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
    # The slim image has its own Python in /usr/local: Debian's python3 packages are not wanted.
    packages = " ".join(p for p in BASE_PACKAGES if not p.startswith("python"))
    dockerfile = render(
        "base.Dockerfile",
        python=python,
        packages=packages,
        labels=label_text(_base_labels(python)),
    )
    docker_build(
        client,
        tag=base_tag(python),
        network_mode="default",
        fileobj=io.BytesIO(dockerfile.encode()),
    )
