"""``pgs env``: build, list and remove the images and containers pgs uses.

``register(subparsers)`` adds the ``env`` command to the main ``pgs`` parser; each handler is
set as ``func`` and returns an exit code. :func:`user_errors` turns an :class:`EnvError` into
one ``pgs: error: ...`` line on stderr and exit code 2 (3 for the machine's failures:
:data:`envs.errors.INFRASTRUCTURE_ERRORS`). What the handlers call is :mod:`envs.images`'s;
the command line alone lives here.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envs import images
from envs.errors import INFRASTRUCTURE, INFRASTRUCTURE_ERRORS, USER_ERROR, EnvError, print_error

Handler = Callable[[argparse.Namespace], int]


def user_errors(handler: Handler) -> Handler:
    """Wrap a handler: an EnvError prints one error line (no traceback) and returns 2."""

    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except EnvError as e:
            print_error(str(e))
            return INFRASTRUCTURE if isinstance(e, INFRASTRUCTURE_ERRORS) else USER_ERROR
        except KeyboardInterrupt:
            print_error("interrupted")
            return 130

    return wrapped


@contextmanager
def progress(first: str) -> Iterator[images.Status]:
    """A spinner on stderr; yields a function that changes its text (an images.Status)."""
    from rich.console import Console

    console = Console(stderr=True, log_path=False)
    with console.status(first) as status:

        def update(text: str) -> None:
            console.log(text)
            status.update(text)

        yield update


def _base(args: argparse.Namespace) -> int:
    versions = args.python or list(images.SUPPORTED_PYTHONS)
    for version in [images.check_python(v) for v in versions]:
        with progress(f"base image for Python {version}") as status:
            started = time.monotonic()
            tag = images.ensure_base_image(
                version, method=args.method, mirror=args.mirror, rebuild=args.rebuild, status=status
            )
            print(f"{tag}  ({time.monotonic() - started:.1f} s)")
    return 0


#: Shared by `pgs env build` and `pgs run`.
NO_REPO_INSTALL_HELP = (
    "run no code of the repository while its image is built (setup.py, build backend, "
    ".pgs.yaml install): its dependencies from requirement files and pyproject.toml only, its "
    "source on the path unbuilt (no compiled extensions, no entry points)"
)
#: Shared by `pgs env build` and `pgs run`.
INDEX_DATE_HELP = (
    "resolve what the repository does not pin exactly against the package index as it was at "
    "the start of this day (YYYY-MM-DD, UTC), or `now` for today's; default: the day of the "
    "commit's committer date (.pgs.yaml image.index_date); exact pins are kept"
)


def _build(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {}
    if args.python:
        fields["python"] = args.python
    if args.pip:
        fields["pip_packages"] = args.pip
    if args.extras is not None:
        fields["extras"] = [e for e in args.extras.split(",") if e]
    if args.install:
        fields["install"] = args.install
    if args.no_repo_install:
        fields["run_install"] = False
    if args.index_date:
        fields["index_date"] = args.index_date
    spec = images.RepoImageSpec.checked(fields, source="pgs env build")
    with progress(f"image of {args.repo}") as status:
        built = images.build_repo_image(
            Path(args.repo), args.commit, spec, base_method=args.method, status=status
        )
    how = "cache hit" if built.cache_hit else "built"
    print(built.tag)
    print(
        f"{how} in {built.seconds:.1f} s: {Path(args.repo).resolve().name} at "
        f"{built.commit[:12]}, Python {built.python}, package index of {built.index_date}",
        file=sys.stderr,
    )
    return 0


def _ls(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    found = images.list_pgs()
    table = Table("image", "kind", "python", "size", "created", title="pgs images")
    for image in found.images:
        label = image.labels or {}
        table.add_row(
            ", ".join(image.tags) or image.short_id,
            label.get("pgs-agent.kind", ""),
            label.get("pgs-agent.python", ""),
            f"{image.attrs.get('Size', 0) / 1e6:.0f} MB",
            str(image.attrs.get("Created", ""))[:19],
        )
    containers = Table("container", "image", "status", "run", title="pgs containers")
    for container in found.containers:
        label = container.labels or {}
        image_tags = container.attrs.get("Config", {}).get("Image", "")
        containers.add_row(
            container.name, image_tags, container.status, label.get("pgs-agent.run", "")
        )
    console = Console()
    console.print(table)
    console.print(containers)
    return 0


def _prune(args: argparse.Namespace) -> int:
    if args.orphans:
        from envs.images.housekeeping import reap_orphans

        print(f"removed {reap_orphans()} orphan container(s)")
    else:
        containers, removed = images.prune(run_id=args.run)
        print(f"removed {containers} container(s) and {removed} image(s)")
    if args.cache:
        print(f"emptied the wheelhouse cache in {images.clear_cache()}")
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``env`` and its subcommands to ``subparsers`` (from ``parser.add_subparsers()``)."""
    env = subparsers.add_parser(
        "env", help="build, list and remove sandbox images", description=__doc__.splitlines()[0]
    )

    def usage(_: argparse.Namespace) -> int:
        print_error(f"pgs env needs a command: {', '.join(commands.choices)}")
        return USER_ERROR

    env.set_defaults(func=usage)
    commands = env.add_subparsers(title="commands", metavar="COMMAND")
    supported = ", ".join(images.SUPPORTED_PYTHONS)

    base = commands.add_parser("base", help="build the base images (once; reused)")
    base.add_argument(
        "--python",
        action="append",
        metavar="V",
        help=f"Python version ({supported}); repeat for several; default: all",
    )
    base.add_argument(
        "--method",
        choices=["debootstrap", "dockerfile"],
        default="debootstrap",
        help="debootstrap from a Debian mirror (needs root; no registry) or a Dockerfile "
        "FROM python:3.X-slim (needs a registry); default: debootstrap",
    )
    base.add_argument("--mirror", default=images.DEFAULT_MIRROR, help="Debian mirror URL")
    base.add_argument("--rebuild", action="store_true", help="build even if the image exists")
    base.set_defaults(func=user_errors(_base))

    build = commands.add_parser("build", help="build the image of a repository at a commit")
    build.add_argument("repo", metavar="REPO", help="path of a local git repository")
    build.add_argument("--commit", default="HEAD", help="commit, branch or tag; default: HEAD")
    build.add_argument("--python", metavar="V", help=f"Python version ({supported})")
    build.add_argument(
        "--pip", action="append", metavar="PKG", help="extra requirement; repeat for several"
    )
    build.add_argument(
        "--extras", metavar="A,B", help="the project's extras to install (default: test/dev ones)"
    )
    build.add_argument(
        "--install",
        action="append",
        metavar="CMD",
        help="shell command run in /repo (package indexes in reach, nothing else) instead of the "
        "detected install of the project; repeatable; use it when detection fails",
    )
    build.add_argument(
        "--no-repo-install",
        action="store_true",
        help=NO_REPO_INSTALL_HELP,
    )
    build.add_argument("--index-date", metavar="YYYY-MM-DD|now", help=INDEX_DATE_HELP)
    build.add_argument(
        "--method",
        choices=["debootstrap", "dockerfile"],
        default="debootstrap",
        help="how to build the base image if it is missing",
    )
    build.set_defaults(func=user_errors(_build))

    ls = commands.add_parser("ls", help="list pgs images and containers")
    ls.set_defaults(func=user_errors(_ls))

    prune = commands.add_parser(
        "prune",
        help="remove every container and image labelled pgs-agent=1, live runs' included",
        description="Remove every container and image labelled pgs-agent=1, including the "
        "containers of runs still going, which then fail. --orphans removes only the containers "
        "whose pgs process has ended, which is safe while other runs go on.",
    )
    which = prune.add_mutually_exclusive_group()
    which.add_argument("--run", metavar="ID", help="only the containers and images of one run")
    which.add_argument(
        "--orphans",
        action="store_true",
        help="only containers whose pgs process on this host has ended (no image); live "
        "runs' containers are kept",
    )
    prune.add_argument(
        "--cache", action="store_true", help="also delete the cached wheelhouses (~/.cache/pgs)"
    )
    prune.set_defaults(func=user_errors(_prune))
    return env
