"""Every benchmark script starts: ``python bench/NAME.py --help`` exits 0 with its usage. Run as
a script, a bench file's folder comes first on ``sys.path``, so a bench named like a standard
module (``bench/select.py`` once) breaks every import of that module, in every bench."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
