"""The tools layer of the run's image: every tool bundle installed while the package indexes
(and nothing else) are in reach (``pip install flake8`` in an ``install.sh``), built before the
sandbox starts and cached by :func:`envs.images.tools.tools_layer`.

This module writes the build step (:func:`layer_script`), as :func:`agent.core.toolenv.install`
does the same at run time; the sandbox then runs with the network off, and sourcing
``install.sh`` again finds its packages already there. Building images is the run's business,
not the loop's: ``agent.core`` only installs bundles into a sandbox that is already running.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent.core.toolenv import REGISTRY_FILE, SHIMS, registry_values
from agent.errors import ToolInstallError

if TYPE_CHECKING:
    import docker

    from agent.core.bundles import Bundle


def needs_image(bundles: Sequence[Bundle]) -> bool:
    """Whether some bundle has an install.sh (which may fetch packages)."""
    return any((b.path / "install.sh").is_file() for b in bundles)


def tools_image(
    client: docker.DockerClient,
    image: str,
    bundles: Sequence[Bundle],
    *,
    env_variables: Mapping[str, str],
    registry: Mapping[str, Any],
) -> str:
    """``image`` with ``bundles`` installed with the package indexes in reach, built once and
    cached by tag (:func:`envs.images.tools.tools_layer`); a failed install.sh raises
    :class:`ToolInstallError`."""
    from envs.errors import ImageBuildError
    from envs.images import tools_layer

    folders = {bundle.name: bundle.path for bundle in bundles}
    script = layer_script(bundles, env_variables, registry)
    try:
        return tools_layer(client, image, folders, script, key=sorted(env_variables.items()))
    except ImageBuildError as e:
        raise ToolInstallError(
            f"preparing the tool bundles in {image} (package indexes in reach) failed: {e}"
        ) from e


def layer_script(
    bundles: Sequence[Bundle], env_variables: Mapping[str, str], registry: Mapping[str, Any]
) -> str:
    """One build step: every bundle installed in order, as :func:`agent.core.toolenv.install` does
    at run time."""
    lines = [
        "set +e",
        f"export SWE_AGENT_ENV_FILE=/root/{REGISTRY_FILE} ROOT=/",
        *(f"export {k}={shlex.quote(str(v))}" for k, v in env_variables.items()),
        f"printf '%s' {shlex.quote(json.dumps(registry_values(bundles, registry)))}"
        f" > /root/{REGISTRY_FILE}",
        f"mkdir -p /root/{SHIMS}; command -v python >/dev/null 2>&1 ||"
        f' ln -sf "$(command -v python3)" /root/{SHIMS}/python',
        f"export PATH=$PATH:/root/{SHIMS}",
    ]
    for bundle in bundles:
        target = f"/root/tools/{bundle.name}"
        lines.append(f"export PATH={target}/bin:$PATH; chmod +x {target}/bin/* 2>/dev/null")
        if (bundle.path / "install.sh").is_file():
            lines.append(
                f"cd {target} && source install.sh; rc=$?; [ $rc -eq 0 ] || "
                f"{{ echo 'tool bundle {bundle.name}: install.sh failed'; exit $rc; }}"
            )
    return "\n".join(lines)
