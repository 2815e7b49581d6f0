"""The issue's own code as a probe of behaviour: what each candidate prints on it.

An issue usually shows the bug: a fenced code block, a ``>>>`` session, an IPython one. Each
piece that parses as Python is a :class:`~agent.record.selection.Probe`. In the sandbox it runs
statement by statement as a console runs it (:data:`RUNNER`): an expression's value is printed
with its ``repr``, an exception as ``Type: message`` and the next statement still runs, each
statement with a time limit; the random generators are seeded, warnings are silenced and
plotting has no display. What it printed, normalised (:func:`normalise`: memory addresses and
the sandbox's temporary paths taken out), is the candidate's behaviour on the issue.

A probe that prints something different on two runs of the original code says nothing about
a patch and is dropped. A probe is evidence of behaviour, not of correctness: candidates are
compared on it with each other and with the original code (:mod:`agent.swebench.selection.rank`).
"""

from __future__ import annotations

import ast
import re
import shlex
import textwrap

from agent.record.selection import Probe
from envs.sandbox import Sandbox

#: At most this many probes per issue, each at most this long.
MAX_PROBES, MAX_CODE = 6, 6000
#: Seconds per statement, and for a whole probe.
STATEMENT_SECONDS, PROBE_SECONDS = 20, 90
#: What a probe's output is cut to.
MAX_OUTPUT = 4000
FOLDER = "/tmp/pgs-probes"
PYTHON_LANGS = {"", "python", "py", "python3", "pycon", "ipython", "ipython3", "pytb", "pyi"}
#: A fenced block (its info string has no backtick, as in CommonMark: ```code``` on one line,
#: written at the start of a line, opens no fence that would swallow the next block).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n`]*\n(.*?)^[ \t]*```", re.S | re.M)
_PROMPT = re.compile(r"^\s*(>>>|\.\.\.)( |$)")
#: What makes a block a console session: a ``>>>`` prompt (a ``...`` line alone is Python's
#: Ellipsis, a function body or a placeholder, as often as a continuation prompt).
_SESSION = re.compile(r"^\s*>>>( |$)")
_IPY_IN = re.compile(r"^\s*In \[\d*\]:\s?")
_IPY_MORE = re.compile(r"^\s*\.\.\.+:\s?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_TMP = re.compile(r"/tmp/[\w./-]+")
_VERBOSE = re.compile(r"::\S+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_PERCENT = re.compile(r"\s*\[\s*\d+%\]")
_DURATION = re.compile(r" in [\d.]+\s?s(econds)?\b.*$")

#: Conventional short names of modules an issue's code uses without importing them.
ALIASES = {"np": "numpy", "pd": "pandas", "xr": "xarray", "plt": "matplotlib.pyplot"}
#: Runs one probe, statement by statement, like the interactive console (Python 3.6 and on).
#: A name the code uses without defining it is imported once when it names a module (its
#: conventional short name included: np, pd, xr, plt), and the statement runs again.
RUNNER = r"""
import ast, importlib, os, random, re, signal, sys, warnings
warnings.simplefilter("ignore")
os.environ.setdefault("MPLBACKEND", "Agg")
sys.path.insert(0, os.getcwd())
random.seed(0)
try:
    import numpy
    numpy.random.seed(0)
except Exception:
    pass
ALIASES = __ALIASES__
def _alarm(signum, frame):
    raise TimeoutError("statement took more than %d s" % STATEMENT)
STATEMENT = int(sys.argv[2])
signal.signal(signal.SIGALRM, _alarm)
source = open(sys.argv[1]).read()
ns = {"__name__": "__main__"}
def _module(name):
    try:
        return importlib.import_module(ALIASES.get(name, name))
    except Exception:
        return None
for stmt in ast.parse(source).body:
    tree = ast.Interactive(body=[stmt])
    ast.fix_missing_locations(tree)
    code = compile(tree, "<issue>", "single")
    for again in (False, True):
        signal.alarm(STATEMENT)
        try:
            exec(code, ns)
        except SystemExit as e:
            print("SystemExit: %s" % (e.code,))
        except NameError as e:
            found = re.findall(r"name '(\w+)' is not defined", str(e))
            module = _module(found[0]) if found and not again else None
            if module is not None:
                ns[found[0]] = module
                continue
            print("NameError: %s" % (str(e).splitlines() or [""])[0][:300])
        except BaseException as e:
            message = str(e).strip().splitlines()
            print("%s: %s" % (type(e).__name__, message[0][:300] if message else ""))
        finally:
            signal.alarm(0)
        break
    sys.stdout.flush()
""".replace("__ALIASES__", repr(ALIASES))


def _from_console(lines: list[str], prompt: re.Pattern[str], more: re.Pattern[str]) -> str:
    """The statements of a console session: prompt lines without their prompt; output lines
    (no prompt) left out."""
    kept = []
    for line in lines:
        if prompt.match(line):
            kept.append(prompt.sub("", line, count=1))
        elif more.match(line) and kept:
            kept.append(more.sub("", line, count=1))
    return "\n".join(kept)


def _code_of(block: str) -> str | None:
    """The Python in one block of the issue, or None when it is not Python."""
    lines = block.splitlines()
    if any(_SESSION.match(line) for line in lines):
        code = _from_console(lines, re.compile(r"^\s*>>> ?"), re.compile(r"^\s*\.\.\. ?"))
    elif any(_IPY_IN.match(line) for line in lines):
        code = _from_console(lines, _IPY_IN, _IPY_MORE)
    else:
        code = block
    code = textwrap.dedent(code).strip()
    if not code or len(code) > MAX_CODE:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    if not tree.body or all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in tree.body):
        return None
    return code


def extract(problem_statement: str) -> list[str]:
    """The pieces of Python an issue shows, in order, without repeats: fenced blocks in a
    Python language (or none), then the ``>>>`` sessions outside any fence."""
    text = problem_statement.replace("\r\n", "\n")
    found: list[str] = []
    for match in _FENCE.finditer(text):
        if match.group(1).lower() in PYTHON_LANGS:
            code = _code_of(match.group(2))
            if code and code not in found:
                found.append(code)
    outside = _FENCE.sub("", text)
    session: list[str] = []
    for line in [*outside.splitlines(), ""]:
        if _PROMPT.match(line) or (session and line.strip() and not line.startswith(" " * 8)):
            session.append(line)
            continue
        if session:
            code = _code_of("\n".join(session))
            if code and code not in found:
                found.append(code)
            session = []
    return found[:MAX_PROBES]


def normalise(output: str) -> str:
    """What a probe printed, without what differs from run to run for reasons other than the
    code (memory addresses, temporary paths, trailing blanks)."""
    text = _ADDRESS.sub("0x…", output)
    text = _TMP.sub("/tmp/…", text)
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(lines).strip()[:MAX_OUTPUT]


def install(sandbox: Sandbox, codes: list[str]) -> list[str]:
    """Write the runner and the probes into the sandbox; their paths there."""
    sandbox.run(f"mkdir -p {FOLDER}")
    sandbox.write_file(f"{FOLDER}/run.py", RUNNER)
    paths = []
    for i, code in enumerate(codes, 1):
        path = f"{FOLDER}/probe-{i}.py"
        sandbox.write_file(path, code + "\n")
        paths.append(path)
    return paths


def is_test_module(code: str) -> bool:
    """The code defines tests (a ``test*`` function or a ``Test*`` class): it is a test file
    to run with pytest, as the issue's reader would."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(
        (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"))
        or (isinstance(n, ast.ClassDef) and n.name.startswith("Test"))
        for n in tree.body
    )


def pytest_summary(output: str) -> str:
    """What a pytest run of a probe said: each test's outcome, its error lines (``E ...``),
    the last line without its duration."""
    kept = []
    for line in output.splitlines():
        if _VERBOSE.search(line):
            kept.append(_PERCENT.sub("", line).strip())
        elif line.startswith("E ") and len(kept) < 60:
            kept.append(line.rstrip())
    lines = [line for line in output.splitlines() if line.strip()]
    if lines:
        kept.append(_DURATION.sub("", lines[-1].strip("= ")))
    return "\n".join(kept)


def run_probes(sandbox: Sandbox, codes: list[str], python: str = "python3") -> list[str]:
    """What each probe printed on the code in the sandbox, normalised: run as a console runs
    it, or, when it defines tests, with pytest in a folder of its own."""
    outputs = []
    for path, code in zip(install(sandbox, codes), codes, strict=True):
        tests = is_test_module(code)
        if tests:
            folder = path.removesuffix(".py")
            command = (
                f"mkdir -p {folder} && cp {path} {folder}/test_issue.py && cd {folder} && "
                f"{python} -B -m pytest -v -p no:cacheprovider -W ignore test_issue.py 2>&1"
            )
        else:
            command = (
                f"{python} -B {FOLDER}/run.py {shlex.quote(path)} {STATEMENT_SECONDS} 2>/dev/null"
            )
        result = sandbox.run(command, timeout=PROBE_SECONDS, max_output=MAX_OUTPUT * 4)
        text = pytest_summary(result.output) if tests else result.output
        if result.timed_out:
            text += "\n[probe timed out]"
        outputs.append(normalise(text))
    return outputs


def probes_of(sandbox: Sandbox, problem_statement: str, python: str = "python3") -> list[Probe]:
    """The issue's probes that behave the same on two runs of the original code (in the
    sandbox now), with what they printed there."""
    codes = extract(problem_statement)
    if not codes:
        return []
    first = run_probes(sandbox, codes, python)
    second = run_probes(sandbox, codes, python)
    return [
        Probe(name=f"probe-{i}", code=code, original=a)
        for i, (code, a, b) in enumerate(zip(codes, first, second, strict=True), 1)
        if a == b
    ]
