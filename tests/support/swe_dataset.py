"""A small SWE-bench-format dataset the tests make themselves.

``make_dataset(root)`` writes a real git repository ``acme/textkit`` with history, a bare mirror
of it at ``root/repos/acme__textkit`` (the ``--repos-dir`` layout) and two SWE-bench records:

- ``acme__textkit-1``: ``slugify`` keeps capitals (base: the commit that added it);
- ``acme__textkit-2``: ``count_words`` counts empty strings between double spaces (base: a
  later commit).

Each record has ``patch`` (gold), ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``,
``version``, ``environment_setup_commit`` (the first commit, shared, so one wheelhouse serves
both) and the pgs extension fields for a repository swebench does not know (``python``,
``install``, ``test_cmd``, ``log_parser``). Commit dates and authors are fixed, so the commits,
and therefore the instance images, are the same in every run: warm runs build nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = "acme/textkit"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "pgs",
    "GIT_AUTHOR_EMAIL": "pgs@example.com",
    "GIT_COMMITTER_NAME": "pgs",
    "GIT_COMMITTER_EMAIL": "pgs@example.com",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}

#: The ids of the dataset's two instances.
I1, I2 = "acme__textkit-1", "acme__textkit-2"
SETUP_PY = (
    "from setuptools import setup\n\nsetup(name='textkit', version='0.1', packages=['textkit'])\n"
)
CORE_V1 = '''"""Text helpers."""


def shout(text):
    return text.upper() + "!"
'''
TESTS_V1 = """from textkit.core import shout


def test_shout():
    assert shout("hi") == "HI!"
"""
SLUGIFY_BUGGY = '''

def slugify(text):
    """Lower-case words joined by dashes."""
    return "-".join(text.split())
'''
SLUGIFY_FIXED = '''

def slugify(text):
    """Lower-case words joined by dashes."""
    return "-".join(text.lower().split())
'''
SLUGIFY_TESTS = """

def test_slugify_spaces():
    from textkit.core import slugify

    assert slugify("a b  c") == "a-b-c"
"""
SLUGIFY_HIDDEN = """

def test_slugify_lowercases():
    from textkit.core import slugify

    assert slugify("Hello World") == "hello-world"
"""
COUNT_BUGGY = '''

def count_words(text):
    """The number of words in ``text``."""
    return len(text.split(" "))
'''
COUNT_FIXED = '''

def count_words(text):
    """The number of words in ``text``."""
    return len(text.split())
'''
COUNT_TESTS = """

def test_count_words_simple():
    from textkit.core import count_words

    assert count_words("one two") == 2
"""
COUNT_HIDDEN = """

def test_count_words_double_space():
    from textkit.core import count_words

    assert count_words("one  two") == 2
"""

#: The Python the instances ask for: the base image the suite already has.
PYTHON = "3.9"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=ENV, check=True, capture_output=True, text=True
    ).stdout


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@dataclass
class Dataset:
    root: Path
    source: Path
    repos_dir: Path
    instances_file: Path
    records: list[dict[str, Any]]

    def record(self, instance_id: str) -> dict[str, Any]:
        return next(r for r in self.records if r["instance_id"] == instance_id)

    def write_preds(self, path: Path, patches: dict[str, str | None], model: str = "m") -> Path:
        preds = {
            iid: {"instance_id": iid, "model_name_or_path": model, "model_patch": patch}
            for iid, patch in patches.items()
        }
        path.write_text(json.dumps(preds, indent=1))
        return path


def _fix(repo: Path, base: str, code: dict[str, str], tests: dict[str, str]) -> tuple[str, str]:
    """(gold patch, test patch) of a fix on top of ``base``, made on a branch then dropped."""
    git(repo, "checkout", "-q", "-b", "fix", base)
    fixed = _commit(repo, code, "fix")
    tested = _commit(repo, tests, "tests")
    patch = git(repo, "diff", base, fixed)
    test_patch = git(repo, "diff", fixed, tested)
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "fix")
    return patch, test_patch


def make_dataset(root: Path) -> Dataset:
    source = root / "textkit"
    source.mkdir(parents=True)
    git(source, "init", "-q", "-b", "main")
    env_commit = _commit(
        source,
        {
            "setup.py": SETUP_PY,
            "textkit/__init__.py": "",
            "textkit/core.py": CORE_V1,
            "tests/test_core.py": TESTS_V1,
        },
        "textkit 0.1",
    )
    base1 = _commit(
        source,
        {
            "textkit/core.py": CORE_V1 + SLUGIFY_BUGGY,
            "tests/test_core.py": TESTS_V1 + SLUGIFY_TESTS,
        },
        "slugify",
    )
    patch1, test_patch1 = _fix(
        source,
        base1,
        {"textkit/core.py": CORE_V1 + SLUGIFY_FIXED},
        {"tests/test_core.py": TESTS_V1 + SLUGIFY_TESTS + SLUGIFY_HIDDEN},
    )
    base2 = _commit(
        source,
        {
            "textkit/core.py": CORE_V1 + SLUGIFY_BUGGY + COUNT_BUGGY,
            "tests/test_core.py": TESTS_V1 + SLUGIFY_TESTS + COUNT_TESTS,
        },
        "count_words",
    )
    patch2, test_patch2 = _fix(
        source,
        base2,
        {"textkit/core.py": CORE_V1 + SLUGIFY_BUGGY + COUNT_FIXED},
        {"tests/test_core.py": TESTS_V1 + SLUGIFY_TESTS + COUNT_TESTS + COUNT_HIDDEN},
    )
    repos_dir = root / "repos"
    repos_dir.mkdir()
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(source), str(repos_dir / "acme__textkit")],
        check=True,
        capture_output=True,
    )
    common = {
        "repo": REPO,
        "version": "0.1",
        "environment_setup_commit": env_commit,
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "python": PYTHON,
        "install": "python3 -m pip install -e .",
        "test_cmd": "python3 -m pytest -rA -p no:cacheprovider",
        "log_parser": "pytest",
    }
    records = [
        {
            **common,
            "instance_id": "acme__textkit-1",
            "base_commit": base1,
            "problem_statement": "slugify keeps capitals\n\n`slugify('Hello World')` returns "
            "'Hello-World'; its docstring promises lower-case words: 'hello-world'.",
            "patch": patch1,
            "test_patch": test_patch1,
            "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_slugify_lowercases"]),
            "PASS_TO_PASS": json.dumps(
                ["tests/test_core.py::test_shout", "tests/test_core.py::test_slugify_spaces"]
            ),
        },
        {
            **common,
            "instance_id": "acme__textkit-2",
            "base_commit": base2,
            "problem_statement": "count_words counts double spaces as words\n\n"
            "`count_words('one  two')` returns 3, not 2.",
            "patch": patch2,
            "test_patch": test_patch2,
            "FAIL_TO_PASS": ["tests/test_core.py::test_count_words_double_space"],
            "PASS_TO_PASS": [
                "tests/test_core.py::test_shout",
                "tests/test_core.py::test_slugify_spaces",
                "tests/test_core.py::test_count_words_simple",
            ],
        },
    ]
    instances_file = root / "instances.json"
    instances_file.write_text(json.dumps(records, indent=1))
    return Dataset(root, source, repos_dir, instances_file, records)


#: What the scripted model does for each instance: the gold fix as one str_replace.
FIXES = {
    "slugify keeps capitals": (
        '"-".join(text.split())',
        '"-".join(text.lower().split())',
    ),
    "count_words counts double spaces": (
        'len(text.split(" "))',
        "len(text.split())",
    ),
}


def fixing_policy(request: dict[str, Any]) -> dict[str, Any]:
    """A scripted model that fixes either instance: one edit, then submit."""
    messages = request["messages"]
    issue = next(m["content"] for m in messages if m["role"] == "user")
    issue = issue if isinstance(issue, str) else json.dumps(issue)
    replies = sum(1 for m in messages if m["role"] == "assistant")
    if replies == 0:
        old, new = next(fix for key, fix in FIXES.items() if key in issue)
        return {
            "content": "Fix it.",
            "tool_calls": [
                {
                    "name": "str_replace_editor",
                    "arguments": {
                        "command": "str_replace",
                        "path": "/testbed/textkit/core.py",
                        "old_str": old,
                        "new_str": new,
                    },
                }
            ],
        }
    return {"content": "Done.", "tool_calls": [{"name": "submit", "arguments": {}}]}


#: The retries of every test batch: fast, so a scripted error costs milliseconds.
FAST_RETRIES = '{"attempts": 2, "min_wait": 0.01, "max_wait": 0.05}'


def batch_args(
    dataset: Dataset,
    url: str,
    out: Path,
    *extra: str,
    instances: Path | None = None,
    feedback: str | None = "none",
    price: float = 1.0,
    model: str = "scripted",
) -> list[str]:
    """``pgs batch`` over ``dataset`` with the scripted model at ``url`` (``feedback`` None:
    the default mode); ``extra`` flags go last."""
    return [
        "batch",
        "--instances",
        str(instances or dataset.instances_file),
        "--repos-dir",
        str(dataset.repos_dir),
        "--output-dir",
        str(out),
        "--model",
        model,
        "--base-url",
        url,
        "--model.prices",
        json.dumps({model: [price, price]}),
        "--model.retries",
        FAST_RETRIES,
        *(["--feedback", feedback] if feedback else []),
        *extra,
    ]


def eval_summary(predictions: Path, instances: Path, out: Path, *extra: str) -> dict[str, Any]:
    """``pgs eval`` (run id ``t``, reports in ``out/report``); the summary report it wrote."""
    from agent.cli import main

    argv = ["eval", "--predictions", str(predictions), "--instances", str(instances), *extra]
    code = main([*argv, "--report-dir", str(out / "report"), "--run-id", "t"])
    assert code == 0
    summary: dict[str, Any] = json.loads((out / "report" / "m.t.json").read_text())
    return summary
