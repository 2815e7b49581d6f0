"""Every benchmark script starts: ``python bench/NAME.py --help`` exits 0 with its usage, and its
quick run (``--quick``) completes and ends with its figure, a ``name=value`` line (the figures
themselves are not tested: a quick run's mean nothing). Run as a script, a bench file's folder
comes first on ``sys.path``, so a bench named like a standard module (``bench/select.py`` once)
breaks every import of that module, in every bench."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted((ROOT / "bench").glob("*.py"))


def test_no_bench_is_named_like_a_standard_module() -> None:
    stdlib = set(sys.stdlib_module_names)
    assert BENCHES
    assert not [p.name for p in BENCHES if p.stem in stdlib]


@pytest.mark.parametrize("bench", BENCHES, ids=[p.stem for p in BENCHES])
def test_the_bench_starts_and_prints_its_usage(bench: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(bench), "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout


#: The arguments of each bench's quick run; a bench that needs Docker runs in the Docker stage.
#: The data benches (--repos-dir) find no fetched repositories here and say they skipped.
QUICK = {
    "agreement": ["--quick"],
    "buildnet": ["--quick"],
    "check": ["--quick"],
    "eval": ["--quick"],
    "feedback": ["--quick"],  # its own measure: with --strategies it is bench/strategies.py
    "inspector": ["--quick"],
    "loop": ["--quick"],
    "refusal": ["--quick"],
    "replay": ["--quick"],
    "repos": ["--quick"],
    "sandbox": ["--quick"],
    "scale": ["--quick"],
    "selection": ["--quick"],
    "startup": ["--quick"],
    "strategies": ["--quick"],
}
NEEDS_DOCKER = {"buildnet", "feedback", "loop", "sandbox", "scale"}
#: The last line of a bench: its figure, ``name=value``.
FIGURE = re.compile(r"^[a-z][a-z0-9_]*=\S+$")


def test_every_bench_has_a_quick_run() -> None:
    assert sorted(QUICK) == [p.stem for p in BENCHES]


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.docker] if n in NEEDS_DOCKER else []) for n in QUICK],
)
def test_the_quick_run_completes_and_ends_with_its_figure(name: str, request: Any) -> None:
    if name in NEEDS_DOCKER:
        request.getfixturevalue("base_image")  # fails in CI without Docker, builds it once
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / f"{name}.py"), *QUICK[name]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert FIGURE.match(last), done.stdout[-2000:]
