"""SWE-agent's bundle conventions, with bundles of our own that use each one (tests/tools/compat):

- ``kv``: a registry like SWE-agent's ``registry``: helpers with a ``#!/usr/bin/env python``
  shebang, a library found through the PYTHONPATH its install.sh exports;
- ``pager``: like ``windowed``: ``WINDOW`` read from the registry and ``{WINDOW}`` in a
  docstring, an install.sh that writes ``WINDOW`` from the environment, a state command, a
  multi-line tool with ``end_name``, ``registry_variables`` in its config;
- ``marksubmit``: like ``submit``: a bash function (no shebang) that writes ``~/model.patch`` and
  prints only the marker;
- ``pipdep``: an install.sh that pip-installs a package (the sandbox has no network);
- ``giveup``: a forfeit.

The end-to-end runs (function calling and text mode) are in tests/core/test_compat_runs.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.tools import OutputKind, Toolset, classify_output
from agent.errors import ToolCallError, ToolInstallError
from agent.run import toolimage
from agent.run.config import TOOL_ENV
from envs.docker_sandbox import DockerSandbox, DockerSandboxConfig
from envs.local import LocalSandbox
from tests.support.repos import make_repo
from tests.support.toolbox import ToolBox

COMPAT = Path(__file__).parent / "compat"
FILES = {"notes.txt": "".join(f"line {i}\n" for i in range(1, 9))}


def compat_toolset(*names: str, **registry: Any) -> Toolset:
    return Toolset.from_paths(
        [COMPAT / n for n in names], env_variables=TOOL_ENV, registry_variables=registry
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


@pytest.fixture
def box(repo: Path, base_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(DockerSandboxConfig(image=base_image), repo=repo) as sandbox:
        yield sandbox


@pytest.mark.docker
def test_python_shebang_registry_state_and_window_from_the_config(box: DockerSandbox) -> None:
    # An image with python3 only (as many are): the helpers' `#!/usr/bin/env python` still runs.
    assert box.run("rm -f /usr/bin/python && ! command -v python").ok
    toolset = compat_toolset("kv", "pager", WINDOW=3)
    tb = ToolBox(box, toolset)

    shown = tb.call("peek", path="notes.txt", line=2)
    assert shown.ok, shown.output
    # WINDOW=3 from the config beat install.sh's `_kv_put WINDOW "$WINDOW"` (100 in the env);
    # PAGER_GREETING came from the bundle's own registry_variables.
    assert shown.output.splitlines() == [
        "[pager ready] /repo/notes.txt (8 lines, window 3)",
        "2:line 2",
        "3:line 3",
        "4:line 4",
    ]
    assert toolset.state(box, tb.env) == {"open_file": "/repo/notes.txt", "working_dir": "/repo"}
    # The model reads the window in the tool's description, in both modes.
    described = {
        t["function"]["name"]: t["function"]["description"] for t in toolset.openai_tools()
    }
    assert described["peek"] == "opens <path> and shows 3 lines from <line> (default 1)"
    assert "shows 3 lines" in toolset.text_docs()


@pytest.mark.docker
def test_without_a_configured_window_install_sh_gets_the_default_from_the_env(
    box: DockerSandbox,
) -> None:
    tb = ToolBox(box, compat_toolset("kv", "pager"))
    shown = tb.call("peek", path="notes.txt")
    assert shown.ok, shown.output
    assert f"window {TOOL_ENV['WINDOW']}" in shown.output
    assert shown.output.count(":line ") == 8


@pytest.mark.docker
def test_multi_line_tool_typed_in_text_mode_and_called_as_a_function(box: DockerSandbox) -> None:
    toolset = compat_toolset("kv", "pager", "marksubmit")
    tb = ToolBox(box, toolset)
    assert tb.call("peek", path="notes.txt").ok
    # Text mode: what SWE-agent's docs show the model; the body holds shell metacharacters.
    typed = "replace 2:3\nline two $HOME `x` 'q'\nline three\nend_of_replace"
    done = tb.sh(toolset.guard_multiline(typed))
    assert done.ok, done.output
    # Function calling: the same tool through its arguments.
    assert tb.call("replace", start=8, end=8, text="last line").ok
    lines = tb.read("notes.txt").splitlines()
    assert lines[:4] == ["line 1", "line two $HOME `x` 'q'", "line three", "line 4"]
    assert lines[-1] == "last line"

    # A body that never ends is refused with the reason, before anything runs.
    with pytest.raises(ToolCallError, match="end_of_replace"):
        toolset.guard_multiline("replace 1:1\nnew text")

    # The marker-only submit: SWE-agent's, it writes ~/model.patch.
    out = classify_output(tb.call("submit").output, toolset.role("submit"))
    assert out.kind is OutputKind.SUBMISSION and not out.text
    patch = box.read_file("/root/model.patch").decode()
    assert "+line two $HOME `x` 'q'" in patch and "+last line" in patch
    # The scratch folder of the Tester is never staged by a `git add -A` submit.
    assert box.run("mkdir -p .pgs/properties && echo x > .pgs/properties/p.py").ok
    tb.call("submit")
    assert ".pgs" not in box.read_file("/root/model.patch").decode()


@pytest.mark.docker
def test_forfeit_sentinel(box: DockerSandbox) -> None:
    tb = ToolBox(box, compat_toolset("giveup"))
    role = tb.toolset.role("exit_forfeit")
    assert classify_output(tb.call("exit_forfeit").output, role).kind is OutputKind.EXIT_FORFEIT


@pytest.mark.docker
def test_pip_install_in_install_sh_is_done_in_the_tools_image(
    repo: Path, base_image: str, docker_client: Any
) -> None:
    toolset = compat_toolset("pipdep")
    # In a sandbox without network, install.sh cannot reach the index: the error names the
    # bundle, the line of install.sh and why.
    with (
        DockerSandbox(DockerSandboxConfig(image=base_image), repo=repo) as box,
        pytest.raises(ToolInstallError) as failed,
    ):
        ToolBox(box, toolset)
    message = str(failed.value)
    assert "'pipdep'" in message and "line 1: pip install 'six==1.16.0'" in message
    assert "network" in message

    # The tools image ran install.sh with the network on; the sandbox still has none.
    image = toolimage.tools_image(
        docker_client, base_image, toolset.bundles, env_variables=TOOL_ENV, registry={}
    )
    assert (
        toolimage.tools_image(  # cached: the same bundles give the same image
            docker_client, base_image, toolset.bundles, env_variables=TOOL_ENV, registry={}
        )
        == image
    )
    with DockerSandbox(DockerSandboxConfig(image=image), repo=repo) as box:
        tb = ToolBox(box, toolset)
        assert tb.call("six_version").output.strip() == "six 1.16.0"
        offline = box.run(
            "python3 -c 'import socket; socket.create_connection((\"pypi.org\", 443), 3)'"
        )
        assert not offline.ok


def test_install_sh_failure_names_the_bundle_and_the_line(tmp_path: Path, repo: Path) -> None:
    bundle = tmp_path / "broken"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "config.yaml").write_text("tools: {}\n")
    (bundle / "install.sh").write_text("export A=1\nno_such_command_xyz --flag\necho done\nfalse\n")
    with LocalSandbox(repo) as box, pytest.raises(ToolInstallError) as failed:
        Toolset.from_paths([bundle]).install(box)
    assert "tool bundle 'broken' failed (exit 1) at install.sh line 4: false" in str(failed.value)
