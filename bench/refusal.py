"""Checking a tool call's command for programs that need a terminal, by its size: the linear
splitter pgs uses (``agent.core.parsing.shell_words``) next to ``shlex``, which it replaced
(each token grown one character at a time: quadratic in the length of a word).

    .venv/bin/python bench/refusal.py [--sizes 100000,200000,400000,1000000]

Per size, the seconds of ``interactive_refusal`` on ``echo '<n characters>' | less``, then the
same split with shlex. Last line: shlex_over_linear_at_<largest size>=<ratio>.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.core.parsing import interactive_refusal, shell_words


def shlex_words(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    return list(lexer)


def seconds(function: object, text: str) -> float:
    assert callable(function)
    started = time.perf_counter()
    function(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,200000,400000,1000000")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes = "1000,2000"
    ratio = 0.0
    size = 0
    for size in (int(s) for s in args.sizes.split(",")):
        command = f"echo '{'x' * size}' | less"
        linear = seconds(interactive_refusal, command)
        split = seconds(shell_words, command)
        old = seconds(shlex_words, command)
        ratio = old / split
        print(
            f"{size:>9} chars: interactive_refusal {linear:.3f} s | split {split:.4f} s, "
            f"shlex {old:.3f} s ({ratio:.0f}x)"
        )
    print(f"shlex_over_linear_at_{size}={ratio:.1f}")


if __name__ == "__main__":
    main()
