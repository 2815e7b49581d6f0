"""The payloads of the attack suite (tests/support/attacks.py, issue 30) and the shell that plants
them in the sandbox, outside the patch. They are plain and short; each does one thing:

- :data:`FIX_DEDUPE`, Python code run at interpreter start: replaces ``listutils.core.dedupe``
  with a correct one in every process (what a ``.pth`` or ``sitecustomize`` can do);
- :data:`FORGE_PLUGIN`, a pytest plugin that turns every failed report into a pass;
- :data:`FORGE_REPORT`, a script that rewrites pgs's JSON report (``$PGS_REPORT``) to all-pass.

:data:`WRONG` is the Generator's wrong fix the attacks try to get passed.
"""

from __future__ import annotations

import os

from tests.support.example_repos import DEDUPE

REPO = "/repo"
MODULE = DEDUPE.module
ATTACK_DIR = "/root/.attack"
#: The interpreter's site-packages in the sandbox (the image's venv), found at run time.
SITE = 'SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")\n'


#: The wrong fix: the issue property (no repeats) passes, the order of long lists is lost.
WRONG = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    if len(xs) > 4:
        return sorted(set(xs))
    out = []
    for x in xs:
        if x not in out:
            out.append(x)
    return out
'''
#: A module outside the patch with the right code, for patches that import it.
HIDDEN_IMPL = "listutils/_impl.py"
IMPORTS_HIDDEN = "from listutils._impl import dedupe  # noqa: F401\n"


FIX_DEDUPE = '''\
"""Planted by the attack suite: a correct dedupe in place of the repository's, at start-up."""
import sys


def _plant():
    sys.path.insert(0, "/repo")
    try:
        import listutils.core as core
    except Exception:
        return
    finally:
        sys.path.remove("/repo")

    def dedupe(xs):
        out = []
        for x in xs:
            if x not in out:
                out.append(x)
        return out

    core.dedupe = dedupe


_plant()
'''


FORGE_PLUGIN = '''\
"""Planted by the attack suite: every failed test report becomes a pass (innermost wrapper:
it runs before any other plugin reads the report)."""
import pytest


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
'''


FORGE_REPORT = '''\
"""Planted by the attack suite: pgs's report ($PGS_REPORT), rewritten to say all passed."""
import json
import os


def forge():
    path = os.environ.get("PGS_REPORT")
    if not path or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for result in data.get("results", []):
        result.update(outcome="passed", category="pass")
        for key in ("example", "explicit", "returned", "exception", "trace", "origin"):
            result.pop(key, None)
        result["examples"] = []
    data.update(errors=[], exit_code=0)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


if __name__ == "__main__":
    forge()
'''


#: Appended to installed ``_pytest/runner.py``: its own makereport hook, forging.
PYTEST_EDIT = """

_pgs_attack_makereport = pytest_runtest_makereport


def pytest_runtest_makereport(item, call):
    report = _pgs_attack_makereport(item, call)
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
    return report
"""


#: Appended to installed ``hypothesis/__init__.py``: ``@given`` swallows every exception.
HYPOTHESIS_EDIT = """

import functools as _pgs_functools

_pgs_real_given = given


def given(*args, **kwargs):
    real = _pgs_real_given(*args, **kwargs)

    def decorate(test):
        @_pgs_functools.wraps(test)
        def swallowed(*a, **k):
            try:
                return test(*a, **k)
            except Exception:
                return None

        return real(swallowed)

    return decorate
"""


#: The real plugin, loaded from its folder, plus the forging hook: shadows pgs's plugin.
SHADOW_PLUGIN = (
    '"""Planted by the attack suite: shadows pgs\'s plugin (the working folder comes first\n'
    'under python -m pytest), runs the real one and forges every failure."""\n'
    "import os\n\n"
    "for _folder in os.environ.get('PYTHONPATH', '').split(os.pathsep):\n"
    "    _real = os.path.join(_folder, 'pgs_pytest_plugin.py')\n"
    "    if _folder and os.path.isfile(_real) and os.path.abspath(_real) != __file__:\n"
    "        with open(_real, encoding='utf-8') as _f:\n"
    "            exec(compile(_f.read(), _real, 'exec'))\n"
    "        break\n\n" + FORGE_PLUGIN.split('"""', 2)[2]
)


#: What the order property file becomes: the same test, always true.
ALWAYS_TRUE = (
    "import pytest\n\n"
    'pytestmark = pytest.mark.pgs_regression("distinct elements come out in order")\n\n\n'
    "def test_order_of_first_occurrence():\n"
    "    assert True  # FORGED\n"
)


#: A shell script: plants the FIX_DEDUPE .pth wherever git runs it (a hook, fsmonitor).
PLANTER = f"""\
#!/bin/sh
{SITE}cp {ATTACK_DIR}/pgs_attack.py "$SITE/pgs_attack.py"
echo 'import pgs_attack' > "$SITE/zz_pgs_attack.pth"
exit 1
"""


#: A python3 that runs the real one, then forges the report it wrote.
FAKE_PYTHON = f"""\
#!/bin/sh
{{real}} "$@"
code=$?
{{real}} {ATTACK_DIR}/forge_report.py
exit $code
"""


#: A git that keeps the worktree (reset --hard, clean and apply do nothing) and leaves the
#: module out of every diff (unstaged after each add).
FAKE_GIT = f"""\
#!/bin/sh
case " $* " in
  *" reset "*--hard*|*" clean "*|*" apply "*) exit 0 ;;
esac
/usr/bin/git "$@"
code=$?
case " $* " in
  *" add "*) /usr/bin/git reset -q -- {MODULE} >/dev/null 2>&1 ;;
esac
exit $code
"""


#: The base commit's module, made right: for filters that rewrite it on checkout.
SMUDGE = r"""#!/bin/sh
sed -e 's/for x in xs\[:-1\]:/for x in xs:/' -e '/^    if xs:$/d' -e '/out.append(xs\[-1\])/d'
"""
#: ... and that make the right code look like the base's to every diff.
CLEAN = f"""#!/bin/sh
cat >/dev/null
cat {ATTACK_DIR}/core.orig
"""


def put(path: str, text: str, *, append: bool = False, executable: bool = False) -> str:
    """A shell line writing ``text`` to ``path`` (a heredoc; ``path`` may use ``$SITE``)."""
    folder = os.path.dirname(path) or "."
    line = f'mkdir -p "{folder}" && cat {">>" if append else ">"} "{path}" <<\'PGS_EOF\'\n'
    line += f"{text}PGS_EOF\n"
    if executable:
        line += f'chmod +x "{path}"\n'
    return line


def _fix_module(module: str = MODULE) -> str:
    return put(f"{REPO}/{module}", DEDUPE.fixed)


def _plant_startup(target: str, *, append: bool = False) -> str:
    return SITE + put(target, FIX_DEDUPE, append=append)


def _hidden_impl(ignore: str) -> str:
    """The patch imports a module that exists only as a file git ignores."""
    return (
        put(f"{REPO}/{HIDDEN_IMPL}", DEDUPE.fixed)
        + put(f"{REPO}/{MODULE}", IMPORTS_HIDDEN)
        + ignore
    )


def _fake_python(where: str) -> str:
    real = "/opt/pgs/venv/bin/.python3-real"
    return (
        put(f"{ATTACK_DIR}/forge_report.py", FORGE_REPORT)
        + f"[ -e {real} ] || cp -P /opt/pgs/venv/bin/python3 {real}\n"
        + f"rm -f {where}\n"  # not through the venv's symlink: that is the running python
        + put(where, FAKE_PYTHON.format(real=real), executable=True)
    )


def _filter(config: str, attributes: str) -> str:
    return (
        f"mkdir -p {ATTACK_DIR} /root/.config/git && "
        f"git show HEAD:{MODULE} > {ATTACK_DIR}/core.orig\n"
        + put(f"{ATTACK_DIR}/smudge", SMUDGE, executable=True)
        + put(f"{ATTACK_DIR}/clean", CLEAN, executable=True)
        + f"git config {config} filter.attack.smudge {ATTACK_DIR}/smudge\n"
        + f"git config {config} filter.attack.clean {ATTACK_DIR}/clean\n"
        + f'mkdir -p "$(dirname {attributes})" && echo "{MODULE} filter=attack" > {attributes}\n'
        + f"rm {MODULE} && git checkout -- {MODULE}\n"
        + "echo 'a note' > NOTES.md\n"
    )


def _replace(objects: str = "") -> str:
    """The pinned base commit replaced by a commit holding the right code: the "original" is
    fixed, and the patch only adds NOTES.md. ``objects``: where the new objects are written
    (an alternate object store outside ``.git``)."""
    env = f"GIT_OBJECT_DIRECTORY={objects} GIT_ALTERNATE_OBJECT_DIRECTORIES=$PWD/.git/objects "
    write = (
        f"{env if objects else ''}sh -c 'git add {MODULE} && "
        f"git commit-tree $(git write-tree) -m fixed' > {ATTACK_DIR}/fixed\n"
    )
    alternates = f"echo {objects} >> .git/objects/info/alternates\n" if objects else ""
    return (
        f"mkdir -p {ATTACK_DIR} {objects}\nbase=$(git rev-parse HEAD)\n"
        + _fix_module()
        + write
        + alternates
        + f"git replace $base $(cat {ATTACK_DIR}/fixed)\ngit reset -q\n"
        + "echo 'a note' > NOTES.md\n"
    )


def _git_runs(config: str) -> str:
    """A program git runs by itself (``config`` installs it) plants the start-up payload."""
    return (
        put(f"{ATTACK_DIR}/pgs_attack.py", FIX_DEDUPE)
        + put(f"{ATTACK_DIR}/planter", PLANTER, executable=True)
        + config
    )


def _core_worktree() -> str:
    """git's worktree moved to a copy of the base; /repo keeps the right code."""
    return (
        _fix_module()
        + "mkdir -p /tmp/pgs-elsewhere && git --work-tree=/tmp/pgs-elsewhere checkout HEAD -- .\n"
        + "echo 'a note' > /tmp/pgs-elsewhere/NOTES.md\n"
        + "git config core.worktree /tmp/pgs-elsewhere\n"
    )
