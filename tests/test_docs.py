"""The README and docs/ say what is true of the code: every ``pgs`` command in their shell blocks
parses with pgs's own parser, the blocks marked runnable run, every relative link and ``#anchor``
resolves, the README stays a front door (at most 15 KB, naming the test command .ci/run runs and
linking every docs page).

What is checked, and how to mark a block (docs/development.md, "The docs check"):

- a fenced block whose language is ``bash``, ``sh``, ``shell`` or ``console`` is a shell block
  (in ``console`` blocks only the ``$ `` lines are commands); its lines are joined at backslash
  continuations, comments and heredoc bodies dropped, split at ``|``, ``&&``, ``||``, ``;`` and
  ``&``, and each simple command whose program is ``pgs`` (or ``.venv/bin/pgs``) is parsed by
  :func:`agent.cli.build_parser`, without running it: a renamed flag or command fails here,
  naming the page, the line and the command. In a ``console`` block, a ``pgs: error:`` line
  right after a command says the parser refuses it, with exactly that line;
- ``<!-- runnable -->`` on the line before the fence runs the block with ``bash -e`` in an empty
  temporary folder holding a copy of ``tests/data``, ``pgs`` (and ``.venv/bin/pgs``) on PATH being
  this checkout's code, no model key in the environment: it must exit 0.
  ``<!-- runnable: docker -->`` does the same in a Docker test.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
#: An opening fence; a backtick fence's info string holds no backtick (CommonMark), so a line
#: that starts with inline code (```` ```bash ````) is no fence.
FENCE = re.compile(r"^(\s*)(`{3,}(?=[^`]*$)|~{3,})\s*([\w+-]*)")
RUNNABLE = re.compile(r"^<!--\s*runnable(?::\s*(docker))?\s*-->$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
SEPARATORS = {"|", "||", "&&", ";", "&"}
REDIRECT = re.compile(r"^\d*(>>?|<)(&\d+)?")
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
README_LIMIT = 15 * 1024


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the first line inside the fence, 1-based
    lang: str
    lines: tuple[str, ...]
    runnable: str | None  # None, "plain" or "docker"

    @property
    def where(self) -> str:
        return f"{rel(self.page)}:{self.line}"


def closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence``: the same character, as many or more,
    nothing else."""
    return re.fullmatch(rf"\s*{re.escape(fence[0])}{{{len(fence)},}}\s*", line) is not None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` (indented fences in lists included)."""
    found = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.groups()
        before = next((t.strip() for t in reversed(lines[:i]) if t.strip()), "")
        marker = RUNNABLE.match(before)
        body = []
        j = i + 1
        while j < len(lines) and not closes(lines[j], fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        runnable = (marker.group(1) or "plain") if marker else None
        found.append(Block(page, i + 2, lang.lower(), tuple(body), runnable))
        i = j + 1
    return found


def shell_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page) if b.lang in SHELLS]


def logical_lines(block: Block) -> list[tuple[int, str, list[str]]]:
    """``(line number, text, output)`` of each command line: continuations joined, heredoc
    bodies left out; in console blocks, ``output`` is the lines shown after the command."""
    out: list[tuple[int, str, list[str]]] = []
    pending = ""
    start = 0
    terminator = None
    for offset, text in enumerate(block.lines):
        number = block.line + offset
        if terminator is not None:
            if text.strip() == terminator:
                terminator = None
            continue
        if not pending:
            start = number
            if block.lang == "console":
                if not text.startswith("$ "):
                    if out:
                        out[-1][2].append(text)
                    continue
                text = text[2:]
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        whole = pending + text
        pending = ""
        heredoc = HEREDOC.search(whole)
        if heredoc:
            terminator = heredoc.group(2)
        out.append((start, whole, []))
    return out


def simple_commands(text: str) -> list[list[str]]:
    """The simple commands of one shell line: words, assignments and redirections taken out."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    skip_next = False
    for word in lexer:
        if word in SEPARATORS:
            commands.append([])
        elif skip_next:
            skip_next = False
        elif word.startswith("<<"):
            continue
        elif REDIRECT.match(word):
            skip_next = REDIRECT.sub("", word) == ""  # `> file`: the next word is its target
        else:
            commands[-1].append(word)
    for words in commands:
        while words and ASSIGNMENT.match(words[0]):
            words.pop(0)
    return [words for words in commands if words]


@dataclass(frozen=True)
class Command:
    where: str
    argv: tuple[str, ...]
    #: In a console block, a ``pgs: error:`` line shown after the command: the parser must
    #: refuse it with that line.
    error: str | None = None


def pgs_commands() -> list[Command]:
    found = []
    for block in shell_blocks():
        for number, text, output in logical_lines(block):
            try:
                commands = simple_commands(text)
            except ValueError as e:  # an unclosed quote
                raise AssertionError(f"{rel(block.page)}:{number}: {e}: {text}") from e
            shown = output[0] if output and output[0].startswith("pgs: error: ") else None
            for words in commands:
                if words[0] == "pgs" or words[0].endswith("/pgs"):
                    where = f"{rel(block.page)}:{number}"
                    found.append(Command(where, tuple(words[1:]), shown))
    return found


COMMANDS = pgs_commands()


def test_the_docs_hold_pgs_commands() -> None:
    # The collector works: the pages' commands are found, from the README and from docs/.
    pages = {c.where.split(":")[0] for c in COMMANDS}
    assert "README.md" in pages and len(pages) > 5, pages
    assert len(COMMANDS) > 50


#: A shell variable in a word (``--port "$port"``): the page's value, unknown here; any
#: number parses where a number or a string is asked.
VARIABLE = re.compile(r"\$\{?\w+\}?")


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_every_pgs_command_parses(command: Command) -> None:
    said = io.StringIO()
    shown = f"{command.where}: pgs {shlex.join(command.argv)}"
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args([VARIABLE.sub("1", word) for word in command.argv])
    except SystemExit as e:
        if command.error:  # the page shows the error: the parser must say just that
            assert e.code == 2 and command.error in said.getvalue().splitlines(), (
                f"{shown}\nthe page shows: {command.error}\npgs says: {said.getvalue()}"
            )
        elif e.code not in (0, None):  # 0: --help or --version
            pytest.fail(f"{shown}\n{said.getvalue()}")
    else:
        assert command.error is None, f"{shown}\nparses, but the page shows: {command.error}"


def runnable(kind: str) -> list[Block]:
    return [b for b in shell_blocks() if b.runnable == kind]


def run_block(block: Block, tmp_path: Path) -> None:
    shims = tmp_path / ".shims"
    shims.mkdir()
    shim = f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m agent.cli "$@"\n'
    for where in (shims / "pgs", tmp_path / ".venv" / "bin" / "pgs"):
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(shim)
        where.chmod(0o755)
    work = tmp_path / "work"
    shutil.copytree(ROOT / "tests" / "data", work / "tests" / "data")
    (work / ".venv").symlink_to(tmp_path / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.update(PATH=f"{shims}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200", NO_COLOR="1")
    env.update(TMPDIR=str(tmp_path))
    script = "\n".join(block.lines) + "\n"
    process = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a server the block left behind goes with its group
    )
    try:
        output, _ = process.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, f"{block.where}: exit code {process.returncode}\n{output}"


RUNNABLE_PLAIN = runnable("plain")
RUNNABLE_DOCKER = runnable("docker")


def test_some_blocks_are_runnable() -> None:
    assert RUNNABLE_PLAIN, "no block is marked <!-- runnable -->"


@pytest.mark.parametrize("block", RUNNABLE_PLAIN, ids=[b.where for b in RUNNABLE_PLAIN])
def test_runnable_blocks_run(block: Block, tmp_path: Path) -> None:
    run_block(block, tmp_path)


@pytest.mark.docker
@pytest.mark.parametrize("block", RUNNABLE_DOCKER, ids=[b.where for b in RUNNABLE_DOCKER])
def test_runnable_docker_blocks_run(block: Block, tmp_path: Path, docker_client: object) -> None:
    run_block(block, tmp_path)


# --------------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces as -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def outside_code(page: Path) -> list[tuple[int, str]]:
    """The lines of ``page`` outside fenced blocks."""
    kept = []
    fence = None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(2)
            continue
        if fence is not None:
            if closes(line, fence):
                fence = None
            continue
        kept.append((number, line))
    return kept


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in outside_code(page):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links() -> list[tuple[str, Path, str]]:
    found = []
    for page in PAGES:
        for number, line in outside_code(page):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if not re.match(r"^[a-z][a-z+.-]*:", target):  # http:, mailto: ...
                    found.append((f"{rel(page)}:{number}", page, target))
    return found


LINKS = links()


@pytest.mark.parametrize(("where", "page", "target"), LINKS, ids=[w for w, _, _ in LINKS])
def test_every_relative_link_resolves(where: str, page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    goal = (page.parent / path).resolve() if path else page
    assert goal.exists(), f"{where}: {target}: no such file"
    if anchor:
        assert goal.suffix == ".md", f"{where}: {target}: an anchor into a file that is no page"
        assert anchor in anchors(goal), f"{where}: {target}: no such heading in {rel(goal)}"


# --------------------------------------------------------------------------- the README


def test_the_readme_is_a_front_door() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, more than {README_LIMIT}"


def test_the_readme_names_the_test_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/test" in ci
    assert "bash .ci/test" in README.read_text()
    assert "bash .ci/setup && .venv/bin/pgs demo" in README.read_text()


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for _, p, t in LINKS if p == README}
    missing = [rel(p) for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"the README's page index does not link {missing}"
