"""A format error carries its kind and values from agent/errors.py up to the loop, which says it
in the run's words (``agent.format_errors``); :func:`agent.core.prompts.format_error` gives it
the shipped text as its message."""

from __future__ import annotations

import pytest

from agent.core.parsing import parse_text_action
from agent.core.prompts import DEFAULT_FORMAT_ERRORS, FormatErrors, format_error
from agent.core.tools import ToolCallError
from agent.errors import FormatError


def test_format_error_message_is_the_shipped_text_and_render_uses_the_config() -> None:
    error = format_error(kind="many_blocks", values={"count": 3})
    assert type(error) is FormatError
    assert (error.kind, error.values) == ("many_blocks", {"count": 3})
    assert str(error) == DEFAULT_FORMAT_ERRORS.render("many_blocks", {"count": 3})
    assert "3" in str(error)
    own = FormatErrors(many_blocks="MARKER {{ count }} blocks")
    assert error.render(own) == "MARKER 3 blocks"


def test_format_error_of_a_subclass_and_one_without_kind() -> None:
    error = format_error(kind="empty_command", error=ToolCallError)
    assert isinstance(error, ToolCallError)
    assert error.render(FormatErrors(empty_command="MARKER")) == "MARKER"
    plain = FormatError("told as is")
    assert plain.kind is None
    assert plain.render(FormatErrors(empty_command="MARKER")) == "told as is"


def test_the_parser_raises_it_with_its_kind() -> None:
    with pytest.raises(FormatError) as caught:
        parse_text_action("no block here")
    assert caught.value.kind == "no_block"
    assert caught.value.render(FormatErrors(no_block="MARKER")) == "MARKER"
