"""What a repository declares it needs, read from its files as text (nothing of it runs):
requirement files and what they include, the project's extras, dependency groups (PEP 735) and
poetry groups, ``requires-python``, and the versions its lock file pins.
:mod:`envs.images.detect` makes the image's plan from them."""

from __future__ import annotations

import configparser
import posixpath
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

#: Extras and dependency groups of the project installed when it declares them: the test ones,
#: else ``dev`` (which often holds linters, type checkers and notebooks besides the test tools).
TEST_EXTRAS: tuple[str, ...] = ("test", "tests", "testing", "dev")
#: A requirement line that installs the project itself: `-e .`, `.`, `-e .[socks]`, `file:.`.
_SELF = re.compile(r"^\s*(?:-e\s+|--editable[\s=]+)?(?:file:)?\.(?:/)?(\[[^\]]*\])?\s*(?:#.*)?$")
#: A requirement line naming a folder of the repository (`-e ./plugin`, `./lib[x]`, `file:sub`).
_LOCAL = re.compile(r"^\s*(?:-e\s+|--editable[\s=]+)?(?:file:)?\.{1,2}/")
#: ``-r FILE``, ``--requirement=FILE``, ``-c FILE``, ``--constraint FILE``.
_INCLUDE = re.compile(r"^\s*(-r|--requirement|-c|--constraint)(?:\s*=\s*|\s+)(\S+)")


def included_files(path: str, text: bytes) -> list[tuple[str, str]]:
    """(option, path in the repository) of every file the requirement file ``path`` includes;
    references outside the repository, URLs and ones with variables are left out."""
    out = []
    for line in text.decode(errors="replace").splitlines():
        match = _INCLUDE.match(line.split(" #", 1)[0])
        if not match or re.search(r"^[a-z]+://|\$|\{", match.group(2)):
            continue
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), match.group(2)))
        if not target.startswith(("../", "/")) and target != "..":
            out.append((match.group(1), target))
    return out


def clean_requirements(text: bytes) -> tuple[bytes, set[str]]:
    """The file without the lines that install the project; the extras those lines asked for."""
    extras: set[str] = set()
    kept = []
    for line in text.decode(errors="replace").splitlines():
        match = _SELF.match(line)
        if match:
            extras |= {e.strip() for e in (match.group(1) or "").strip("[]").split(",") if e}
            continue
        if _LOCAL.match(line):  # another folder of the repository: not there when deps install
            continue
        kept.append(line)
    return ("\n".join(kept) + "\n").encode(), extras


def dependency_groups(pyproject: dict[str, Any]) -> list[str]:
    groups = pyproject.get("dependency-groups") or {}
    out: list[str] = []

    def expand(name: str, seen: set[str]) -> None:
        if name in seen or name not in groups:
            return
        seen.add(name)
        for item in groups[name]:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and "include-group" in item:
                expand(str(item["include-group"]), seen)

    for name in test_names(set(groups)):
        expand(name, set())
    return list(dict.fromkeys(out))


def test_names(declared: set[str]) -> list[str]:
    """The test extras or groups among ``declared``; ``dev`` only when there is none of them."""
    names = [n for n in TEST_EXTRAS[:-1] if n in declared]
    return names or [n for n in TEST_EXTRAS[-1:] if n in declared]


def _poetry_requirement(name: str, constraint: Any) -> str | None:
    """A poetry dependency as a PEP 508 requirement (None for git, path and url sources)."""
    extras: list[str] = []
    marker = ""
    if isinstance(constraint, list):  # several constraints by marker: the first
        constraint = constraint[0] if constraint else "*"
    if isinstance(constraint, dict):
        if any(k in constraint for k in ("git", "path", "url", "file")):
            return None
        extras = [str(e) for e in constraint.get("extras", [])]
        if constraint.get("markers"):
            marker = f"; {constraint['markers']}"
        constraint = constraint.get("version", "*")
    spec = ",".join(_poetry_constraint(c) for c in str(constraint).split(","))
    spec = ",".join(c for c in spec.split(",") if c)
    extra = f"[{','.join(extras)}]" if extras else ""
    return f"{name}{extra}{spec}{marker}"


def _poetry_constraint(text: str) -> str:
    text = text.strip()
    if text in ("", "*"):
        return ""
    if text[0] in "^~" and not text.startswith("~="):
        caret = text[0] == "^"
        parts = [int(p) for p in re.findall(r"\d+", text)[:3]] or [0]
        if caret:  # the first non-zero part may not change
            bump = next((i for i, p in enumerate(parts) if p), len(parts) - 1)
        else:  # ~1.2.3 and ~1.2: the minor may not change; ~1: the major
            bump = min(1, len(parts) - 1)
        upper = [*parts[:bump], parts[bump] + 1]
        return f">={text[1:].strip()},<{'.'.join(map(str, upper))}"
    if re.match(r"^\d", text):
        return f"=={text}"
    return text


def poetry_groups(pyproject: dict[str, Any]) -> list[str]:
    """The test groups of ``[tool.poetry.group.*]`` (or the old ``dev-dependencies``)."""
    poetry = pyproject.get("tool", {}).get("poetry", {})
    groups = {n: g.get("dependencies", {}) for n, g in poetry.get("group", {}).items()}
    if "dev-dependencies" in poetry:
        groups.setdefault("dev", poetry["dev-dependencies"])
    out = []
    for name in test_names(set(groups)):
        for package, constraint in groups[name].items():
            if package.lower() != "python":
                requirement = _poetry_requirement(package, constraint)
                if requirement:
                    out.append(requirement)
    return out


def lock_constraints(files: Mapping[str, bytes]) -> bytes:
    """``name==version`` of each index package ``uv.lock`` or ``poetry.lock`` pins (the test
    tools at the versions the project's own CI uses); a package locked at several versions (by
    marker) and packages from git, paths or the project itself are left out."""
    for lock in ("uv.lock", "poetry.lock"):
        if lock in files:
            break
    else:
        return b""
    try:
        packages = tomllib.loads(files[lock].decode(errors="replace")).get("package", [])
    except tomllib.TOMLDecodeError:
        return b""
    versions: dict[str, set[str]] = {}
    for package in packages:
        source = package.get("source") or {}
        from_index = (
            "registry" in source
            if lock == "uv.lock"
            else source.get("type")
            in (
                None,
                "legacy",
            )
        )
        if from_index and package.get("name") and package.get("version"):
            versions.setdefault(canonical_name(package["name"]), set()).add(str(package["version"]))
    lines = [f"{n}=={v.pop()}" for n, v in sorted(versions.items()) if len(v) == 1]
    return "".join(f"{line}\n" for line in lines).encode()


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extras_declared(
    files: Mapping[str, bytes], pyproject: dict[str, Any], candidates: Iterable[str] = ()
) -> set[str]:
    """The extras the project declares (setup.py: those of the test names and ``candidates``
    it names in its ``extras_require``, read as text)."""
    declared: set[str] = set(pyproject.get("project", {}).get("optional-dependencies", {}))
    declared |= set(pyproject.get("tool", {}).get("poetry", {}).get("extras", {}))
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_section("options.extras_require"):
                declared |= set(parser.options("options.extras_require"))
        except configparser.Error:
            pass
    setup_py = files.get("setup.py", b"").decode(errors="replace")
    if "extras_require" in setup_py:
        for extra in {*TEST_EXTRAS, *candidates}:
            name = re.escape(extra)
            if re.search(rf"""["']{name}["']\s*:|\b{name}\s*=\s*[\[(]""", setup_py):
                declared.add(extra)
    return declared


def read_requires_python(files: Mapping[str, bytes], pyproject: dict[str, Any]) -> str | None:
    value = pyproject.get("project", {}).get("requires-python")
    if isinstance(value, str):
        return value
    if "setup.cfg" in files:
        parser = configparser.ConfigParser()
        try:
            parser.read_string(files["setup.cfg"].decode(errors="replace"))
            if parser.has_option("options", "python_requires"):
                return parser.get("options", "python_requires").strip()
        except configparser.Error:
            pass
    match = re.search(
        r"""python_requires\s*=\s*["']([^"']+)["']""",
        files.get("setup.py", b"").decode(errors="replace"),
    )
    return match.group(1) if match else None


def names_project(requirement: str, name: str) -> bool:
    match = re.match(r"^\s*([A-Za-z0-9._-]+)", requirement)
    return match is not None and canonical_name(match.group(1)) == name
