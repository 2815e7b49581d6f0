"""The flags users type: one ``pgs: error:`` line for every mistake, other tools' spellings
pointed to, ``--version`` and ``--env-file`` on every command.

:class:`Parser` is the ``argparse`` parser of ``pgs`` and, through ``add_subparsers``, of every
command. What it changes:

- A mistake is one line, ``pgs: error: <flag>: <what is wrong>``, and exit code 2; never the
  usage (``--help`` prints it). A bad value names the flag, the value and what is expected
  (``--agent.step-limit: expected a whole number, got 'ten'``).
- ``_`` and ``-`` are the same in a flag's name: ``--agent.step_limit`` is ``--agent.step-limit``
  and ``--output_dir`` is ``--output-dir`` (SWE-agent writes its flags with ``_``).
- An unknown flag is refused with the pgs flag meant, from :data:`FOREIGN` (SWE-agent's
  ``sweagent run`` / ``run-batch``, mini-swe-agent's ``mini`` / ``mini-extra swebench``, the
  SWE-bench harness) or else the closest flag of the command by name (:mod:`difflib`):
  ``pgs: error: unknown flag --agent.model.name; did you mean --model.name?``. Other tools'
  spellings are pointed to, not accepted: their meaning differs in details (SWE-agent's
  ``--instances.subset lite`` is pgs's ``--dataset princeton-nlp/SWE-bench_Lite``), and one
  spelling keeps commands, docs and saved configs alike.

``.env``: :func:`load_env_files` reads ``./.env`` (or the ``--env-file`` given) into the
environment before the command is parsed; a variable already set is never overridden;
``PYTHON_DOTENV_DISABLED=1`` (python-dotenv's switch) leaves ``./.env`` unread. Values
from it are secrets by the same rules as the rest of the environment (:mod:`agent.core.secrets`).
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from agent.core.secrets import Redactor
from agent.errors import EnvFileError

#: Exit code of a mistake in the command (:data:`agent.errors.USER_ERROR`).
USAGE = 2

#: Other tools' flags (``_`` written ``-``) → what pgs calls them. A target is shown only by a
#: command that has its first flag; a prefix ending in ``.`` maps the flags below it.
FOREIGN: dict[str, str] = {
    # SWE-agent (sweagent run, sweagent run-batch): the model is a section of its own in pgs.
    "--agent.model.": "--model.",
    "--agent.model.api-base": "--model.base-url",
    "--agent.model.api-key": "--model.api-key-env (the name of the variable holding the key)",
    "--num-workers": "--workers",
    "--redo-existing": "--redo",
    "--env-var-path": "--env-file",
    "--instances.type": "--instances FILE (SWE-bench records) or --dataset NAME",
    "--instances.path": "--instances",
    "--instances.subset": "--dataset (e.g. --dataset princeton-nlp/SWE-bench_Lite)",
    "--instances.dataset-name": "--dataset",
    "--instances.split": "--split",
    "--instances.slice": "--slice",
    "--instances.shuffle": "--shuffle",
    "--instances.filter": "--filter",
    "--instances.deployment.image": "--image",
    "--env.repo.path": "--repo",
    "--env.repo.github-url": "--issue (a GitHub issue URL: the repository is cloned)",
    "--env.repo.base-commit": "--base-commit",
    "--env.deployment.image": "--image",
    "--env.deployment.type": "--sandbox",
    "--env.post-startup-commands": "--setup",
    "--problem-statement.path": "--issue FILE",
    "--problem-statement.text": "--issue TEXT",
    "--problem-statement.github-url": "--issue URL",
    "--actions.open-pr": "--open-pr",
    "--actions.apply-patch-locally": "--apply",
    # mini-swe-agent (mini, mini-extra swebench)
    "-m": "--model",
    "-t": "--issue",
    "--task": "--issue",
    "-c": "--config",
    "-o": "--output-dir",
    "--output": "--output-dir",
    "-w": "--workers",
    "--subset": "--dataset (e.g. --dataset princeton-nlp/SWE-bench_Lite)",
    "-l": "--model.per-instance-cost-limit",
    "--cost-limit": "--model.per-instance-cost-limit",
    "--model-class": "--model.model-class",
    "--environment-class": "--sandbox",
    # the SWE-bench harness (python -m swebench.harness.run_evaluation)
    "--max-workers": "--workers",
    "--predictions-path": "--predictions",
    "--dataset-name": "--dataset",
}

#: How close a typo must be to a flag's name to be suggested (:func:`difflib.get_close_matches`).
CUTOFF = 0.75


def version() -> str:
    """pgs's version, from the installed package's metadata."""
    try:
        return metadata.version("pgs-agent")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the errors and spellings of this module's docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("exit_on_error", False)  # parse_known_args makes them one line
        super().__init__(*args, **kwargs)
        self.register("type", int, whole_number)
        self.register("type", float, number)

    def error(self, message: str) -> NoReturn:
        print(f"pgs: error: {Redactor.from_env().redact(self.reword(message))}", file=sys.stderr)
        sys.exit(USAGE)

    def reword(self, message: str) -> str:
        """argparse's messages that are not already one clear line, made one."""
        message = re.sub(r"(--[\w.-]+)(/-[\w.-]+)+", r"\1", message)  # a flag's first name
        required = re.match(r"the following arguments are required: (.*)", message)
        if required:
            if self._subparsers and required[1] == "COMMAND":
                return f"{self.prog} needs a command: {', '.join(self.commands())}"
            return f"{self.prog} needs {required[1]} (see {self.prog} --help)"
        if re.match(r"one of the arguments .* is required", message):
            return f"{message} (see {self.prog} --help)"
        ambiguous = re.match(r"ambiguous option: ([^=\s]+)\S* could match (.*)", message)
        if ambiguous:
            matches = ambiguous[2].split(", ")
            more = ", ..." if len(matches) > 4 else ""
            return f"{ambiguous[1]} is short for several flags ({', '.join(matches[:4])}{more})"
        unrecognized = re.match(r"unrecognized arguments: (\S+)", message)
        if unrecognized:
            word = unrecognized[1]
            if word.startswith("-"):
                return self.unknown(word)
            return f"unexpected argument {word!r} (see {self.prog} --help)"
        return message.replace("expected one argument", "expected a value after it")

    def commands(self) -> list[str]:
        """The names of this parser's commands (none for a command's own parser)."""
        return [
            name
            for action in self._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        ]

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        words = list(sys.argv[1:] if args is None else args)
        if not self._subparsers:  # a command's own parser sees all its flags
            words = self.respell(words)
        try:
            parsed, extra = super().parse_known_args(words, namespace)
        except argparse.ArgumentError as e:
            name = (e.argument_name or "").split("/")[0]
            self.error(f"{name}: {e.message}" if name else e.message)
        if extra and not self._subparsers:  # named by the command, not by pgs
            self.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed, extra

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        names = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        if isinstance(action, argparse._SubParsersAction):
            hint = hint or f" (commands: {', '.join(names)})"
            raise argparse.ArgumentError(None, f"unknown command {value!r}{hint}")
        raise argparse.ArgumentError(
            action, f"expected one of {', '.join(names)}, got {value!r}{hint}"
        )

    def known(self, flag: str) -> bool:
        """Whether argparse takes ``flag`` as one of this parser's (an unambiguous prefix of a
        long flag included, as argparse allows)."""
        options = self._option_string_actions
        if flag in options or (not flag.startswith("--") and flag[:2] in options):
            return True
        return flag.startswith("--") and any(o.startswith(flag) for o in options)

    def respell(self, words: list[str]) -> list[str]:
        """``words`` with each flag spelled with ``_`` respelled with ``-``; the first unknown
        flag is an error with the flag meant."""
        out: list[str] = []
        for i, word in enumerate(words):
            if word == "--":  # what follows is values
                return out + words[i:]
            if not word.startswith("-") or word == "-" or " " in word or re.match(r"-\.?\d", word):
                out.append(word)  # a value, as argparse tells them (negative numbers included)
                continue
            flag, eq, value = word.partition("=")
            if not self.known(flag):
                dashed = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
                if dashed not in self._option_string_actions:
                    self.error(self.unknown(flag))
                flag = dashed
            out.append(flag + eq + value)
        return out

    def unknown(self, flag: str) -> str:
        """One line for a flag this command does not have, with the one meant if known."""
        meant = self.meant(flag)
        hint = f"; did you mean {meant}?" if meant else f" for {self.prog} (see {self.prog} --help)"
        return f"unknown flag {flag}{hint}"

    def meant(self, flag: str) -> str | None:
        dashed = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
        options = self._option_string_actions
        target = FOREIGN.get(dashed)
        if target is None:
            for prefix, replacement in FOREIGN.items():
                if prefix.endswith(".") and dashed.startswith(prefix):
                    target = replacement + dashed[len(prefix) :]
        if target is not None and target.split()[0] in options:
            return target
        longs = [o for o in options if o.startswith("--")]
        close = difflib.get_close_matches(dashed, longs, n=1, cutoff=CUTOFF)
        return close[0] if close else None


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    """``--version``, ``--env-file`` and ``-v`` on ``parser`` and on each of its commands, so
    that they are taken wherever they are typed (``pgs --version``, ``pgs run --version``,
    ``pgs run ... -v``)."""
    if "--verbose" not in parser._option_string_actions:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=argparse.SUPPRESS,  # unset here keeps what `pgs -v COMMAND` set
            help="log pgs's debug details; -vv: the libraries' too (as pgs -v COMMAND)",
        )
    parser.add_argument(
        "--version",
        action="version",
        version=f"pgs {version()}",
        help="print pgs's version and exit",
    )
    parser.add_argument(
        "--env-file",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="read environment variables from this file (default: ./.env when it exists); "
        "variables already set keep their value",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):
                add_common_flags(command)


def env_file_in(argv: Sequence[str]) -> Path | None:
    """The ``--env-file`` of ``argv`` (before the rest is parsed: the file's variables may be
    needed to parse it, and to redact what is shown)."""
    found: Path | None = None
    for i, word in enumerate(argv):
        if word == "--":
            break
        flag, eq, value = word.partition("=")
        if flag.replace("_", "-") == "--env-file":
            if eq:
                found = Path(value)
            elif i + 1 < len(argv):
                found = Path(argv[i + 1])
    return found


def load_env_files(argv: Sequence[str]) -> tuple[Path | None, list[str]]:
    """Set the variables of ``--env-file PATH`` (or ``./.env``, when it exists) that the
    environment does not hold yet; the file read and the names set, for the log.

    ``./.env`` is not read by ``pgs github`` nor on a GitHub Actions runner: there the current
    folder is the checkout of a repository anyone may send a pull request to, and its ``.env``
    could point ``OPENAI_BASE_URL`` at a server of its own, to which the model's key would go.
    ``--env-file`` names a file the workflow chose, and is read."""
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    given = env_file_in(argv)
    path = given or Path(".env")
    off = os.environ.get("PYTHON_DOTENV_DISABLED", "").lower() in ("1", "true", "yes", "on")
    command = next((word for word in argv if not word.startswith("-")), None)
    off = off or os.environ.get("GITHUB_ACTIONS") == "true" or command == "github"
    if given is None and (off or not path.is_file()):
        return None, []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise EnvFileError(f"--env-file {path}: cannot read it ({why})") from None
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            line = binding.original.line
            raise EnvFileError(
                f"{path}, line {line}: not NAME=value: {binding.original.string.strip()[:60]!r}"
            )
    loaded = []
    for name, value in dotenv_values(stream=io.StringIO(text)).items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            loaded.append(name)
    return path, loaded
