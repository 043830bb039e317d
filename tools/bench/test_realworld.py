"""bench.realworld's failure records (no lowering here)."""

import pytest

from bench.realworld import first_line


def _wrapped() -> Exception:
    try:
        try:
            raise RuntimeError("shape mismatch\nin aten.add")
        except RuntimeError as error:
            raise Exception("An error occurred when running the 'SomePass' pass") from error
    except Exception as error:
        return error


def test_a_plain_error_is_its_type_and_first_line():
    assert first_line(ValueError("bad input\nmore")) == "ValueError: bad input"


def test_a_wrapped_error_names_its_root_cause():
    assert first_line(_wrapped()) == (
        "Exception: An error occurred when running the 'SomePass' pass (caused by RuntimeError: shape mismatch)"
    )


def test_a_suppressed_context_is_not_a_cause():
    with pytest.raises(KeyError) as caught:
        try:
            raise ValueError("inner")
        except ValueError:
            raise KeyError("outer") from None
    assert first_line(caught.value) == "KeyError: 'outer'"
