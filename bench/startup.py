"""Start-up time of ``pgs``: ``import agent.cli`` and ``pgs --help``, with the heavy libraries
imported on first use (as shipped) and imported eagerly before it (as before), side by side.

    .venv/bin/python bench/startup.py [--runs 7]

Each measurement is a fresh process of this interpreter (imports are cached per process), the
two kinds alternating so that a load change on the machine hits both; the median of ``--runs``
is printed per kind, with the libraries each kind left loaded (the shipped kind must load none
of :data:`LAZY`). Last line: startup_ratio=<eager median / lazy median>.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The libraries `pgs --help` no longer imports: the model client, the GitHub client's HTTP
#: library, gitpython.
LAZY = ("openai", "requests", "git")

#: One start-up: optionally the libraries first, then the CLI's import and `--help`; prints
#: the seconds it took and which of LAZY ended up loaded.
PROGRAM = """\
import contextlib, importlib, io, json, sys, time
started = time.perf_counter()
for name in {eager!r}:
    importlib.import_module(name)
import agent.cli
with contextlib.redirect_stdout(io.StringIO()):
    code = agent.cli.main(["--help"])
took = time.perf_counter() - started
assert code == 0, code
print(json.dumps({{"seconds": took, "loaded": [m for m in {lazy!r} if m in sys.modules]}}))
"""


def start_once(eager: tuple[str, ...]) -> tuple[float, list[str]]:
    program = PROGRAM.format(eager=eager, lazy=LAZY)
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.splitlines()[-1])
    return float(result["seconds"]), list(result["loaded"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    start_once(())  # warm the file cache and the bytecode of both kinds
    start_once(LAZY)
    times: dict[str, list[float]] = {"lazy": [], "eager": []}
    loaded: dict[str, list[str]] = {}
    for _ in range(args.runs):
        for kind, eager in (("lazy", ()), ("eager", LAZY)):
            seconds, loaded[kind] = start_once(eager)
            times[kind].append(seconds)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    for kind, values in times.items():
        print(
            f"{kind:5}  median {medians[kind] * 1000:6.0f} ms  "
            f"min {min(values) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms  "
            f"loaded: {', '.join(loaded[kind]) or 'none'}"
        )
    print(f"startup_ratio={medians['eager'] / medians['lazy']:.2f}")


if __name__ == "__main__":
    main()
