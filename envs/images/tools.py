"""The tools layer: an image with folders copied in (tool bundles, each under
``/root/tools/<name>``) and one build step run while the package indexes, and nothing else,
are in reach (:mod:`envs.images.buildnet`), built once per base image and content and cached by
its tag ``pgs-tools:<digest>``. A sandbox started from it runs with the network off and finds
what the step installed.

What the folders hold and what the step runs is the caller's: ``agent.run.toolimage`` gives
SWE-agent's tool bundles and the script that sources their ``install.sh``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs import scratch
from envs.docker_util import labels
from envs.images.build import Layer, digest, file_lock, image_exists

if TYPE_CHECKING:
    import docker

#: Where each folder goes in the image: ``TOOLS_DIR/<name>``.
TOOLS_DIR = "/root/tools"


def folders_digest(folders: Mapping[str, Path]) -> list[Any]:
    """(name, relative path, content) of every file of ``folders``, in order, caches left out."""
    files = []
    for name, folder in folders.items():
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            if "__pycache__" in path.parts:
                continue
            files.append([name, str(path.relative_to(folder)), path.read_bytes().hex()])
    return files


def tools_layer(
    client: docker.DockerClient,
    image: str,
    folders: Mapping[str, Path],
    script: str,
    *,
    key: object = (),
) -> str:
    """The tag of ``image`` with each of ``folders`` (name → host folder, copied to
    ``TOOLS_DIR/<name>`` without ``__pycache__``) and ``script`` run as one step in ``/root``,
    built once: the tag names the base image's ID, the folders' content and ``key`` (what
    else the caller's step depends on). A failed step raises
    :class:`~envs.errors.ImageBuildError`."""
    base_id = image_exists(client, image) or image
    tag = f"pgs-tools:{digest(base_id, folders_digest(folders), key)[:16]}"
    with file_lock(f"tools-{tag.split(':')[1]}"):
        if image_exists(client, tag):
            return tag
        staging = scratch.mkdtemp("pgs-bundles-")
        try:
            copies: dict[str, Path] = {}
            for name, folder in folders.items():
                copy = staging / name
                shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
                copies[f"{TOOLS_DIR}/{name}"] = copy
            layer = Layer(
                base=image,
                steps=[script],
                labels=labels(kind="tools", base=image),
                workdir="/root",
                folders=copies,
            )
            layer.build(client, tag)
        finally:
            scratch.remove_tree(staging)
    return tag
