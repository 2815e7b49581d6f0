"""``pgs inspect PATH [-o OUT] [--serve [--port N]] [--open] [--eval REPORT]``.

PATH is a ``.traj`` file, a run folder or a batch folder (:func:`agent.inspect.load.load`).
Written, by default beside PATH:

- a trajectory: ``<id>.html`` next to ``<id>.traj`` (``-o FILE.html``, or ``-o DIR``);
- a batch: ``<batch>/inspect/index.html`` and one ``<id>.html`` per instance (``-o DIR``).

Full texts of cut outputs go to ``<page>.files/`` beside each page. ``--serve`` serves the
folder on 127.0.0.1 (``--port 0``, the default: a free port) and prints the URL until Ctrl-C;
``--open`` opens the page in a web browser where there is one (a note otherwise, never an
error). A PATH that cannot be inspected is one ``pgs: error:`` line and exit code 2.

``--tui`` writes nothing: it browses PATH in the terminal (:mod:`agent.inspect.tui`).

A ``pgs select`` output (its folder, its ``selection.json`` or one ``instances/<id>.json``) is
printed as text (:func:`agent.inspect.tui_select_text.selection_text`): every instance, or the one
``--instance ID`` names; ``-o``, ``--serve`` or ``--open`` write it as a page instead
(``selection.html`` beside ``selection.json`` by default).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import webbrowser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rich.console import Console

from agent.errors import USER_ERROR, print_error
from agent.inspect.html import Written, page_name, write_batch, write_selection, write_trajectory
from agent.inspect.load import InspectError, load_trajectory, resolve
from agent.inspect.model import TrajectoryView
from agent.inspect.selection_view import find_selection, load_selection
from agent.inspect.tui_select_text import selection_text

err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``inspect`` to a CLI's subparsers; its handler is in ``func``, returns exit code."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "inspect",
        help="see a run in the browser: steps, diffs, the Tester's properties and rounds",
        description="Write a self-contained HTML page (no network, no server needed) of a "
        "trajectory, a run folder or a batch folder: the issue, every step (long output "
        "folded, searchable), tokens per step, the final diff, the exit status and limits, and "
        "the PGS panel (properties kept and dropped with their reasons, every round's "
        "candidate, failures, the chosen counterexample and why, the feedback sent, the "
        "verdict). A batch gets a sortable table of its instances with a page for each. Reads "
        "SWE-agent's .traj files too. A pgs select output folder (selection.json) is printed: "
        "each instance's candidates, their rank, sources and evidence, the choice and why, "
        "their patches and the change from the chosen one (-o writes it as a page).",
        epilog="examples: pgs inspect trajectories/demo/stats__issue --open; "
        "pgs inspect runs/v1 --serve",
    )
    parser.add_argument(
        "path",
        type=Path,
        metavar="PATH",
        help="a .traj file, a run folder (<id>/<id>.traj), a batch folder (preds.json), or "
        "a pgs select output (its folder, selection.json or instances/<id>.json)",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="where to write: a trajectory's .html file (or a folder for it), a batch's folder "
        "(default: <id>.html beside the .traj; <batch>/inspect/ for a batch); a pgs select "
        "output's page (default: selection.html beside selection.json)",
    )
    parser.add_argument(
        "--eval",
        type=Path,
        metavar="REPORT",
        help="a `pgs eval` summary (<model>.<run_id>.json) or its --report-dir, when it is not "
        "inside the batch folder (there it is found by itself)",
    )
    parser.add_argument(
        "--instance",
        metavar="ID",
        help="with a pgs select output: show this instance only (a batch's instance: pass its "
        "run folder, <batch>/<id>)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="serve the page on 127.0.0.1 until Ctrl-C"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="the port for --serve (default 0: a free one)"
    )
    parser.add_argument(
        "--open", action="store_true", help="open the page in a web browser, if there is one"
    )
    parser.add_argument(
        "--tui",
        action="store_true",
        help="browse PATH in this terminal instead of writing a page (j/k: steps, n/p: "
        "instances, tab: panels, /: filter steps, escape: back, q: quit)",
    )
    parser.set_defaults(func=cmd_inspect)
    return parser


def cmd_inspect(args: argparse.Namespace) -> int:
    selection = find_selection(args.path)
    if selection is not None:
        return cmd_selection(args, selection)
    if args.instance is not None:
        print_error(
            f"--instance goes with a pgs select output (selection.json); {args.path} is not "
            "one (an instance of a batch: pass its run folder, <batch>/<id>)"
        )
        return USER_ERROR
    if args.tui:
        return cmd_tui(args)
    try:
        written = write(args.path, args.output, eval_report=args.eval)
    except InspectError as e:
        print_error(str(e))
        return USER_ERROR
    return _after_writing(args, written)


def cmd_selection(args: argparse.Namespace, path: Path) -> int:
    """A ``pgs select`` output: printed, or written as a page with -o, --serve or --open."""
    try:
        if args.eval is not None:
            raise InspectError(
                "--eval goes with a batch folder; grade a selection with pgs eval "
                "--predictions <output>/preds.json"
            )
        view = load_selection(path, args.instance)
        if not (args.output or args.serve or args.open):
            Console(highlight=False, soft_wrap=True).print(selection_text(view))
            return 0
        if args.tui:
            raise InspectError(
                "--tui shows PATH in this terminal: leave out -o, --serve and --open"
            )
        out = args.output
        default = page_name(f"selection-{args.instance}" if args.instance else "selection")
        if out is None:
            out = (
                path.with_name(default)
                if path.name == "selection.json"
                else path.with_suffix(".html")
            )
        elif out.is_dir() or out.suffix.lower() not in (".html", ".htm"):
            out = out / default
        try:
            written = write_selection(view, out)
        except OSError as e:
            raise InspectError(
                f"cannot write {e.filename or out}: {e.strerror or e}; choose another -o"
            ) from None
    except InspectError as e:
        print_error(str(e))
        return USER_ERROR
    return _after_writing(args, written)


def _after_writing(args: argparse.Namespace, written: Written) -> int:
    print(f"wrote {written.path} ({describe(written)})", flush=True)
    if args.serve:
        try:
            return serve(written.path, args.port, open_browser=args.open)
        except InspectError as e:
            print_error(str(e))
            return USER_ERROR
    if args.open:
        open_in_browser(written.path.resolve().as_uri())
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from agent.inspect.tui import run_tui  # Textual loads only for the terminal view

    try:
        if args.output or args.serve or args.open:
            raise InspectError(
                "--tui shows PATH in this terminal: leave out -o, --serve and --open"
            )
        return run_tui(args.path, eval_report=args.eval)
    except InspectError as e:
        print_error(str(e))
        return USER_ERROR


def write(path: Path, output: Path | None, *, eval_report: Path | None = None) -> Written:
    """Write the page(s) of PATH; returns the page to open (a batch's index)."""
    target = resolve(path)
    try:
        if target.is_dir():
            if output is not None and output.suffix.lower() in (".html", ".htm"):
                raise InspectError(f"{target} is a batch: -o names a folder, not a page")
            written, _ = write_batch(target, output or target / "inspect", eval_report=eval_report)
            return written
        if eval_report is not None:
            raise InspectError("--eval goes with a batch folder, not with one trajectory")
        traj = load_trajectory(target)
        return write_trajectory(traj, _page_path(traj, output))
    except OSError as e:
        where = e.filename or output or path
        raise InspectError(f"cannot write {where}: {e.strerror or e}; choose another -o") from None


def _page_path(traj: TrajectoryView, output: Path | None) -> Path:
    source = traj.path or Path(f"{traj.instance_id}.traj")
    if output is None:
        return source.with_suffix(".html")
    if output.is_dir() or output.suffix.lower() not in (".html", ".htm"):
        return output / f"{source.stem}.html"
    return output


def describe(written: Written) -> str:
    parts = [_size(written.size)]
    if written.pages:
        size = sum(p.size for p in written.pages)
        parts.append(f"{len(written.pages)} instance pages, {_size(size)}")
    sidecars = written.sidecars + sum(p.sidecars for p in written.pages)
    if sidecars:
        parts.append(f"full texts of {sidecars} cut outputs in *.files/")
    return "; ".join(parts)


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} KB"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(page: Path, port: int, *, open_browser: bool = False) -> int:
    """Serve the page's folder on 127.0.0.1 until Ctrl-C (or SIGTERM)."""
    handler = functools.partial(_QuietHandler, directory=str(page.parent))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as e:
        raise InspectError(
            f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}; pick another --port "
            "(0: a free one)"
        ) from None
    url = f"http://127.0.0.1:{server.server_port}/{quote(page.name)}"
    print(f"serving {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        open_in_browser(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        err.print("stopped")
    finally:
        server.server_close()
    return 0


def open_in_browser(url: str) -> bool:
    """Open ``url`` in a web browser; a note, not an error, where there is none."""
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        err.print(f"no web browser found here; open {url} yourself (or use --serve)")
    return opened
