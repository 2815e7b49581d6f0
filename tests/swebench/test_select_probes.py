"""``pgs select``'s probes, without a container: the issue's own code (fenced Python blocks,
console and IPython sessions) found in its text, in order and at most ``MAX_PROBES``, and what
it printed normalised."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from agent.swebench.selection.probes import MAX_PROBES, extract, normalise


def test_a_fenced_python_block_is_a_probe() -> None:
    issue = (
        "slugify keeps capitals\n\n```python\nfrom textkit.core import slugify\n"
        "print(slugify('Hello World'))\n```\n\nIt should print hello-world."
    )
    assert extract(issue) == ["from textkit.core import slugify\nprint(slugify('Hello World'))"]
    # An unnamed fence is taken as Python when it parses; CRLF issues alike.
    assert extract(issue.replace("```python", "```").replace("\n", "\r\n")) == extract(issue)


def test_inline_triple_backticks_open_no_fence() -> None:
    issue = "```slugify(x)``` keeps capitals:\n\n```python\nprint(slugify('A B'))\n```\n"
    assert extract(issue) == ["print(slugify('A B'))"]


def test_a_console_session_drops_its_outputs() -> None:
    issue = (
        "Look:\n\n>>> from textkit.core import slugify\n>>> for w in ['A b']:\n"
        "...     print(slugify(w))\n...\nA-b\n>>> slugify('Hello World')\n'Hello-World'\n\n"
        "It should be lower case."
    )
    assert extract(issue) == [
        "from textkit.core import slugify\nfor w in ['A b']:\n    print(slugify(w))\n\n"
        "slugify('Hello World')"
    ]


def test_an_ipython_session_drops_its_prompts_and_outputs() -> None:
    issue = (
        "```ipython\nIn [1]: from textkit.core import slugify\n\nIn [2]: def f(x):\n"
        "   ...:     return slugify(x)\n   ...:\n\nIn [3]: f('Hello World')\n"
        "Out[3]: 'Hello-World'\n```\n"
    )
    assert extract(issue) == [
        "from textkit.core import slugify\ndef f(x):\n    return slugify(x)\n\nf('Hello World')"
    ]


def test_a_python_block_with_an_ellipsis_line_is_no_console_session() -> None:
    # ``...`` as a body (or a placeholder) is Python, not a console's continuation prompt.
    code = "class Base:\n    def run(self):\n        ...\n\nprint(Base().run())"
    assert extract(f"```python\n{code}\n```\n") == [code]
    placeholder = "from textkit.core import slugify\n...\nprint(slugify('A B'))"
    assert extract(f"```\n{placeholder}\n```\n") == [placeholder]


def test_shell_blocks_tracebacks_and_bare_imports_are_no_probes() -> None:
    issue = (
        "```bash\npip install textkit\npython -c 'print(1)'\n```\n"
        "```sh\nx = 1\n```\n"
        '```\nTraceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        "ValueError: bad\n```\n"
        "```python\nimport textkit\nfrom textkit import core\n```\n"
        "```pytb\nTraceback (most recent call last):\nKeyError: 'x'\n```\n"
        "```python\nprint(1)\n```\n"
        "```python\nprint(1)\n```\n"
    )
    assert extract(issue) == ["print(1)"]  # the one Python block, once


def test_at_most_max_probes_are_taken_in_the_issues_order() -> None:
    issue = "".join(f"```python\nprint({i})\n```\n\n" for i in range(MAX_PROBES + 3))
    assert extract(issue) == [f"print({i})" for i in range(MAX_PROBES)]


statements = st.lists(
    st.sampled_from(["x = 1", "print(x)", "...", "pass", "y = [1, 2]", "print('a b')", "x"]),
    min_size=1,
    max_size=4,
)
blocks = st.lists(
    st.tuples(statements, st.sampled_from(["python", "py", "", "pycon", "bash", "console"])),
    min_size=1,
    max_size=9,
)


@given(blocks)
@example([(["...", "print(x)"], "python")])
def test_fenced_python_blocks_are_the_probes_in_order_once(
    found: list[tuple[list[str], str]],
) -> None:
    issue = "The bug:\n\n" + "".join(
        f"```{lang}\n" + "\n".join(code) + "\n```\n\nand then\n" for code, lang in found
    )
    expected: list[str] = []
    for code, lang in found:
        text = "\n".join(code)
        if lang not in ("bash", "console") and text not in expected:
            expected.append(text)
    assert extract(issue) == expected[:MAX_PROBES]


@given(statements, st.sampled_from(["1", "'a b'", "[1, 2]", "Ellipsis"]))
@example(["...", "x"], "Ellipsis")
def test_a_console_session_gives_the_code_typed_at_its_prompts(code: list[str], out: str) -> None:
    typed = "".join(f">>> {line}\n" + (f"{out}\n" if line == "x" else "") for line in code)
    assert extract(f"In a console:\n\n{typed}\nIt is wrong.") == ["\n".join(code)]
    assert extract(f"```pycon\n{typed}```\n") == ["\n".join(code)]


def test_normalise_takes_out_addresses_temporary_paths_and_trailing_blanks() -> None:
    one = "<Slug object at 0x7f3a2b1c4d50>   \nFile /tmp/tmpab12_x/case.py\n\n"
    two = "<Slug object at 0x7f00deadbeef>\nFile /tmp/pytest-of-root/7/case.py  \n"
    assert normalise(one) == normalise(two) == "<Slug object at 0x…>\nFile /tmp/…"
    assert normalise("0x1f is short") == "0x1f is short"  # a number, not an address
    assert normalise("Hello-World") != normalise("hello-world")
