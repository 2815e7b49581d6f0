"""The git side of images: commits, the files detection reads, and the repository as it goes
into an image (its history up to the commit, no later commit, the tags version tools need)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envs.errors import EnvError, NotAGitRepository
from envs.images.build import raise_build_error

#: Files detection reads (see :mod:`envs.images.detect`).
DEPENDENCY_FILES = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "uv.lock",
    "poetry.lock",
    "noxfile.py",
)


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if check and done.returncode != 0:
        raise EnvError(
            f"git {' '.join(args)} failed in {repo}: {done.stderr.decode(errors='replace').strip()}"
        )
    return done


def resolve_commit(repo: Path, commit: str = "HEAD") -> str:
    """The full sha of ``commit`` in the repository at ``repo`` (its top folder)."""
    repo = Path(repo).resolve()
    if not repo.is_dir():
        raise NotAGitRepository(f"{repo} does not exist or is not a folder: give a repository")
    top = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0 or Path(top.stdout.decode().strip()).resolve() != repo:
        raise NotAGitRepository(
            f"{repo} is not the top folder of a git repository: run `git init` and commit there, "
            "or give the folder that holds .git"
        )
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", check=False)
    if done.returncode != 0:
        raise NotAGitRepository(
            f"{commit!r} is not a commit of {repo}: give a commit sha, branch or tag that "
            "`git log` there shows (a repository without commits needs one first)"
        )
    return done.stdout.decode().strip()


def commit_day(repo: Path, sha: str) -> str:
    """The UTC day (YYYY-MM-DD) of the commit's committer date."""
    import datetime

    stamp = _git(repo, "show", "-s", "--format=%ct", sha).stdout.decode().strip()
    try:
        return datetime.datetime.fromtimestamp(int(stamp), datetime.UTC).date().isoformat()
    except (ValueError, OverflowError, OSError):  # a date git wrote but Python cannot read
        raise EnvError(
            f"the committer date of {sha[:12]} ({stamp!r}) is not a day pgs can read: "
            "give the package index's day with --index-date YYYY-MM-DD (or `now`)"
        ) from None


def is_dependency_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    if path in DEPENDENCY_FILES:
        return True
    if path.startswith(".github/workflows/") and path.count("/") == 2:  # CI install lines
        return name.endswith((".yml", ".yaml"))
    if "doc" in name or not name.endswith((".txt", ".in")):
        return False
    if name.endswith(".in") and "requirements" not in path.lower():
        return False
    if "/" not in path:
        return name.startswith("requirements") or name.endswith(
            ("-requirements.txt", "_requirements.txt")
        )
    folder = path.rsplit("/", 1)[0]
    return folder in ("requirements", "requirements/test", "ci/requirements", "test-requirements")


def dependency_files(repo: Path, sha: str) -> dict[str, bytes]:
    """Path -> contents of every file detection reads, at ``sha``."""
    from envs.images.metadata import included_files

    listing = _git(repo, "ls-tree", "-r", "-z", "--name-only", sha).stdout.decode()
    tracked = {p for p in listing.split("\0") if p}
    todo = sorted(p for p in tracked if is_dependency_file(p))
    files: dict[str, bytes] = {}
    while todo:  # with the files requirement files include (`-r ../docs/requirements.txt`)
        path = todo.pop(0)
        if path in files:
            continue
        files[path] = _git(repo, "show", f"{sha}:{path}").stdout
        if path.endswith((".txt", ".in")):
            todo += [p for _, p in included_files(path, files[path]) if p in tracked]
    return files


def show(repo: Path, sha: str, path: str) -> bytes | None:
    """The contents of ``path`` at ``sha``, or None when it is not there."""
    done = _git(repo, "show", f"{sha}:{path}", check=False)
    return done.stdout if done.returncode == 0 else None


def has_commit(repo: Path, sha: str) -> bool:
    return _git(repo, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def history_clone(repo: Path, sha: str, dest: Path) -> None:
    """A clone of ``repo`` at ``sha`` in ``dest`` for an image: HEAD is ``sha``, detached and
    clean; its history reaches back to the nearest tag (so ``git describe``, setuptools-scm and
    versioneer give the versions they give in a full clone) and holds no later commit."""
    nearest = _git(repo, "describe", "--tags", "--abbrev=0", sha, check=False)
    tag = nearest.stdout.decode().strip() if nearest.returncode == 0 else ""
    dest.mkdir(parents=True)
    fetch = [
        "fetch",
        "-q",
        "--no-tags",
        "--upload-pack",
        "git -c uploadpack.allowAnySHA1InWant=true upload-pack",
        f"file://{Path(repo).resolve()}",
    ]
    if tag:
        # Every commit between the tag and sha, and the tag's own, is at least this recent.
        times = _git(repo, "log", "--format=%ct", sha, f"^{tag}^{{commit}}").stdout.split()
        times += _git(repo, "log", "-1", "--format=%ct", f"{tag}^{{commit}}").stdout.split()
        depth = [f"--shallow-since={min(int(t) for t in times) - 1}"]
        refs = [sha, f"refs/tags/{tag}:refs/tags/{tag}"]
    else:
        depth, refs = ["--depth", "1"], [sha]
    steps = [
        ["init", "-q"],
        [*fetch, *depth, *refs],
        ["checkout", "-q", "--detach", sha],
    ]
    for args in steps:
        done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
        if done.returncode != 0 and args[0] == "fetch" and tag:
            # A history that cannot be cut at the tag (a merge from before it): one commit.
            args = [*fetch, "--depth", "1", sha]
            done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
        if done.returncode != 0:
            raise_build_error(f"git {args[0]} of {repo} at {sha}", done.stderr.decode())
    if tag and _git(dest, "describe", "--tags", "HEAD", check=False).returncode != 0:
        # The cut lost the way to the tag (a merge of an older branch, e.g. pytest's 4.6.x):
        # the whole history up to sha, so setuptools-scm still finds the tag (no later commit).
        args = [*fetch, "--unshallow", sha, f"refs/tags/{tag}:refs/tags/{tag}"]
        done = subprocess.run(["git", "-C", str(dest), *args], capture_output=True)
        if done.returncode != 0:
            raise_build_error(f"git fetch --unshallow of {repo} at {sha}", done.stderr.decode())
