"""Text pgs did not write (test ids, a model's words, a bot's login, a path) is printed as it
is: rich's markup would read ``test_parse[case]`` or ``@renovate[bot]`` as a style and drop it."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "agent.cli.run",
    "agent.cli.batch",
    "agent.cli.demo",
    "agent.cli.eval",
    "agent.cli.inspect",
    "agent.cli.ladder",
    "agent.cli.ladder_examples",
    "agent.cli.replay",
    "agent.cli.report",
    "agent.cli.github",
    "agent.github.pr",
    "agent.swebench.scheduler",
]
SHOWN = "why: tests/test_parse.py::test_parse[case-1] failed; asked by @renovate[bot] [red]x[/]"


@pytest.mark.parametrize("module", MODULES)
def test_bracketed_text_is_printed_as_it_is(module: str) -> None:
    console = importlib.import_module(module).err
    with console.capture() as captured:  # the console's own file (sys.stderr) stays as it was
        console.print(SHOWN)
    assert captured.get().strip() == SHOWN
