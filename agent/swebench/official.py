"""Official instance images: swebench's published ``sweb.eval`` images, pulled, not built.

The image is the record's own ``image`` field (current SWE-bench Verified records carry e.g.
``swebench/sweb.eval.x86_64.psf_1776_requests-6028:latest``), else the harness's naming scheme
``swebench/sweb.eval.x86_64.<instance_id, "__" as "_1776_">:latest`` in lower case. With
``--registry HOST:PORT`` (a mirror) the reference becomes ``HOST:PORT/<that image>``.

These images have the repository in ``/testbed``, a conda environment ``testbed`` (activated by
``source /opt/miniconda3/bin/activate; conda activate testbed``, as the record's evaluation
script does) and Ubuntu's ``python3`` in ``/usr/bin``, which runs the sandbox's helper. Their
Python is their own: no Python is checked or substituted for them.
An image already present locally is used as it is (as the harness does); else it is pulled,
and a failed pull is one sentence that names the fix.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from agent.swebench.records import Instance
from envs.errors import EnvError

#: The harness's name of an instance image, before the instance id.
OFFICIAL_PREFIX = "swebench/sweb.eval.x86_64."
#: What an unreachable registry looks like in the daemon's answer.
UNREACHABLE_SIGNS = (
    "connection refused",
    "no such host",
    "i/o timeout",
    "network is unreachable",
    "no route to host",
    "tls handshake timeout",
    "server misbehaving",
    "connection reset",
    "dial tcp",
)
NOT_FOUND_SIGNS = ("manifest unknown", "not found", "does not exist", "name unknown")
#: How the agent's sandbox runs in an official image: the helper on Ubuntu's Python (the
#: testbed's may be 3.5), every command with the testbed environment first on PATH.
SANDBOX_PYTHON = "/usr/bin/python3"
SANDBOX_ENV = {
    "PATH": "/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/bin:/usr/local/sbin:"
    "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "CONDA_DEFAULT_ENV": "testbed",
}


def registry_arg(value: str) -> str:
    """``--registry``: ``HOST[:PORT]`` with an optional path, no scheme (argparse type)."""
    text = value.strip().rstrip("/")
    text = re.sub(r"^[a-z]+://", "", text)
    if not re.fullmatch(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9._/-]+)?", text):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a registry address: give HOST:PORT, e.g. 127.0.0.1:5000 or "
            "mirror.example.com:5000"
        )
    return text


def official_name(instance: Instance) -> str:
    """The record's ``image``, else the harness's name for it; always with a tag."""
    image = str(instance.record.get("image") or "").strip()
    if not image:
        image = f"{OFFICIAL_PREFIX}{instance.instance_id.replace('__', '_1776_')}".lower()
    last = image.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        image += ":latest"
    return image


def official_reference(instance: Instance, registry: str | None = None) -> str:
    """What is pulled: the image, under ``registry`` when one is given."""
    name = official_name(instance)
    return f"{registry_arg(registry)}/{name}" if registry else name


def _reason(error: Exception) -> str:
    """The daemon's answer to a failed pull, as one short clause."""
    text = str(getattr(error, "explanation", None) or error)
    line = " ".join(text.split())
    low = line.lower()
    if any(sign in low for sign in UNREACHABLE_SIGNS):
        return f"the registry is unreachable ({line[:200]})"
    if any(sign in low for sign in NOT_FOUND_SIGNS):
        return f"the registry has no such image ({line[:200]})"
    return line[:240] or type(error).__name__


def official_image(instance: Instance, client: Any = None, *, registry: str | None = None) -> str:
    """The official image of ``instance``, pulled unless present here; its reference."""
    import docker.errors
    import requests.exceptions
    from docker.utils import parse_repository_tag

    from envs.docker_util import docker_client

    ref = official_reference(instance, registry)
    client = client or docker_client()
    try:
        client.images.get(ref)
        return ref
    except docker.errors.ImageNotFound:
        pass
    except (docker.errors.APIError, requests.exceptions.RequestException):
        pass  # the pull below says what is wrong
    repository, tag = parse_repository_tag(ref)
    try:
        for chunk in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if chunk.get("error"):  # the daemon reports some failures inside the stream
                raise docker.errors.APIError(str(chunk["error"]))
        client.images.get(ref)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        fix = (
            f"check that the registry {registry} is running and holds it"
            if registry
            else "pass --registry HOST:PORT to pull from a mirror"
        )
        raise EnvError(
            f"cannot pull the official image {ref}: {_reason(e)}; {fix}, or use "
            "--image-source build (pgs builds the image here)"
        ) from None
    return ref
