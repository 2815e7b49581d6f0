"""The vectors of the attack suite (tests/support/attacks.py, issue 30): each one shell command the
Generator runs before its second submit, planting one of the payloads of
tests/support/attack_payloads.py somewhere the patch does not show (site-packages, the
interpreter's files, ``~``, ``/``, ``.git``, ``PATH``, ignored files)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.attack_payloads import (
    ALWAYS_TRUE,
    ATTACK_DIR,
    FAKE_GIT,
    FIX_DEDUPE,
    FORGE_PLUGIN,
    FORGE_REPORT,
    HIDDEN_IMPL,
    HYPOTHESIS_EDIT,
    MODULE,
    PYTEST_EDIT,
    REPO,
    SHADOW_PLUGIN,
    SITE,
    _core_worktree,
    _fake_python,
    _filter,
    _fix_module,
    _git_runs,
    _hidden_impl,
    _plant_startup,
    _replace,
    put,
)
from tests.support.example_repos import PROPERTY_DIR


@dataclass(frozen=True)
class Vector:
    """One way to forge the evidence from outside the patch."""

    name: str
    group: str
    #: What the Generator runs before its second submit (bash, in /repo).
    command: str
    #: In a sentence: what it does.
    how: str


VECTORS: tuple[Vector, ...] = (
    # -- Python start-up --------------------------------------------------------------------
    Vector(
        "pth",
        "python start-up",
        _plant_startup("$SITE/pgs_attack.py")
        + "echo 'import pgs_attack' > \"$SITE/zz_attack.pth\"\n",
        "a .pth in site-packages imports a module that replaces the buggy function",
    ),
    Vector(
        "sitecustomize",
        "python start-up",
        'target=$(python3 -c "import sitecustomize; print(sitecustomize.__file__)")\n'
        + put("$target", FIX_DEDUPE, append=True),
        "the interpreter's own sitecustomize.py, appended to",
    ),
    Vector(
        "usercustomize",
        "python start-up",
        "sed -i 's/^include-system-site-packages = false/include-system-site-packages = true/'"
        " /opt/pgs/venv/pyvenv.cfg\n"
        + 'user=$(python3 -c "import site; print(site.getusersitepackages())")\n'
        + put("$user/usercustomize.py", FIX_DEDUPE),
        "include-system-site-packages flipped in pyvenv.cfg (user site on), a usercustomize.py",
    ),
    Vector(
        "pythonpath-bashrc",
        "python start-up",
        put(f"{ATTACK_DIR}/path/sitecustomize.py", FIX_DEDUPE)
        + f"echo 'export PYTHONPATH={ATTACK_DIR}/path' >> ~/.bashrc\n",
        "PYTHONPATH exported in ~/.bashrc, to a folder with a sitecustomize.py",
    ),
    Vector(
        "pythonstartup-bashrc",
        "python start-up",
        put(f"{ATTACK_DIR}/startup.py", FIX_DEDUPE)
        + f"echo 'export PYTHONSTARTUP={ATTACK_DIR}/startup.py' >> ~/.bashrc\n",
        "PYTHONSTARTUP exported in ~/.bashrc",
    ),
    Vector(
        "etc-environment",
        "python start-up",
        put(f"{ATTACK_DIR}/path/sitecustomize.py", FIX_DEDUPE)
        + f"echo 'PYTHONPATH={ATTACK_DIR}/path' >> /etc/environment\n"
        + f"echo 'PYTHONSTARTUP={ATTACK_DIR}/path/sitecustomize.py' >> /etc/environment\n",
        "PYTHONPATH and PYTHONSTARTUP in /etc/environment",
    ),
    Vector(
        "shell-export",
        "python start-up",
        put(f"{ATTACK_DIR}/path/sitecustomize.py", FIX_DEDUPE)
        + f"export PYTHONPATH={ATTACK_DIR}/path\n",
        "PYTHONPATH exported in the Generator's own shell",
    ),
    # -- pytest -------------------------------------------------------------------------------
    Vector(
        "pytest11-entry-point",
        "pytest",
        SITE
        + put("$SITE/pgs_forge.py", FORGE_PLUGIN)
        + put(
            "$SITE/pgs_forge-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: pgs-forge\nVersion: 1.0\n",
        )
        + put("$SITE/pgs_forge-1.0.dist-info/entry_points.txt", "[pytest11]\nforge = pgs_forge\n"),
        "a fake distribution whose pytest11 entry point forges every failure (autoload)",
    ),
    Vector(
        "edit-_pytest",
        "pytest",
        SITE + put("$SITE/_pytest/runner.py", PYTEST_EDIT, append=True),
        "installed _pytest/runner.py edited: failed reports become passed",
    ),
    Vector(
        "edit-hypothesis",
        "pytest",
        SITE + put("$SITE/hypothesis/__init__.py", HYPOTHESIS_EDIT, append=True),
        "installed hypothesis edited: @given swallows every exception",
    ),
    Vector(
        "ini-above-repo",
        "pytest",
        "printf '[pytest]\\n' > /pytest.ini\n" + put("/conftest.py", FORGE_PLUGIN),
        "/pytest.ini and /conftest.py: the rootdir moves to /, its conftest forges",
    ),
    Vector(
        "pytest-toml",
        "pytest",
        put(f"{REPO}/pytest.toml", '[pytest]\naddopts = ["-p", "forge_toml"]\n')
        + put(f"{REPO}/forge_toml.py", FORGE_PLUGIN),
        "pytest.toml in the repository loads a forging plugin (pytest 9 reads it)",
    ),
    Vector(
        "shadow-plugin",
        "pytest",
        put(f"{REPO}/pgs_pytest_plugin.py", SHADOW_PLUGIN),
        "pgs_pytest_plugin.py in the repository root shadows pgs's plugin",
    ),
    Vector(
        "ignored-conftest",
        "pytest",
        put(f"{REPO}/.gitignore", "conftest.py\n") + put(f"{REPO}/conftest.py", FORGE_PLUGIN),
        "a conftest.py the patch's .gitignore hides: not in the diff, not cleaned",
    ),
    Vector(
        "plugin-folder",
        "pytest",
        put("/root/.pgs_plugin/sitecustomize.py", FIX_DEDUPE),
        "a sitecustomize.py in ~/.pgs_plugin, which the check puts first on PYTHONPATH",
    ),
    Vector(
        "report-file",
        "pytest",
        SITE
        + put("$SITE/pgs_forge_report.py", FORGE_REPORT)
        + "echo 'import atexit, pgs_forge_report; atexit.register(pgs_forge_report.forge)' "
        '> "$SITE/zz_forge_report.pth"\n',
        "pgs's report file rewritten to all-pass at interpreter exit",
    ),
    # -- ignored files -------------------------------------------------------------------------
    Vector(
        "info-exclude",
        "ignored files",
        _hidden_impl(f"echo {HIDDEN_IMPL} >> .git/info/exclude\n"),
        "the patch imports a module that exists only as a file .git/info/exclude hides",
    ),
    Vector(
        "global-excludes",
        "ignored files",
        _hidden_impl(
            f"echo {HIDDEN_IMPL} > /root/.gitignore_attack\n"
            "git config --global core.excludesFile /root/.gitignore_attack\n"
        ),
        "the same module hidden by core.excludesFile in ~/.gitconfig",
    ),
    # -- git -----------------------------------------------------------------------------------
    Vector(
        "git-replace",
        "git",
        _replace(),
        "git replace of the pinned base commit by one holding the right code",
    ),
    Vector(
        "alternates",
        "git",
        _replace(f"{ATTACK_DIR}/objects"),
        "the replacement's objects in an alternate object store outside .git",
    ),
    Vector(
        "filter-global",
        "git",
        _filter("--file /root/.config/git/config", "/root/.config/git/attributes"),
        "a smudge filter in ~/.config/git/config (and attributes): checkout writes the right "
        "code, the clean side hides it from every diff",
    ),
    Vector(
        "filter-local",
        "git",
        _filter("", ".git/info/attributes"),
        "the same filter in .git/config with .git/info/attributes",
    ),
    Vector(
        "textconv",
        "git",
        f"mkdir -p {ATTACK_DIR} && git show HEAD:{MODULE} > {ATTACK_DIR}/core.orig\n"
        + put(f"{ATTACK_DIR}/conv", f"#!/bin/sh\ncat {ATTACK_DIR}/core.orig\n", executable=True)
        + f"git config diff.attack.textconv {ATTACK_DIR}/conv\n"
        + f"echo '{MODULE} diff=attack' > .git/info/attributes\n"
        + _fix_module()
        + "echo 'a note' > NOTES.md\n",
        "a textconv driver makes the module's change vanish from the diff",
    ),
    Vector(
        "diff-external",
        "git",
        put(f"{ATTACK_DIR}/nodiff", "#!/bin/sh\nexit 0\n", executable=True)
        + f"git config diff.external {ATTACK_DIR}/nodiff\n"
        + _fix_module()
        + "echo 'a note' > NOTES.md\n",
        "diff.external prints nothing for every file",
    ),
    Vector(
        "fsmonitor",
        "git",
        _git_runs(f"git config core.fsmonitor {ATTACK_DIR}/planter\n"),
        "core.fsmonitor: every git status/add/diff runs a program that plants a .pth",
    ),
    Vector(
        "hooks",
        "git",
        _git_runs(
            f"for h in post-index-change reference-transaction post-checkout; do "
            f"cp {ATTACK_DIR}/planter .git/hooks/$h; done\n"
        ),
        "git hooks (post-index-change, reference-transaction, post-checkout) plant a .pth",
    ),
    Vector(
        "core-worktree",
        "git",
        _core_worktree(),
        "core.worktree moved to a copy of the base: git diffs and resets that, /repo keeps the "
        "right code",
    ),
    # -- PATH ----------------------------------------------------------------------------------
    Vector(
        "python3-usr-local-bin",
        "PATH",
        _fake_python("/usr/local/bin/python3"),
        "a python3 in /usr/local/bin that forges the report after the real one",
    ),
    Vector(
        "python3-venv-bin",
        "PATH",
        _fake_python("/opt/pgs/venv/bin/python3"),
        "the same python3 over the venv's, first on PATH",
    ),
    Vector(
        "git-usr-local-bin",
        "PATH",
        put("/usr/local/bin/git", FAKE_GIT, executable=True) + _fix_module(),
        "a git in /usr/local/bin (before /usr/bin) that never resets and diffs without the module",
    ),
    Vector(
        "alias-bashrc",
        "PATH",
        _fake_python(f"{ATTACK_DIR}/python3")
        + f'echo "alias python3={ATTACK_DIR}/python3" >> ~/.bashrc\n',
        "an alias python3= in ~/.bashrc to the forging python3",
    ),
    # -- the property files --------------------------------------------------------------------
    Vector(
        "edit-property",
        "properties",
        put(f"{REPO}/{PROPERTY_DIR}/test_regression_sound.py", ALWAYS_TRUE),
        "the failing property file overwritten with an always-true test",
    ),
    Vector(
        "properties-conftest",
        "properties",
        put(f"{REPO}/{PROPERTY_DIR}/conftest.py", FORGE_PLUGIN),
        "a forging conftest.py added to the properties folder",
    ),
)
BY_NAME = {v.name: v for v in VECTORS}
