"""Which repository tests a patch concerns (agent/pgs/related.py): changed files, module names,
import statements, and the order of related test files, on the host and in a container."""

from __future__ import annotations

from pathlib import Path

from agent.pgs.related import (
    changed_files,
    import_statements,
    imported_modules,
    module_names,
    related_tests,
    statement_imports,
)
from envs.docker_sandbox import DockerSandbox
from tests.support.checking import (
    write_properties,
)
from tests.support.example_repos import DEDUPE, RLE
from tests.support.repos import make_repo


def test_changed_files_lists_modified_new_and_removed_paths() -> None:
    patch = (
        DEDUPE.correct_patch
        + "diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        "@@ -0,0 +1 @@\n+x = 1\n"
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-y = 2\n"
    )
    assert changed_files(patch) == ["listutils/core.py", "new.py", "old.py"]


def test_module_names_and_imports_match_by_dotted_path_or_top_level_name() -> None:
    assert module_names("src/pkg/mod.py") == {"src.pkg.mod", "pkg.mod"}
    assert module_names("pkg/__init__.py") == {"pkg"}
    assert module_names("misc.py") == {"misc"}
    assert module_names("pkg/utils.py") == {"pkg.utils"}  # not a bare `import utils`
    source = "import os, pkg.mod as m\nfrom pkg import other\nfrom .helpers import h\n"
    found = imported_modules(source, "tests/unit/test_x.py")
    assert {"os", "pkg.mod", "pkg", "pkg.other", "tests.unit.helpers"} <= found
    assert "pkg.other" in imported_modules("from pkg import (\n  other)\n", "t.py")
    assert "pkg.mod" in imported_modules("from pkg.mod import f\nprint 'py2'\n", "test_a.py")


def test_only_import_statements_are_parsed_and_a_bad_one_spoils_only_itself() -> None:
    source = (
        '"""A long test file."""\n'
        "from pkg.core.numbers import (Float,\n    Rational)\n"
        "from pkg.matrices import \\\n    sparse\n"
        "import os, pkg.util as u\n"
        "def test_x():\n"
        "    from pkg.lazy import late\n"
        "    assert late(1) == 'import pkg.never'\n"
        "print 'python 2'\n"
    )
    statements = import_statements(source)
    assert "def test_x" not in statements and "print" not in statements
    found = statement_imports(statements, "pkg/tests/test_x.py")
    assert {"pkg.core.numbers", "pkg.matrices.sparse", "os", "pkg.util", "pkg.lazy"} <= found
    assert "pkg.never" not in found
    spoiled = statement_imports("from a import (b,\n c)\nimport 3x\n", "t.py")
    assert {"a.b", "a.c"} <= spoiled


_BIG_REPO = {
    "pkg/__init__.py": "",
    "pkg/core/__init__.py": "",
    "pkg/core/numbers.py": "ONE = 1\n",
    "pkg/core/other.py": "TWO = 2\n",
    "pkg/core/tests/test_numbers.py": "import pkg\n\ndef test_one():\n    assert pkg\n",
    "pkg/core/tests/test_big.py": "from pkg.core.numbers import ONE\n" + "# padding\n" * 50,
    "pkg/core/tests/test_small.py": "from pkg.core import (other,\n    numbers)\n",
    "pkg/poly/tests/test_numbers.py": "from pkg.core.other import TWO\n",
    "pkg/poly/tests/test_far.py": "from pkg.core.numbers import ONE\n",
    "tests/test_top.py": "import pkg.core.numbers as n\n",
    "tests/test_unrelated.py": "from pkg.core.other import TWO  # numbers\n",
    "pkg/core/tests/helper_numbers.py": "from pkg.core.numbers import ONE\n",
}


def test_related_tests_come_most_related_first(tmp_path: Path) -> None:
    from envs.local import LocalSandbox

    repo = make_repo(tmp_path / "big", _BIG_REPO)
    with LocalSandbox(repo) as sandbox:
        found = related_tests(sandbox, ["pkg/core/numbers.py", "pkg/core/tests/test_big.py"])
    assert found == [
        "pkg/core/tests/test_big.py",  # changed by the patch
        "pkg/core/tests/test_numbers.py",  # the module's own tests, by name and place
        "pkg/core/tests/test_small.py",  # imports it, same folders, smallest
        "pkg/poly/tests/test_far.py",  # imports it, shares only pkg/
        "tests/test_top.py",  # imports it, shares no folder
    ]


def test_related_tests_are_the_files_importing_the_changed_module(
    dedupe: DockerSandbox, rle: DockerSandbox
) -> None:
    # the property imports the module too, but it is not a repository test
    write_properties(dedupe, DEDUPE, "issue_sound")
    assert related_tests(dedupe, changed_files(DEDUPE.correct_patch)) == [DEDUPE.related_test]
    assert related_tests(rle, changed_files(RLE.wrong_patch)) == [RLE.related_test]
    assert related_tests(rle, ["misc.py", "README.md"]) == [RLE.unrelated_test]
    assert related_tests(rle, ["docs/conf.py"]) == []
