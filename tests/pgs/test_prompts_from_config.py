"""``--config`` can change every text pgs sends a model: a config that replaces every prompt
template of default.yaml with a marker of its own, and a real ``pgs run`` of the bundled median
example (the scripted server over HTTP, the local sandbox, real pytest and Hypothesis checks):
no request holds a line of any default prompt, and every marker the run's path reaches is sent.

The path: a reply with no tool call, an unknown tool, an editor (refused), a long output (cut,
then elided), a wrong fix; the Tester's first set has no property that shows the bug (its retry
note), then sound properties; the property feedback; a second wrong candidate that edits the
property file and the related test (the guard's notes); the right fix, a fresh probe (its note).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main, make_example_repo
from agent.core.prompts import DEFAULT_CONFIG
from agent.models.script_server import ScriptedServer
from tests.support.median import BOUNDS, EVEN

EXAMPLE = Path(__file__).resolve().parents[2] / "agent" / "examples" / "median"
MODEL = "scripted"


def prompt_paths(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every text of default.yaml, by its key path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from prompt_paths(value, (*path, key))
    elif isinstance(node, str):
        yield path, node


DEFAULTS = dict(prompt_paths(yaml.safe_load(DEFAULT_CONFIG.read_text())))


def marker(path: tuple[str, ...]) -> str:
    return "M-" + "-".join(path).upper()


def marked(path: tuple[str, ...]) -> str:
    """The marker template of a key: the marker, and the values a reader needs to act."""
    shown = {
        ("agent", "instance_template"): " {{ problem_statement }}",
        ("agent", "observation_template"): " {{ output }}",
        ("agent", "format_error_template"): " {{ error }}",
        ("agent", "refusals", "editor"): " {{ program }}",
        ("agent", "truncation_templates", "pgs"): " {{ head }} {{ omitted }} {{ tail }}",
        ("pgs", "tester", "retry_template"): "{% for line in report %} {{ line }}{% endfor %}",
        ("pgs", "property_template"): " {{ nodeid }} {{ input }}",
    }
    return marker(path) + shown.get(path, "")


def nested(items: dict[tuple[str, ...], str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in items.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def default_lines() -> dict[str, tuple[str, ...]]:
    """Distinctive lines of the default prompts (their literal text, 16 characters or more,
    Jinja tags and variables cut out) and the key each comes from."""
    lines: dict[str, tuple[str, ...]] = {}
    for path, text in DEFAULTS.items():
        literal = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "\n", text, flags=re.S)
        for line in literal.splitlines():
            if len(line.strip()) >= 16:
                lines[line.strip()] = path
    return lines


def call(name: str, content: str = "", **arguments: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": [{"name": name, "arguments": arguments}]}


def bash(command: str, content: str = "") -> dict[str, Any]:
    return call("bash", content, command=command)


def write(path: str, text: str) -> str:
    return f"mkdir -p $(dirname {path}) && cat > {path} <<'EOF'\n{text}EOF"


STATS = (EXAMPLE / "repo" / "stats.py").read_text()
BUG = "    return ordered[len(ordered) // 2]\n"
#: The demo's first fix: the middle values of the unsorted list.
WRONG = STATS.replace(
    BUG,
    "    middle = len(ordered) // 2\n    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (values[middle - 1] + values[middle]) / 2\n",
)
RIGHT = WRONG.replace(
    "(values[middle - 1] + values[middle])", "(ordered[middle - 1] + ordered[middle])"
)
PROPERTIES = ".pgs/properties"
#: An issue property that passes on the original code: validation drops it.
UNSOUND = """\
import pytest

from stats import median


@pytest.mark.pgs_issue("the median of one value is that value")
def test_one_value():
    assert median([5]) == 5
"""
GENERATOR = [
    {"content": "I will think first."},  # no tool call
    call("no_such_tool", "A tool that does not exist."),
    bash("vim stats.py", "Open the file."),
    bash("seq 1 3000", "A long output."),
    bash(write("stats.py", WRONG), "The mean of the middle two."),
    call("submit", "Fixed."),
    bash(
        f"echo '# mine' >> {PROPERTIES}/test_median.py && echo '# seen' >> tests/test_stats.py"
        f" && {write('stats.py', WRONG)}",
        "Try again, and note the tests.",
    ),
    call("submit", "Fixed again."),
    bash(f"git checkout tests/test_stats.py && {write('stats.py', RIGHT)}", "The sorted list."),
    call("submit", "Fixed at last."),
]
TESTER = {
    "first": [bash(write(f"{PROPERTIES}/test_one.py", UNSOUND), "One rule."), call("submit")],
    "retry": [
        bash(f"rm {PROPERTIES}/test_one.py && {write(f'{PROPERTIES}/test_median.py', EVEN)}"),
        call("submit"),
    ],
    "probe": [bash(write(f"{PROPERTIES}/test_median_bounds.py", BOUNDS)), call("submit")],
}


def policy(request: dict[str, Any]) -> Any:
    messages = request["messages"]
    n = sum(m["role"] == "assistant" for m in messages)
    if messages[0]["content"] != marker(("pgs", "tester", "system_template")):
        steps = GENERATOR
    else:
        first = messages[1]["content"]
        turn = "retry" if "M-PGS-TESTER-RETRY" in first else "first"
        steps = TESTER["probe" if "M-PGS-TESTER-PROBE" in first else turn]
    return steps[n] if n < len(steps) else None


def texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if isinstance(m.get("content"), str)]


def pgs_run(
    tmp: Path, script: Any, agent: dict[str, Any], *flags: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``pgs run`` of the median example with every prompt a marker (``agent``: more of the
    agent section); the requests the model got and the ``.traj``."""
    repo = make_example_repo(tmp / "stats")
    config = nested({path: marked(path) for path in DEFAULTS})
    config["agent"].update(agent)
    (tmp / "markers.yaml").write_text(yaml.safe_dump(config))
    check = {"python": sys.executable, "max_examples": 40, "test_timeout": 20}
    with ScriptedServer(script) as server:
        code = main(
            [
                "run",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "issue.md"),
                "--config",
                str(tmp / "markers.yaml"),
                "--model",
                MODEL,
                "--base-url",
                server.url,
                "--model.prices",
                json.dumps({MODEL: [0, 0]}),
                "--sandbox",
                "local",
                "--pgs.check",
                json.dumps(check),
                "--pgs.seed",
                "1",
                "--output-dir",
                str(tmp / "out"),
                *flags,
            ]
        )
        requests = list(server.requests)
    assert code == 0
    traj = json.loads(next((tmp / "out").rglob("*.traj")).read_text())
    return requests, traj


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    agent = {"keep_observations": 1, "max_observation_chars": 400}
    return pgs_run(tmp_path_factory.mktemp("prompts"), policy, agent, "--rounds", "3")


def test_the_run_took_the_whole_path(run: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    requests, traj = run
    pgs = traj["pgs"]
    assert [t["why"] for t in pgs["tester_turns"]] == ["first", "retry", "probe"]
    assert len(pgs["rounds"]) == 3 and pgs["verdict"] in ("passed", "tests-changed")
    assert len(requests) == len(GENERATOR) + sum(len(s) for s in TESTER.values())


def test_no_request_holds_a_line_of_a_default_prompt(
    run: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    requests, _ = run
    lines = default_lines()
    assert len(lines) > 60 and len(set(lines.values())) > 30  # every prompt has some
    sent = "\n".join(text for request in requests for text in texts(request))
    leaked = {line: ".".join(path) for line, path in lines.items() if line in sent}
    assert not leaked, leaked


def test_every_marker_on_the_runs_path_is_sent(
    run: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    requests, _ = run
    tester = [r for r in requests if r["messages"][0]["content"] == "M-PGS-TESTER-SYSTEM_TEMPLATE"]
    generator = [r for r in requests if r not in tester]
    sent = "\n".join(text for request in generator for text in texts(request))
    reached = [
        ("agent", "system_template"),
        ("agent", "instance_template"),
        ("agent", "observation_template"),
        ("agent", "format_error_template"),
        ("agent", "elided_template"),
        ("agent", "format_errors", "no_tool_call"),
        ("agent", "format_errors", "unknown_tool"),
        ("agent", "refusals", "editor"),
        ("agent", "truncation_templates", "pgs"),
        ("pgs", "property_template"),
        ("pgs", "tampered_note_template"),
        ("pgs", "tests_changed_note_template"),
    ]
    assert [marker(p) for p in reached if marker(p) not in sent] == []
    said = "\n".join(text for request in tester for text in texts(request))
    for path in [
        ("pgs", "tester", "instance_template"),
        ("pgs", "tester", "retry_template"),
        ("pgs", "tester", "probe_template"),
        ("agent", "observation_template"),  # the Tester says the Generator's texts
    ]:
        assert marker(path) in said, path
    # The retry note carries the validation report: the dropped property and why.
    assert "test_one.py::test_one_value" in said


def block(command: str, thought: str = "Next.") -> dict[str, Any]:
    return {"content": f"{thought}\n\n```bash\n{command}\n```"}


EXAMPLES_SYSTEM = marker(("pgs", "tester", "examples_system_template"))
#: Text mode, io feedback (the extraction turn writes no example: it submits at once),
#: SWE-agent's truncation: the other format errors, the other refusals and cut, the io feedback
#: message.
TEXT_MODE = [
    {"content": "No block at all."},
    {"content": "Two.\n\n```bash\nls\n```\n\n```bash\npwd\n```"},
    {"content": "Empty.\n\n```bash\n\n```"},
    {"content": "Unclosed.\n\n```bash\nls"},
    block("less stats.py"),
    block("top"),
    block("python3"),
    block("seq 1 3000"),
    block(write("stats.py", STATS.replace(BUG, "    return 0\n")), "Break the odd case."),
    block("submit"),
    block(write("stats.py", RIGHT), "Fix it for real."),
    block("submit"),
]


@pytest.fixture(scope="module")
def text_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    def script(request: dict[str, Any]) -> Any:
        if request["messages"][0]["content"].startswith(EXAMPLES_SYSTEM):
            return block("submit", "The issue states no example I can write.")
        n = sum(m["role"] == "assistant" for m in request["messages"])
        return TEXT_MODE[n] if n < len(TEXT_MODE) else None

    agent = {"max_format_errors": 5, "truncation": "swe-agent", "max_observation_chars": 400}
    tmp = tmp_path_factory.mktemp("text")
    flags = ("--no-model.function-calling", "--feedback", "io", "--rounds", "1")
    return pgs_run(tmp, script, agent, *flags)


def test_in_text_mode_with_io_feedback_too_only_the_configs_texts_are_sent(
    text_run: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    requests, traj = text_run
    extraction = [r for r in requests if texts(r)[0].startswith(EXAMPLES_SYSTEM)]
    assert len(extraction) == 1  # the io modes' one Tester turn, with the config's prompts
    assert marker(("pgs", "tester", "examples_instance_template")) in texts(extraction[0])[1]
    assert traj["pgs"]["tester_turns"][0]["why"] == "examples"
    assert len(requests) == len(TEXT_MODE) + 1 and traj["pgs"]["rounds"][0]["feedback"]
    sent = "\n".join(text for request in requests for text in texts(request))
    leaked = {line: ".".join(path) for line, path in default_lines().items() if line in sent}
    assert not leaked, leaked
    reached = [
        ("agent", "format_errors", "no_block"),
        ("agent", "format_errors", "many_blocks"),
        ("agent", "format_errors", "empty_block"),
        ("agent", "format_errors", "unclosed_block"),
        ("agent", "refusals", "pager"),
        ("agent", "refusals", "monitor"),
        ("agent", "refusals", "repl"),
        ("agent", "truncation_templates", "swe_agent"),
        ("pgs", "io_template"),
    ]
    assert [marker(p) for p in reached if marker(p) not in sent] == []
