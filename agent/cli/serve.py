"""`pgs serve-script`: serve a script, policy or `.traj` as an OpenAI-compatible model.

The server itself is `agent.models.script_server.ScriptedServer`; this module is only its command.
"""

from __future__ import annotations

import argparse
from typing import Any

from agent.models import script_server

__all__ = ["register", "serve_script_command"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `serve-script` to a CLI's subparsers; its handler is in `func`, returns exit code."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve-script",
        help="serve a script, policy or .traj as an OpenAI-compatible model",
        description=(script_server.__doc__ or "").split("\n\n")[0],
    )
    script_server.add_arguments(parser)
    parser.set_defaults(func=serve_script_command)
    return parser


def serve_script_command(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; a malformed script is one line on stderr and exit code 2."""
    return script_server.serve(args.script, host=args.host, port=args.port, model=args.model)
