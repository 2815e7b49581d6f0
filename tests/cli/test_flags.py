"""The flags users type (agent/cli/flags.py): every mistake one ``pgs: error:`` line and exit
2 for every command, SWE-agent's and mini-swe-agent's spellings pointed to, ``_`` taken as
``-``, ``--version``, help for every flag, unknown config keys named, ``.env`` files. Through
``pgs``'s ``main`` in this process, or ``python -m agent.cli`` where the environment or the
current folder is the point; the scripted model over HTTP and the local sandbox for runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.cli import build_parser, main
from agent.cli.flags import Parser
from agent.models.script_server import ScriptedServer
from tests.support.repos import make_repo
from tests.support.textutil import (
    BUGGY,
    ISSUE,
    MODEL,
    ROOT,
    bash,
    cli_error,
    pgs_env,
)

FIX = bash("sed -i 's/text.lower()/text.upper()/' textutil.py")
SUBMIT = {"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]}


def parsers(
    parser: argparse.ArgumentParser, name: str = "pgs"
) -> list[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and the parser of each of its commands, nested ones included."""
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                found += parsers(sub, f"{name} {command}")
    return found


# --------------------------------------------------------------------------- help


def test_every_flag_of_every_command_has_help() -> None:
    missing = [
        f"{name} {action.option_strings[0] if action.option_strings else action.dest}"
        for name, parser in parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []
    commands = {name for name, _ in parsers(build_parser())}
    assert {"pgs run", "pgs batch", "pgs eval", "pgs env build", "pgs serve-script"} <= commands


def test_structured_and_template_flags_say_what_they_take(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--model.retries JSON How transient failures" in text
    assert "keys attempts, min_wait, max_wait" in text
    assert "--pgs.tester JSON The Tester sub-agent" in text
    assert "--pgs.check JSON How properties and tests are run in the sandbox" in text
    assert "--agent.instance-template INSTANCE_TEMPLATE Jinja2 template of the first" in text


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["run", "--issue", "x", "--agent.step-limit", "ten"],
            "--agent.step-limit: expected a whole number, got 'ten'",
        ),
        (
            ["run", "--issue", "x", "--agent.shell", "fersh"],
            "--agent.shell: expected one of fresh, persistent, got 'fersh'; did you mean fresh?",
        ),
        (["run", "--issue"], "--issue: expected a value after it"),
        (["run"], "pgs run needs --issue (see pgs run --help)"),
        (
            ["batch", "--dataset", "d", "--workers", "two"],
            "--workers: expected a whole number, got 'two'",
        ),
        (
            ["batch"],
            "one of the arguments --instances --dataset is required (see pgs batch --help)",
        ),
        (["eval", "--timeout", "soon"], "--timeout: expected a number, got 'soon'"),
        (
            ["eval", "--apply-commands", "git"],
            "--apply-commands: expected one of harness, cloud, got 'git'",
        ),
        (["demo", "--sandbox", "podman"], "--sandbox: expected one of docker, local, got 'podman'"),
        (["report", "--jsno"], "unknown flag --jsno; did you mean --json?"),
        (["ladder", "--workers", "all"], "--workers: expected a whole number, got 'all'"),
        (["inspect", "a.traj", "--port", "http"], "--port: expected a whole number, got 'http'"),
        (["inspect", "a.traj", "b.traj"], "unexpected argument 'b.traj' (see pgs inspect --help)"),
        (
            ["replay", "r.traj", "--repo", ".", "--agent.time-limit", "1h"],
            "--agent.time-limit: expected a number, got '1h'",
        ),
        (
            ["env", "base", "--method", "docker"],
            "--method: expected one of debootstrap, dockerfile, got 'docker'; "
            "did you mean dockerfile?",
        ),
        (["env", "build"], "pgs env build needs REPO (see pgs env build --help)"),
        (["env"], "pgs env needs a command: base, build, ls, prune"),
        (
            ["serve-script", "s.yaml", "--port", "eighty"],
            "--port: expected a whole number, got 'eighty'",
        ),
        (["rnu"], "unknown command 'rnu'; did you mean run?"),
        (
            ["run", "--issue", "x", "--mod", "m"],
            "--mod is short for several flags (--model.name, --model, --model.base-url, "
            "--model.api-key-env, ...)",
        ),
        (
            [],
            "pgs needs a command: run, demo, env, serve-script, batch, eval, select, report, "
            "ladder, inspect, replay, github",
        ),
    ],
)
def test_a_bad_flag_or_value_is_one_line_and_exit_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_error(capsys, *argv) == f"pgs: error: {line}"
    assert capsys.readouterr().out == ""  # no usage


def test_a_bad_value_is_one_line_from_the_installed_command_too() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "run", "--agent.step-limit", "ten", "--issue", "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=pgs_env(),
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "pgs: error: --agent.step-limit: expected a whole number, got 'ten'\n"


# --------------------------------------------------------------------------- spellings


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["run", "--agent.model.name", "gpt-4o"], "--model.name"),
        (["run", "--agent.model.per_instance_cost_limit", "2"], "--model.per-instance-cost-limit"),
        (["run", "--env.repo.path", "."], "--repo"),
        (["run", "--problem_statement.path", "issue.md"], "--issue FILE"),
        (["run", "--problem_statement.github_url", "https://x"], "--issue URL"),
        (["run", "--actions.open_pr"], "--open-pr"),
        (["run", "-m", "gpt-4o"], "--model"),
        (["run", "-t", "fix it"], "--issue"),
        (["run", "--task", "fix it"], "--issue"),
        (["run", "--model.nmae", "gpt-4o"], "--model.name"),
        (["batch", "--num_workers", "4"], "--workers"),
        (["batch", "-w", "4"], "--workers"),
        (["batch", "--instances.slice", ":3"], "--slice"),
        (["batch", "--instances.split", "dev"], "--split"),
        (["batch", "--instances.shuffle=True"], "--shuffle"),
        (["batch", "--instances.filter", "django"], "--filter"),
        (["batch", "--redo_existing"], "--redo"),
        (["batch", "-o", "out"], "--output-dir"),
        (
            ["batch", "--instances.subset", "lite"],
            "--dataset (e.g. --dataset princeton-nlp/SWE-bench_Lite)",
        ),
        (["batch", "--subset", "lite"], "--dataset (e.g. --dataset princeton-nlp/SWE-bench_Lite)"),
        (
            ["batch", "--instances.type", "swe_bench"],
            "--instances FILE (SWE-bench records) or --dataset NAME",
        ),
        (["batch", "--env_var_path", ".env.prod"], "--env-file"),
        (["batch", "--max_workers", "8"], "--workers"),  # pgs eval takes the harness's
        (["batch", "--dataset_name", "princeton-nlp/SWE-bench_Lite"], "--dataset"),
    ],
)
def test_other_tools_spellings_point_to_the_pgs_flag(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    flag = argv[1].split("=")[0]
    assert cli_error(capsys, *argv) == f"pgs: error: unknown flag {flag}; did you mean {meant}?"


def test_a_flag_no_command_has_is_refused_with_where_to_look(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = cli_error(capsys, "run", "--instances.subset", "lite")  # a batch flag
    assert line == "pgs: error: unknown flag --instances.subset for pgs run (see pgs run --help)"


def test_underscores_are_dashes() -> None:
    args = build_parser().parse_args(
        ["run", "--issue", "x", "--agent.step_limit", "5", "--output_dir=out", "--model.top_p", "1"]
    )
    assert (args.agent__step_limit, args.output_dir, args.model__top_p) == (5, Path("out"), 1.0)
    # a value is never respelled, nor what follows --
    args = build_parser().parse_args(["run", "--issue=--a_b", "--test-cmd=-k x_y"])
    assert (args.issue, args.pgs__test_cmd) == ("--a_b", "-k x_y")


PARSERS = dict(parsers(build_parser()))
LONG_FLAGS = sorted(
    (name, flag)
    for name, parser in PARSERS.items()
    for flag in parser._option_string_actions
    if flag.startswith("--") and "-" in flag[2:]
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LONG_FLAGS), st.randoms(use_true_random=False))
def test_any_dash_of_any_flag_may_be_an_underscore(
    command_and_flag: tuple[str, str], random: Random
) -> None:
    name, flag = command_and_flag
    parser = PARSERS[name]
    assert isinstance(parser, Parser) and "_" not in flag
    spelled = "--" + "".join(c if c != "-" or random.random() < 0.5 else "_" for c in flag[2:])
    assert parser.respell([spelled, "--", spelled]) == [flag, "--", spelled]
    assert parser.respell([f"{spelled}=x_y"]) == [f"{flag}=x_y"]


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [(["run", "--issue", "x"], 0), (["-v", "run", "--issue", "x"], 1),
     (["run", "--issue", "x", "-vv"], 2), (["env", "-v", "ls"], 1)],
)  # fmt: skip
def test_verbose_goes_before_or_after_the_command(argv: list[str], verbose: int) -> None:
    assert build_parser().parse_args(argv).verbose == verbose


# --------------------------------------------------------------------------- --version


@pytest.mark.parametrize(
    "argv", [["--version"], ["run", "--version"], ["env", "build", "--version"]]
)
def test_version_is_the_installed_packages(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out == f"pgs {metadata.version('pgs-agent')}\n"


# --------------------------------------------------------------------------- config files


@pytest.mark.parametrize(
    ("yaml", "says"),
    [
        ("model:\n  nmae: gpt-4o\n", "unknown key model.nmae (did you mean model.name?)"),
        ("modle:\n  name: gpt-4o\n", "unknown key modle (did you mean model?)"),
        (
            "model:\n  name: m\n  retries:\n    atempts: 2\n",
            "unknown key model.retries.atempts (did you mean model.retries.attempts?)",
        ),
        (
            "model:\n  name: m\nsandbox:\n  memroy: 2g\n",
            "unknown key sandbox.memroy (did you mean sandbox.memory?)",
        ),
        (
            "model:\n  name: m\nagent:\n  step_limit: many\n",
            "agent.step_limit: Input should be a valid integer, unable to parse string as an "
            "integer, got 'many'",
        ),
    ],
)
def test_a_config_files_mistake_is_named_with_the_file_and_key(
    yaml: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "my.yaml"
    config.write_text(yaml)
    line = cli_error(capsys, "run", "--issue", "x", "--config", str(config))
    assert line == f"pgs: error: {config}: {says}"


def test_a_flag_out_of_range_is_named_as_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_error(capsys, "run", "--issue", "x", "--model", "m", "--agent.step-limit", "-5")
    assert (
        line == "pgs: error: --agent.step-limit: Input should be greater than or equal to 0, got -5"
    )


# --------------------------------------------------------------------------- .env


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``pgs`` runs in ``tmp_path`` (where its ``.env`` is read); the environment is put back
    as it was afterwards, whatever the file set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHON_DOTENV_DISABLED", raising=False)  # set for the suite
    saved = dict(os.environ)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


def local_run(repo: Path, out: Path) -> list[str]:
    """``pgs run`` with the scripted model and no --base-url: $OPENAI_BASE_URL says where."""
    prices = json.dumps({MODEL: [0, 0]})
    return [
        "run", "--repo", str(repo), "--issue", ISSUE, "--model", MODEL, "--model.prices", prices,
        "--feedback", "none", "--sandbox", "local", "--output-dir", str(out),
    ]  # fmt: skip


def test_a_dot_env_file_in_the_current_folder_reaches_the_run(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(folder / "textutil", BUGGY)
    with ScriptedServer([FIX, SUBMIT]) as server:
        (folder / ".env").write_text(f"# the endpoint\nOPENAI_BASE_URL={server.url}\n")
        code = main(local_run(repo, folder / "out"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "text.upper()" in captured.out


def shown(
    capsys: pytest.CaptureFixture[str], folder: Path, first: str, second: str, *argv: str
) -> str:
    """The error line of a config whose two bad values are ``first`` and ``second``: each is
    shown, or *** when it is a secret of pgs's environment."""
    config = folder / "values.yaml"
    config.write_text(f"model: {{name: m}}\nagent: {{step_limit: {first}, time_limit: {second}}}\n")
    return cli_error(capsys, "run", "--issue", "x", "--config", str(config), *argv)


def test_the_environment_wins_over_the_dot_env_file(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "from-the-shell-1234")
    (folder / ".env").write_text("MY_SERVICE_TOKEN=from-the-file-1234\n")
    line = shown(capsys, folder, "from-the-file-1234", "from-the-shell-1234")
    assert "got 'from-the-file-1234'" in line and "got '***'" in line


def test_env_file_names_another_file(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / ".env").write_text("MY_SERVICE_TOKEN=from-dot-env-1234\n")  # not read
    (folder / "prod.env").write_text('export MY_OTHER_TOKEN="from-prod-env-1234"\n')
    line = shown(capsys, folder, "from-dot-env-1234", "from-prod-env-1234", "--env-file=prod.env")
    assert "got 'from-dot-env-1234'" in line and "got '***'" in line


def test_a_secret_from_the_dot_env_file_is_redacted(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / ".env").write_text("MY_SERVICE_TOKEN=s3cr3t-t0ken-value\n")
    line = cli_error(capsys, "run", "--issue", "x", "--agent.step-limit", "s3cr3t-t0ken-value")
    assert line == "pgs: error: --agent.step-limit: expected a whole number, got '***'"


def test_python_dotenv_disabled_leaves_dot_env_unread(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHON_DOTENV_DISABLED", "1")
    (folder / ".env").write_text("MY_SERVICE_TOKEN=s3cr3t-t0ken-value\n")
    line = cli_error(capsys, "run", "--issue", "x", "--agent.step-limit", "s3cr3t-t0ken-value")
    assert line.endswith("got 's3cr3t-t0ken-value'")  # not a secret: the file was not read


@pytest.mark.parametrize(
    ("files", "argv", "line"),
    [
        (
            {},
            ["--env-file", "missing.env"],
            "--env-file missing.env: cannot read it (No such file or directory)",
        ),
        (
            {".env": "A=1\nthis is not a variable\n"},
            [],
            ".env, line 2: not NAME=value: 'this is not a variable'",
        ),
    ],
)
def test_a_bad_env_file_is_one_line(
    files: dict[str, str],
    argv: list[str],
    line: str,
    folder: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)
    assert cli_error(capsys, "report", str(folder), *argv) == f"pgs: error: {line}"


@pytest.mark.parametrize(
    ("command", "actions"), [("run", "true"), ("github", "true"), ("github", "")]
)
def test_a_checkouts_dot_env_is_not_read_by_pgs_github_nor_on_a_runner(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    actions: str,
) -> None:
    # On a runner the current folder is the checkout: anyone's pull request may add a .env
    # that sends the model's key to a server of its own.
    monkeypatch.setenv("GITHUB_ACTIONS", actions)
    (folder / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\nMY_TOKEN=s3cr3t-t0ken\n")
    line = cli_error(capsys, command, "--agent.step-limit", "s3cr3t-t0ken")
    assert line.endswith("got 's3cr3t-t0ken'")  # not a secret: the file was not read
    assert "OPENAI_BASE_URL" not in os.environ or os.environ["OPENAI_BASE_URL"] != (
        "http://127.0.0.1:9/v1"
    )
