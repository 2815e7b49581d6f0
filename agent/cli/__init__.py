"""``pgs``: the command line, one module per command (``run``, ``demo``, ``batch``, ``eval``,
``report``, ``ladder``, ``inspect``, ``replay``, ``serve-script``, ``github``, ``env``).
Every user mistake (:data:`agent.errors.USER_ERRORS`) is one ``pgs:
error:`` line and exit code 2; a failure of the machine
(:data:`agent.errors.INFRASTRUCTURE_ERRORS`: Docker, an image build, the disk) one line
and 3; a run the loop ended with an error (:class:`agent.errors.RunFailed`, its files
written) one line and 1 (2 when that error is a mistake in the command, such as a tool bundle
that fails to install; 3 when the check could not run at all,
:class:`agent.errors.CheckNotRun`). The codes are listed in :mod:`agent.errors`.

Ctrl-C, SIGTERM and SIGHUP all end a command the same way (:mod:`agent.cli.signals`): a
KeyboardInterrupt in the main thread, so the agent records ``interrupted`` in the ``.traj``,
sandboxes are closed as the stack unwinds, and ``pgs`` exits with
:data:`~agent.errors.INTERRUPTED` (130).

The parser of every command is :class:`agent.cli.flags.Parser`: a mistake in a flag is one line
and exit code 2 too, other tools' spellings are pointed to, ``--version`` and ``--env-file``
(``./.env`` by default, read before anything else) are taken by every command.

Nothing outside this package imports it: what commands share lives where it belongs
(:mod:`agent.errors`, :func:`agent.run.outputs.default_output_dir`).

Layer 1, the top: may import every other package; nothing imports it. Entry point:
:func:`main` (the ``pgs`` script, ``python -m agent.cli``).
"""

from __future__ import annotations

import argparse
import errno
import logging
import signal
import sys
from collections.abc import Sequence

from agent.cli import (
    batch,
    demo,
    env,
    eval,
    github,
    inspect,
    ladder,
    replay,
    report,
    run,
    select,
    serve,
)
from agent.cli.demo import EXAMPLES, make_example_repo
from agent.cli.flags import Parser, add_common_flags, load_env_files
from agent.cli.signals import stop_signals
from agent.core.secrets import Redactor
from agent.errors import (
    COMMAND_MISTAKES,
    INFRASTRUCTURE,
    INFRASTRUCTURE_ERRORS,
    INTERRUPTED,
    RUN_ENDED,
    USER_ERROR,
    USER_ERRORS,
    CheckNotRun,
    EnvFileError,
    Interrupted,
    OutputNotWritten,
    RunFailed,
)
from agent.errors import print_error as _print_error
from agent.run import runlog
from envs import scratch

#: Write failures that are the machine's, not a bug: one line and exit code 3.
FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})

__all__ = ["EXAMPLES", "INTERRUPTED", "USER_ERRORS", "build_parser", "main", "make_example_repo"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pgs",
        description="pgs fixes issues in real repositories; each patch is checked in a sandbox.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log pgs's debug details; -vv: the libraries' too (docker, HTTP, openai)",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    run.register(commands)
    demo.register(commands)
    env.register(commands)
    serve.register(commands)
    batch.register(commands)
    eval.register(commands)
    select.register(commands)
    report.register(commands)
    ladder.register(commands)
    inspect.register(commands)
    replay.register(commands)
    github.register(commands)
    add_common_flags(parser)
    return parser


def print_error(text: str) -> None:
    """One ``pgs: error:`` line, the host's secret values redacted."""
    _print_error(Redactor.from_env().redact(text))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # first: the file may hold what the command needs, and secrets to redact
        env_file, loaded = load_env_files(argv)
    except EnvFileError as e:
        print_error(str(e))
        return USER_ERROR
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or the one line of a mistake printed
        return e.code if isinstance(e.code, int) else USER_ERROR
    runlog.configure(args.verbose)  # pgs's own log lines; the libraries' stay at WARNING
    if env_file:
        logging.getLogger(__name__).debug("read %s: set %s", env_file, ", ".join(loaded) or "none")
    scratch.reap_at_startup()  # what killed pgs processes left in $TMPDIR and the cache
    received: list[signal.Signals] = []
    try:
        with stop_signals(received):
            code: int = args.func(args)
    except RunFailed as e:
        logging.getLogger(__name__).debug("the run failed", exc_info=e.__cause__)
        print_error(str(e))
        if isinstance(e.__cause__, CheckNotRun):  # no verdict: the check itself failed to run
            return INFRASTRUCTURE
        return USER_ERROR if isinstance(e.__cause__, COMMAND_MISTAKES) else RUN_ENDED
    except INFRASTRUCTURE_ERRORS as e:
        if isinstance(e, OutputNotWritten) and e.submission:  # the patch is not lost
            print(e.submission, end="" if e.submission.endswith("\n") else "\n")
        print_error(str(e))
        return INFRASTRUCTURE
    except USER_ERRORS as e:
        print_error(str(e))
        return USER_ERROR
    except OSError as e:
        if e.errno not in FULL_OR_READ_ONLY:
            raise
        # A write that failed outside a run's own results (a batch's preds.json, a report).
        print_error(f"cannot write {e.filename or 'a file'} ({e.strerror}): free some space")
        return INFRASTRUCTURE
    except KeyboardInterrupt as e:
        if isinstance(e, Interrupted):  # what the command kept, and where
            print(Redactor.from_env().redact(e.saved), file=sys.stderr)
        by = f" by {received[0].name}" if received and received[0] != signal.SIGINT else ""
        print_error(f"interrupted{by}")
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
