"""Tool bundles in a sandbox, the way SWE-agent sets them up: install and state.

:func:`install` uploads each bundle to ``<home>/tools/<name>``, puts its ``bin/`` on PATH and
sources its ``install.sh`` (a failure names the bundle and the line). Before the first bundle it
writes the registry file ``<home>/.swe-agent-env`` (JSON: the bundles' and the config's
``registry_variables``; ``SWE_AGENT_ENV_FILE`` points at it), an empty ``<home>/state.json``, and
gives the sandbox a ``python`` when it has only ``python3`` (SWE-agent's helpers start with
``#!/usr/bin/env python``). After the last bundle the configured registry variables are written
again, so an ``install.sh`` default (``_write_env WINDOW "$WINDOW"``) never wins over them.

The image layer that pre-installs what an ``install.sh`` fetches is built before the sandbox
starts, by the run (:mod:`agent.run.toolimage`), with the file names and registry values
defined here.
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import ToolInstallError
from envs.sandbox import SCRATCH_DIRS, Sandbox

if TYPE_CHECKING:
    from agent.core.bundles import Bundle

ENV_MARK = "__PGS_TOOL_ENV__"
FAILED_MARK = "__PGS_INSTALL_FAILED__"
#: Variables a shell sets by itself: never carried from install.sh to later commands.
SHELL_VARS = {"PWD", "OLDPWD", "SHLVL", "_"}
#: Where ``python`` is linked to ``python3`` when the sandbox has no ``python``.
SHIMS = ".pgs-shims"
#: SWE-agent's registry file, relative to the sandbox's home.
REGISTRY_FILE = ".swe-agent-env"
#: A longer issue text is cut before it goes into the PROBLEM_STATEMENT variable (the kernel
#: refuses a single environment string over 128 KiB).
MAX_ENV_VALUE = 100_000


def home(sandbox: Sandbox) -> str:
    value = getattr(sandbox, "home", None)
    return str(value) if value else "/root"


def parse_env0(text: str) -> dict[str, str]:
    env = {}
    for item in text.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key and "\n" not in key:
            env[key] = value
    return env


def _prelude(root: str, registry_file: str, shims: str) -> str:
    """Shell run once before the bundles: scratch folders that ``git add -A`` skips (SWE-agent's
    submit stages everything), a ``python`` when there is only ``python3``, then the env."""
    scratch = " ".join(shlex.quote(d) for d in SCRATCH_DIRS)
    return (
        f'cd {shlex.quote(root)} 2>/dev/null && for d in {scratch}; do mkdir -p "$d"'
        ' && { [ -e "$d/.gitignore" ] || echo "*" > "$d/.gitignore"; }; done; '
        f"mkdir -p {shims} && if ! command -v python >/dev/null 2>&1; then"
        f' p=$(command -v python3) && ln -sf "$p" {shims}/python; fi; '
        f"rm -f {shlex.quote(registry_file.rsplit('/', 1)[0])}/model.patch; "
        "env -0 && exit 0"
    )


def _bundle_script(target: str, has_install: bool) -> str:
    """Shell installing one uploaded bundle; prints the env after its install.sh."""
    q = shlex.quote(target)
    script = f"chmod +x {q}/bin/* 2>/dev/null; cd {q} || exit 1"
    if has_install:
        script += (
            # The last failing line of install.sh, to name it if the script fails.
            '; __pgs_failed=; trap \'[ "${BASH_SOURCE[0]##*/}" = install.sh ]'
            ' && __pgs_failed="line $LINENO: $BASH_COMMAND"\' ERR'
            "; source install.sh; rc=$?; trap - ERR"
            f'; if [ $rc -ne 0 ]; then printf "\\n%s %s\\n" {FAILED_MARK} "$__pgs_failed";'
            " exit $rc; fi"
            f"; chmod +x {q}/bin/* 2>/dev/null; printf '\\n%s\\n' {ENV_MARK}"
            # `&& exit 0`: a last command is exec'd by bash; keep bash as the parent
            "; env -0 && exit 0"
        )
    return script


def install(
    sandbox: Sandbox,
    bundles: Sequence[Bundle],
    *,
    registry: Mapping[str, Any],
    env_variables: Mapping[str, str],
    timeout: float = 300.0,
) -> dict[str, str]:
    """Install ``bundles``; return the environment for every later command (PATH with each
    bin/ prepended, the shim folder last, ``env_variables``, whatever install.sh exported)."""
    where = home(sandbox)
    registry_file = f"{where}/{REGISTRY_FILE}"
    shims = f"{where}/{SHIMS}"
    sandbox.write_file(registry_file, json.dumps(registry_values(bundles, registry)))
    sandbox.write_file(f"{where}/state.json", "{}")
    env: dict[str, str] = {
        "ROOT": sandbox.repo_path,
        "PGS_DIFF_EXCLUDE": ":".join(SCRATCH_DIRS),
        "SWE_AGENT_ENV_FILE": registry_file,
        **{k: str(v)[:MAX_ENV_VALUE] for k, v in env_variables.items()},
    }
    probe = sandbox.run(_prelude(sandbox.repo_path, registry_file, shims), env=env, timeout=timeout)
    base = parse_env0(probe.output)
    system_path = base.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    path = f"{system_path}:{shims}"
    _upload(sandbox, bundles, f"{where}/tools")
    for bundle in bundles:
        target = f"{where}/tools/{bundle.name}"
        path = f"{target}/bin:{path}"
        env["PATH"] = path
        has_install = (bundle.path / "install.sh").is_file()
        result = sandbox.run(_bundle_script(target, has_install), timeout=timeout, env=env)
        if not result.ok:
            raise ToolInstallError(_install_failure(bundle.name, result.output, result))
        if ENV_MARK in result.output:
            after = parse_env0(result.output.rpartition(f"\n{ENV_MARK}\n")[2])
            for key, value in after.items():
                if key not in SHELL_VARS and base.get(key) != value:
                    env[key] = value
            path = env["PATH"]
    if registry:  # the configured values win over install.sh's defaults
        _merge_registry(sandbox, registry_file, registry)
    return env


def _upload(sandbox: Sandbox, bundles: Sequence[Bundle], folder: str) -> None:
    """Every bundle into ``folder/<name>`` in one copy: a Docker sandbox's copy costs the daemon
    a mount of the container's file system and a re-exec of itself, whatever its size."""
    if not bundles:
        return
    with tempfile.TemporaryDirectory(prefix="pgs-tools-") as tmp:
        staged = Path(tmp) / "tools"
        staged.mkdir(mode=0o755)
        for bundle in bundles:
            shutil.copytree(bundle.path, staged / bundle.name, symlinks=True, dirs_exist_ok=True)
        try:
            sandbox.upload(staged, folder)
        except Exception as e:  # the sandbox's own errors, reported with the bundles named
            names = ", ".join(repr(bundle.name) for bundle in bundles)
            raise ToolInstallError(f"cannot copy tool bundle {names}: {e}") from e


def registry_values(bundles: Sequence[Bundle], configured: Mapping[str, Any]) -> dict[str, Any]:
    """The registry file's content: the bundles' ``registry_variables`` in order, then the
    configured ones (which win)."""
    values: dict[str, Any] = {}
    for bundle in bundles:
        values.update(bundle.config.registry_variables)
    return {**values, **configured}


def _merge_registry(sandbox: Sandbox, path: str, values: Mapping[str, Any]) -> None:
    try:
        current = json.loads(sandbox.read_file(path) or b"{}")
    except (ValueError, OSError):
        current = {}
    if not isinstance(current, dict):
        current = {}
    sandbox.write_file(path, json.dumps({**current, **values}))


#: What pip, apt and curl print when there is no network.
_OFFLINE_SIGNS = (
    "No matching distribution",
    "Could not resolve",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "NewConnectionError",
)


def _install_failure(name: str, output: str, result: Any) -> str:
    head = f"installing tool bundle {name!r} failed (exit {result.exit_code}"
    head += ", timed out)" if result.timed_out else ")"
    before, found, line = output.rpartition(f"\n{FAILED_MARK} ")
    if found:
        head += f" at install.sh {line.strip() or 'line ?'}"
        output = before
    tail = output.strip()[-2000:]
    hint = ""
    if any(word in tail for word in _OFFLINE_SIGNS):
        hint = (
            "\nIt needs the network, which the sandbox does not have: pgs installs tool bundles "
            "with the package indexes in reach while it prepares the sandbox's image (pgs run "
            "and pgs batch do); elsewhere give the sandbox the network (--sandbox.network)."
        )
    return f"{head}:\n{tail}{hint}"


def state(
    sandbox: Sandbox,
    commands: Sequence[str],
    env: Mapping[str, str],
    *,
    session: str | None = None,
) -> dict[str, Any]:
    """Run the state commands, then read ``<home>/state.json`` ({} when there is none).

    One sandbox round trip: the commands and the read are one shell command. ``session``: the
    agent's persistent shell session, if it has one (the state commands then see its working
    directory and variables, as SWE-agent's do)."""
    if not commands:
        return {}
    steps = "; ".join(f"{{ {cmd} ; }} >/dev/null 2>&1" for cmd in commands)
    state_file = f"{shlex.quote(home(sandbox))}/state.json"
    command = f"{steps}; cat {state_file} 2>/dev/null"
    if session is None:  # (a sandbox of a user's own may not know sessions)
        result = sandbox.run(command, env=env, max_output=1 << 28)
    else:
        result = sandbox.run(command, env=env, max_output=1 << 28, session=session)
    try:
        value = json.loads(result.output or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
