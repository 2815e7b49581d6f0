"""Which repository tests a patch concerns: the test files that import what it changed.

:func:`changed_files` reads a patch's paths; :func:`related_tests` finds the repository's
test files that import a changed module (by their import statements, read in the sandbox),
its own tests first, most related first.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import shlex
from collections.abc import Sequence

from agent.errors import CheckError
from envs.sandbox import SCRATCH_DIRS, Sandbox


def changed_files(patch: str) -> list[str]:
    """Paths a patch touches (added, modified, removed; renames by their new path), in order."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patched = PatchSet(patch)
    except UnidiffParseError as e:
        raise CheckError(f"the patch cannot be parsed: {e}") from e
    paths: list[str] = []
    for changed in patched:
        path = changed.path
        if path not in paths:
            paths.append(path)
    return paths


def is_test_file(path: str) -> bool:
    name = posixpath.basename(path)
    in_scratch = any(path == d or path.startswith(d + "/") for d in SCRATCH_DIRS)
    test_name = name.startswith("test_") or name.endswith("_test.py")
    return name.endswith(".py") and test_name and not in_scratch


def module_names(path: str) -> set[str]:
    """The names a Python file can be imported by: ``src/pkg/mod.py`` -> pkg.mod, src.pkg.mod.

    A single name (``mod``) only when the module is top-level (at the root, or under ``src/``
    or ``lib/``): a bare ``import utils`` elsewhere is too often another module.
    """
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts:
        return set()
    names = {".".join(parts[i:]) for i in range(len(parts)) if len(parts) - i >= 2}
    if len(parts) == 1 or (len(parts) == 2 and parts[0] in ("src", "lib")):
        names.add(parts[-1])
    return names


def imported_modules(source: str, path: str) -> set[str]:
    """Every module ``source`` may import: ``import a.b``, ``from a import b`` (a, a.b), and
    relative imports resolved against ``path``'s folder."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _imports_by_regex(source)
    package = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*up, *([base] if base else [])])
            if base:
                found.add(base)
            found.update(f"{base}.{a.name}" if base else a.name for a in node.names)
    return found


def statement_imports(statements: str, path: str) -> set[str]:
    """:func:`imported_modules` of the text :func:`import_statements` gives: one statement
    that does not parse (Python 2, a stray continuation) spoils only itself."""
    try:
        ast.parse(statements)
    except (SyntaxError, ValueError):
        found: set[str] = set()
        for match in re.finditer(IMPORT_STATEMENT, statements, re.MULTILINE):
            found |= imported_modules(match.group(0).strip(), path)
        return found
    return imported_modules(statements, path)


def _imports_by_regex(source: str) -> set[str]:
    found: set[str] = set()
    pattern = r"^\s*from\s+([\w.]+)\s+import\s+\(?([\w, \\\n]+)"
    for match in re.finditer(pattern, source, re.MULTILINE):
        found.add(match[1])
        names = (n.strip(" \\\n") for n in match[2].split(","))
        found.update(f"{match[1]}.{n}" for n in names if n)
    for match in re.finditer(r"^\s*import\s+([\w., ]+)", source, re.MULTILINE):
        found.update(n.split(" as ")[0].strip() for n in match[1].split(",") if n.strip())
    return found


#: Folder names that hold tests rather than code (left out when comparing locations).
TEST_DIRS = {"tests", "test", "testing"}
#: Folder names that hold the packages (left out when comparing locations).
SOURCE_DIRS = {"src", "lib"}
#: pathspecs of test files, for git grep and git ls-files.
TEST_PATHSPECS = (":(glob)**/test_*.py", ":(glob)**/*_test.py")
#: An import statement as written: ``from a.b import (x,\n y)``, ``import a, b``, with ``\``
#: continuations. Only these lines are parsed: parsing whole test files (sympy's are thousands
#: of lines) took 4 s of the 6 s that finding sympy's related tests took.
IMPORT_STATEMENT = (
    r"^[ \t]*(?:from[ \t]+[.\w]+[ \t]+import[ \t]*(?:\([^)]*\)|(?:[^\\\n]|\\[\s\S])*)"
    r"|import[ \t]+(?:[^\\\n]|\\[\s\S])*)"
)
#: Run in the sandbox on the files named on stdin: {path: [bytes, "import statements"]}.
_IMPORTS_SCRIPT = f"""
import json, re, sys
statement = re.compile({IMPORT_STATEMENT!r}, re.M)
out = {{}}
for path in sys.stdin.read().splitlines():
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        continue
    out[path] = [len(text), "\\n".join(m.group(0).strip() for m in statement.finditer(text))]
print(json.dumps(out))
"""


def import_statements(source: str) -> str:
    """The import statements of ``source``, one after another (what :func:`imported_modules`
    needs, without parsing the rest of a long file)."""
    found = re.finditer(IMPORT_STATEMENT, source, re.MULTILINE)
    return "\n".join(m.group(0).strip() for m in found)


def _folders(path: str, leave_out: set[str]) -> list[str]:
    return [p for p in posixpath.dirname(path).split("/") if p and p not in leave_out]


def _own_test_names(path: str) -> set[str]:
    """``pkg/mod.py`` -> test_mod.py, mod_test.py (a package's ``__init__``: its folder's name)."""
    stem = posixpath.basename(path)[: -len(".py")]
    if stem == "__init__":
        stem = posixpath.basename(posixpath.dirname(path))
    return {f"test_{stem}.py", f"{stem}_test.py"} if stem else set()


def _is_own_test(test: str, module: str) -> bool:
    """``test`` is named after ``module`` and sits where its tests go: under the module's own
    folders, or a tests folder mirroring them (tests/_core/test_scales.py for
    seaborn/_core/scales.py, sympy/core/tests/test_numbers.py for sympy/core/numbers.py)."""
    if posixpath.basename(test) not in _own_test_names(module):
        return False
    return set(_folders(test, TEST_DIRS)) <= set(_folders(module, SOURCE_DIRS))


def _nearness(test: str, modules: Sequence[str]) -> int:
    """How many folder names ``test`` shares with the nearest changed module."""
    where = set(_folders(test, TEST_DIRS))
    return max((len(where & set(_folders(m, SOURCE_DIRS))) for m in modules), default=0)


def _test_imports(sandbox: Sandbox, words: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Test files that mention one of ``words``: their size and their import statements.

    One command in the sandbox (git grep, then a short Python script); where the sandbox has no
    ``python3``, the files are read one by one."""
    specs = " ".join(shlex.quote(s) for s in TEST_PATHSPECS)
    grep = "git grep -l -I -w -F --untracked " + " ".join(f"-e {shlex.quote(w)}" for w in words)
    grep += f" -- {specs}"
    done = sandbox.run(f"{grep} | python3 -c {shlex.quote(_IMPORTS_SCRIPT)}")
    try:
        data = json.loads(done.output.strip().splitlines()[-1]) if done.ok else None
    except (json.JSONDecodeError, IndexError):
        data = None
    if isinstance(data, dict):
        return {str(p): (int(v[0]), str(v[1])) for p, v in data.items()}
    found: dict[str, tuple[int, str]] = {}
    for path in sandbox.run(grep).output.splitlines():
        try:
            source = sandbox.read_file(path).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        found[path] = (len(source), import_statements(source))
    return found


def related_tests(sandbox: Sandbox, changed_files: list[str]) -> list[str]:
    """Repository test files (``test_*.py``, ``*_test.py``; not the scratch folder) related to
    the changed files, most related first:

    1. test files the patch changes, and the changed modules' own test files (named after the
       module, where its tests go: see :func:`_is_own_test`);
    2. test files that import a changed module (by its dotted name, or ``from pkg import mod``),
       those sharing the most folder names with a changed module first, then the smallest.

    A time budget runs them in this order (:class:`Baseline`), so what it leaves out is the
    least related."""
    modules = [p for p in changed_files if p.endswith(".py") and not is_test_file(p)]
    names: set[str] = set()
    for path in modules:
        names |= module_names(path)
    first = [p for p in changed_files if is_test_file(p)]
    importers: dict[str, int] = {}
    if names:
        words = sorted({m.rsplit(".", 1)[-1] for m in names})
        for path, (size, imports) in _test_imports(sandbox, words).items():
            if is_test_file(path) and statement_imports(imports, path) & names:
                importers[path] = size
    own = set(_own_tests(sandbox, modules))
    first += sorted(own - set(first))
    rest = sorted(
        (p for p in importers if p not in first),
        key=lambda p: (-_nearness(p, modules), importers[p], p),
    )
    return [*first, *rest]


def _own_tests(sandbox: Sandbox, modules: Sequence[str]) -> list[str]:
    wanted = {n for m in modules for n in _own_test_names(m)}
    if not wanted:
        return []
    specs = " ".join(shlex.quote(f":(glob)**/{n}") for n in sorted(wanted))
    listed = sandbox.run(f"git ls-files -co --exclude-standard -- {specs}").output.splitlines()
    return [p for p in listed if is_test_file(p) and any(_is_own_test(p, m) for m in modules)]
