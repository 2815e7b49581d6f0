"""The repository's patch against HEAD, for `submit` and the state command.

New files are included and the scratch folders ($PGS_DIFF_EXCLUDE, colon-separated, default
``.pgs``) left out. The user's index is never touched: git works on a throwaway copy of it
(GIT_INDEX_FILE), which keeps its stat cache so only changed files are hashed again.
Standard library only, Python 3.7+.
"""

import os
import shutil
import subprocess
import tempfile

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class GitError(Exception):
    pass


def _git(args, cwd, env=None, check=True):
    proc = subprocess.run(
        ["git", "-c", "safe.directory=*", "-c", "core.quotepath=off", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
    )
    if check and proc.returncode != 0:
        raise GitError(
            "git {} failed: {}".format(args[0], proc.stderr.decode("utf-8", "replace").strip())
        )
    return proc


def repo_root(start=None):
    """$ROOT when set (SWE-agent's convention), else the top of the work tree around ``start``."""
    root = os.environ.get("ROOT")
    if root and os.path.isdir(root):
        return root
    out = _git(["rev-parse", "--show-toplevel"], cwd=start or os.getcwd())
    return out.stdout.decode("utf-8", "surrogateescape").strip()


def excluded():
    value = os.environ.get("PGS_DIFF_EXCLUDE", ".pgs")
    return [d for d in value.split(":") if d]


def diff(root):
    """The patch (bytes) of the work tree at ``root`` against HEAD, new files included."""
    # Runs after every action: two git processes in the usual case (add, diff); the others
    # only for unusual layouts (a .git file, a repository without commits).
    pathspec = ["--", "."] + [f":(exclude){d}" for d in excluded()]
    tmp = tempfile.mkdtemp(prefix="pgs-diff-")
    try:
        index = os.path.join(tmp, "index")
        real = os.path.join(root, ".git", "index")
        if not os.path.isdir(os.path.join(root, ".git")):
            real = _git(["rev-parse", "--git-path", "index"], cwd=root).stdout.decode().strip()
            real = os.path.join(root, real)
        env = dict(os.environ, GIT_INDEX_FILE=index)
        if os.path.isfile(real):
            shutil.copyfile(real, index)
        _git(["add", "-A", *pathspec], cwd=root, env=env)
        flags = ["--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv"]
        flags += ["--src-prefix=a/", "--dst-prefix=b/"]
        out = _git(["diff", *flags, "HEAD", *pathspec], cwd=root, env=env, check=False)
        if out.returncode != 0:  # no commit yet: everything is new
            out = _git(["diff", *flags, EMPTY_TREE, *pathspec], cwd=root, env=env)
        return out.stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def state_path():
    """Where state commands merge their keys: $HOME/state.json (/root/state.json in Docker)."""
    return os.path.join(os.path.expanduser("~"), "state.json")
