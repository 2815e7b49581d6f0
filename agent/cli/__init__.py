"""``pgs``: the command line, one module per command (``run``, ``demo``, ``batch``, ``eval``,
``report``, ``inspect``, ``replay``, ``serve-script``; ``env`` from :mod:`envs.cli`). Every user
mistake (:data:`agent.core.errors.USER_ERRORS`) is one ``pgs: error:`` line and exit code 2.

Ctrl-C, SIGTERM and SIGHUP all end a command the same way (:mod:`agent.cli.signals`): a
KeyboardInterrupt in the main thread, so the agent records ``interrupted`` in the ``.traj``,
sandboxes are closed as the stack unwinds, and ``pgs`` exits with
:data:`~agent.core.errors.INTERRUPTED` (130).

Nothing outside this package imports it: what commands share lives where it belongs
(:mod:`agent.core.errors`, :func:`agent.core.run.default_output_dir`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

from agent.cli import batch, demo, eval, inspect, replay, report, run, serve
from agent.cli.demo import EXAMPLES, make_example_repo
from agent.cli.signals import stop_signals
from agent.core.errors import INTERRUPTED, USER_ERRORS
from agent.core.secrets import RedactingFilter, Redactor
from envs.cli import USER_ERROR, print_error
from envs.cli import register as register_env

__all__ = ["EXAMPLES", "INTERRUPTED", "USER_ERRORS", "build_parser", "main", "make_example_repo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgs",
        description="pgs fixes issues in real repositories; each patch is checked in a sandbox.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    run.register(commands)
    demo.register(commands)
    register_env(commands)
    serve.register(commands)
    batch.register(commands)
    eval.register(commands)
    report.register(commands)
    inspect.register(commands)
    replay.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="pgs: %(levelname)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:  # log lines hold the host's secrets redacted
        handler.addFilter(RedactingFilter())
    received: list[signal.Signals] = []
    try:
        with stop_signals(received):
            code: int = args.func(args)
    except USER_ERRORS as e:
        print_error(Redactor.from_env().redact(str(e)))
        return USER_ERROR
    except KeyboardInterrupt:
        by = f" by {received[0].name}" if received and received[0] != signal.SIGINT else ""
        print_error(f"interrupted{by}")
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
