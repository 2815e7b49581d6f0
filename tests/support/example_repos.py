"""Small repositories with planted bugs that an example test misses and a property finds.

Shared by the checking tests (``tests/pgs/test_check.py``) and the end-to-end tests of the
loop. Each :class:`ExampleRepo` holds, as plain texts:

- ``files``: the repository at its only commit: a package, a weak example test that PASSES on
  the buggy code, an unrelated module with its own test (for ``related_tests``), and a
  ``.pgs.yaml`` pinning Python 3.9 so the plugin is exercised on an old interpreter;
- ``issue``: what a user would report (with the input that shows the bug);
- ``correct_patch`` fixes the bug; ``wrong_patch`` is a plausible fix that is still wrong (see
  each repository's docstring for how);
- ``properties``: property files for ``.pgs/properties/``, keyed by role. The roles are the
  same in every repository where they exist:

  ============================  ==============================================================
  ``issue_sound``               ``@given`` + ``@example`` from the issue; fails on the original
  ``issue_generated``           the same rule without the explicit example (shrinking shows)
  ``regression_sound``          behaviour that must not change; passes on the original
  ``issue_unsound_passes``      an "issue" property the original already satisfies
  ``regression_unsound_fails``  a "regression" property the original violates
  ``name_error``                a NameError inside the property itself
  ``import_error``              imports a name the package does not have
  ``bad_strategy``              an invalid strategy (Hypothesis raises InvalidArgument)
  ============================  ==============================================================

Make one with ``repo.make(path)`` (or the ``make_*_repo`` functions): a real git repository.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.repos import make_repo

#: Where the Tester writes properties, inside the repository (a scratch folder, never patched).
PROPERTY_DIR = ".pgs/properties"
PGS_YAML = 'image:\n  python: "3.9"\n'


def unified_patch(path: str, before: str, after: str) -> str:
    """A git-style patch changing ``path`` from ``before`` to ``after`` (both end in a newline)."""
    body = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


@dataclass(frozen=True)
class ExampleRepo:
    name: str
    files: dict[str, str]
    issue: str
    #: The module the bug lives in (the one both patches change).
    module: str
    fixed: str
    wrong: str
    properties: dict[str, str] = field(default_factory=dict)
    #: The repository's test file that imports ``module``, and one that does not.
    related_test: str = ""
    unrelated_test: str = ""

    @property
    def correct_patch(self) -> str:
        return unified_patch(self.module, self.files[self.module], self.fixed)

    @property
    def wrong_patch(self) -> str:
        return unified_patch(self.module, self.files[self.module], self.wrong)

    def make(self, path: Path) -> Path:
        """The repository, committed, at ``path``."""
        return make_repo(path, self.files, message=f"{self.name}: initial")

    def property_path(self, role: str) -> str:
        return f"{PROPERTY_DIR}/test_{role}.py"


# ---------------------------------------------------------------------------------------------
# dedupe: the last element is always kept, even when it already occurred.

_DEDUPE_BUGGY = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    seen = set()
    out = []
    for x in xs[:-1]:
        if x not in seen:
            seen.add(x)
            out.append(x)
    if xs:
        out.append(xs[-1])  # the last one cannot repeat a later one
    return out
'''

_DEDUPE_FIXED = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    seen = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
'''

# Passes the issue's example; loses the order, which the existing example test notices.
_DEDUPE_WRONG = '''\
def dedupe(xs):
    """The elements of ``xs`` without repeats, each at the place it first occurs."""
    return sorted(set(xs))
'''

_DEDUPE_HEADER = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from listutils.core import dedupe
"""


def _dedupe_property(marker: str, body: str, header: str = _DEDUPE_HEADER) -> str:
    return f"{header}\npytestmark = pytest.mark.{marker}\n\n\n{body}"


DEDUPE = ExampleRepo(
    name="dedupe",
    module="listutils/core.py",
    related_test="tests/test_core.py",
    unrelated_test="tests/test_text.py",
    files={
        ".pgs.yaml": PGS_YAML,
        "listutils/__init__.py": "",
        "listutils/core.py": _DEDUPE_BUGGY,
        "listutils/text.py": "def shout(s):\n    return s.upper() + '!'\n",
        "tests/__init__.py": "",
        "tests/test_core.py": (
            "from listutils.core import dedupe\n\n\n"
            "def test_dedupe_example():\n"
            "    assert dedupe([3, 1, 3, 2]) == [3, 1, 2]\n\n\n"
            "def test_dedupe_empty():\n"
            "    assert dedupe([]) == []\n"
        ),
        "tests/test_text.py": (
            "from listutils.text import shout\n\n\n"
            "def test_shout():\n"
            "    assert shout('hi') == 'HI!'\n"
        ),
    },
    issue=(
        "dedupe keeps a repeated last element\n\n"
        "`dedupe([1, 2, 1])` returns `[1, 2, 1]`; I expected `[1, 2]`: every element once, "
        "in the order of first occurrence."
    ),
    fixed=_DEDUPE_FIXED,
    wrong=_DEDUPE_WRONG,
    properties={
        "issue_sound": _dedupe_property(
            'pgs_issue("the result holds no element twice")',
            "@given(st.lists(st.integers()))\n"
            "@example(xs=[1, 2, 1])\n"
            "def test_no_repeats(xs):\n"
            "    out = dedupe(xs)\n"
            "    assert len(out) == len(set(out))\n",
        ),
        "issue_generated": _dedupe_property(
            'pgs_issue("the result holds no element twice")',
            "@given(st.lists(st.integers()))\n"
            "def test_no_repeats_generated(xs):\n"
            "    out = dedupe(xs)\n"
            "    assert len(out) == len(set(out))\n",
        ),
        "regression_sound": _dedupe_property(
            'pgs_regression("distinct elements come out in the order they first occur")',
            "def first_occurrences(xs):\n"
            "    return [x for i, x in enumerate(xs) if x not in xs[:i]]\n\n\n"
            "@given(st.lists(st.integers()))\n"
            "def test_order_of_first_occurrence(xs):\n"
            "    assert first_occurrences(dedupe(xs)) == first_occurrences(xs)\n",
        ),
        "issue_unsound_passes": _dedupe_property(
            'pgs_issue("every element of the input is in the result")',
            "@given(st.lists(st.integers()))\n"
            "def test_keeps_every_element(xs):\n"
            "    assert set(dedupe(xs)) == set(xs)\n",
        ),
        "regression_unsound_fails": _dedupe_property(
            'pgs_regression("the result is as long as the number of distinct elements")',
            "@given(st.lists(st.integers()))\n"
            "def test_length_is_distinct_count(xs):\n"
            "    assert len(dedupe(xs)) == len(set(xs))\n",
        ),
        "name_error": _dedupe_property(
            'pgs_issue("the result holds no element twice")',
            "@given(st.lists(st.integers()))\n"
            "def test_typo(xs):\n"
            "    out = dedupe_list(xs)  # noqa: F821\n"
            "    assert len(out) == len(set(out))\n",
        ),
        "import_error": _dedupe_property(
            'pgs_issue("the result holds no element twice")',
            "@given(st.lists(st.integers()))\n"
            "def test_unique(xs):\n"
            "    assert unique_everseen(xs) == dedupe(xs)\n",
            header=_DEDUPE_HEADER + "from listutils.core import unique_everseen\n",
        ),
        "bad_strategy": _dedupe_property(
            'pgs_issue("the result holds no element twice")',
            "@given(st.lists(st.integers(), min_size=5, max_size=2))\n"
            "def test_bad_sizes(xs):\n"
            "    out = dedupe(xs)\n"
            "    assert len(out) == len(set(out))\n",
        ),
        # Plugin categories, not a Tester's output: a runtime error and a timeout in one file.
        "categories": (
            "import pytest\n"
            "from hypothesis import given\n"
            "from hypothesis import strategies as st\n\n"
            "from listutils.core import dedupe\n\n\n"
            '@pytest.mark.pgs_issue("the first element of the result is the first input")\n'
            "@given(st.lists(st.integers()))\n"
            "def test_first_element(xs):\n"
            "    assert dedupe(xs)[0] == xs[0]\n\n\n"
            '@pytest.mark.pgs_regression("dedupe answers quickly")\n'
            "@given(st.integers(min_value=0, max_value=3))\n"
            "def test_spins(n):\n"
            "    while n >= 0:\n"
            "        n = n + 0\n\n\n"
            '@pytest.mark.pgs_regression("a one-element list is unchanged")\n'
            "def test_single():\n"
            "    assert dedupe([7]) == [7]\n"
        ),
    },
)


# ---------------------------------------------------------------------------------------------
# rle: decode reads one digit of count, so a run longer than 9 breaks the round trip.

_RLE_BUGGY = '''\
def encode(s):
    """Run-length encoding: "aaab" -> "3a1b"."""
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{j - i}{s[i]}")
        i = j
    return "".join(out)


def decode(code):
    """The inverse of encode: "3a1b" -> "aaab"."""
    out = []
    for i in range(0, len(code), 2):
        out.append(code[i + 1] * int(code[i]))
    return "".join(out)
'''

_RLE_FIXED = _RLE_BUGGY.replace(
    """    out = []
    for i in range(0, len(code), 2):
        out.append(code[i + 1] * int(code[i]))
    return "".join(out)
""",
    """    out = []
    i = 0
    while i < len(code):
        j = i
        while code[j].isdigit():
            j += 1
        out.append(code[j] * int(code[i:j]))
        i = j + 1
    return "".join(out)
""",
)

# Reads multi-digit counts, with a typo (``j = i + 1`` for ``j += 1``): a count of 10 or more
# never ends the inner loop. The hang allocates nothing, so it is safe to let it time out.
_RLE_WRONG = _RLE_FIXED.replace(
    "            j += 1\n        out.append(code[j]",
    "            j = i + 1\n        out.append(code[j]",
)
assert _RLE_WRONG != _RLE_FIXED

_RLE_HEADER = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rle import decode, encode

# Strings built from runs: plain st.text() almost never repeats a character ten times.
runs = st.lists(st.tuples(st.sampled_from("ab"), st.integers(min_value=1, max_value=30))).map(
    lambda pairs: "".join(c * n for c, n in pairs)
)
"""

RLE = ExampleRepo(
    name="rle",
    module="rle/__init__.py",
    related_test="tests/test_rle.py",
    unrelated_test="tests/test_misc.py",
    files={
        ".pgs.yaml": PGS_YAML,
        "rle/__init__.py": _RLE_BUGGY,
        "misc.py": "def twice(x):\n    return 2 * x\n",
        "tests/test_rle.py": (
            "import rle\n\n\n"
            "def test_encode():\n"
            "    assert rle.encode('aaab') == '3a1b'\n\n\n"
            "def test_round_trip():\n"
            "    assert rle.decode(rle.encode('hello')) == 'hello'\n"
        ),
        "tests/test_misc.py": "from misc import twice\n\n\ndef test_twice():\n"
        "    assert twice(2) == 4\n",
    },
    issue=(
        "decode fails on long runs\n\n"
        "`rle.decode(rle.encode('a' * 10))` raises `IndexError: string index out of range` "
        "instead of returning the ten a's."
    ),
    fixed=_RLE_FIXED,
    wrong=_RLE_WRONG,
    properties={
        "issue_sound": f"{_RLE_HEADER}\n\n"
        '@pytest.mark.pgs_issue("decoding an encoded string gives the string back")\n'
        "@given(runs)\n"
        "@example(s='a' * 10)\n"
        "def test_round_trip(s):\n"
        "    assert decode(encode(s)) == s\n",
        "issue_generated": f"{_RLE_HEADER}\n\n"
        '@pytest.mark.pgs_issue("decoding an encoded string gives the string back")\n'
        "@given(runs)\n"
        "def test_round_trip_generated(s):\n"
        "    assert decode(encode(s)) == s\n",
        "regression_sound": f"{_RLE_HEADER}\n\n"
        '@pytest.mark.pgs_regression("short runs are encoded as count then character")\n'
        "@given(st.sampled_from('abc'), st.integers(min_value=1, max_value=9))\n"
        "def test_short_run(c, n):\n"
        "    assert encode(c * n) == f'{n}{c}'\n",
        # Fails with ValueError on the original, which the issue does not mention.
        "issue_other_exception": f"{_RLE_HEADER}\n\n"
        '@pytest.mark.pgs_issue("decode reads multi-digit counts")\n'
        "@given(st.integers(min_value=10, max_value=99))\n"
        "def test_multi_digit_with_next_run(n):\n"
        "    assert decode(f'{n}a1b') == 'a' * n + 'b'\n",
    },
)

EXAMPLES: tuple[ExampleRepo, ...] = (DEDUPE, RLE)


def make_dedupe_repo(path: Path) -> Path:
    return DEDUPE.make(path)


def make_rle_repo(path: Path) -> Path:
    return RLE.make(path)


# ---------------------------------------------------------------------------------------------
# cfgline: a `#` inside double quotes is taken for the start of a comment. A narrow bug: only
# inputs with a `#` between quotes show it, so a patch that special-cases the issue's own line
# passes every check whose fresh inputs happen to miss one (the seed case of issue 30).

_CFGLINE_DOC = '''\
    """``(key, value)`` of one ``key = value`` line of a config file, without a trailing
    ``# comment``; a ``#`` between double quotes is part of the value. None for a line with
    nothing but a comment or blanks."""
'''

_CFGLINE_BUGGY = f"""\
def parse_line(line):
{_CFGLINE_DOC}    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    key, _, value = text.partition("=")
    return key.strip(), value.strip()
"""

_CFGLINE_FIXED = f"""\
def _without_comment(line):
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:index]
    return line


def parse_line(line):
{_CFGLINE_DOC}    text = _without_comment(line).strip()
    if not text:
        return None
    key, _, value = text.partition("=")
    return key.strip(), value.strip()
"""

# The issue's own line, special-cased: every other quoted `#` is still cut.
_CFGLINE_OVERFIT = f"""\
def parse_line(line):
{_CFGLINE_DOC}    if line.strip() == 'url = "http://x#frag"':
        return "url", '"http://x#frag"'
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    key, _, value = text.partition("=")
    return key.strip(), value.strip()
"""

_CFGLINE_HEADER = """\
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cfgline import parse_line

# Latin letters and signs without the double quote (the value stays one quoted string): a `#`
# is one of some 220 characters: many checks of 64 inputs draw none.
values = st.text(
    st.characters(min_codepoint=32, max_codepoint=0xFF, exclude_characters='"'), max_size=6
)
"""

CFGLINE = ExampleRepo(
    name="cfgline",
    module="cfgline/parse.py",
    related_test="tests/test_parse.py",
    unrelated_test="tests/test_version.py",
    files={
        ".pgs.yaml": PGS_YAML,
        "cfgline/__init__.py": "from cfgline.parse import parse_line\n\n__all__ = ['parse_line']\n",
        "cfgline/parse.py": _CFGLINE_BUGGY,
        "cfgline/version.py": "VERSION = '1.0'\n",
        "tests/__init__.py": "",
        "tests/test_parse.py": (
            "from cfgline import parse_line\n\n\n"
            "def test_comment_is_stripped():\n"
            "    assert parse_line('a = 1  # one') == ('a', '1')\n\n\n"
            "def test_comment_only():\n"
            "    assert parse_line('# nothing') is None\n"
        ),
        "tests/test_version.py": (
            "from cfgline.version import VERSION\n\n\n"
            "def test_version():\n"
            "    assert VERSION == '1.0'\n"
        ),
    },
    issue=(
        "parse_line cuts a quoted value at '#'\n\n"
        "`parse_line('url = \"http://x#frag\"')` returns `('url', '\"http://x')`; I expected "
        "`('url', '\"http://x#frag\"')`: a `#` inside double quotes is part of the value, not "
        "the start of a comment."
    ),
    fixed=_CFGLINE_FIXED,
    wrong=_CFGLINE_OVERFIT,
    properties={
        "issue_sound": f"{_CFGLINE_HEADER}\n\n"
        '@pytest.mark.pgs_issue("a # inside double quotes is part of the value")\n'
        "@given(key=st.sampled_from(['url', 'name', 'path']), value=values)\n"
        "@example(key='url', value='http://x#frag')\n"
        "def test_quoted_value_is_kept(key, value):\n"
        "    line = f'{key} = \"{value}\"'\n"
        "    assert parse_line(line) == (key, f'\"{value}\"')\n",
        "regression_sound": f"{_CFGLINE_HEADER}\n\n"
        '@pytest.mark.pgs_regression("a comment after an unquoted value is left out")\n'
        "@given(value=st.from_regex(r'[a-z0-9]{1,8}', fullmatch=True), comment=values)\n"
        "def test_comment_after_plain_value(value, comment):\n"
        "    assert parse_line(f'k = {value} #{comment}') == ('k', value)\n",
    },
)
