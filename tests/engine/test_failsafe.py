"""The engine's last guard, in process: one file's problem costs that file, never the run, with
a message that says what happened (exactly, as users and CI read these lines)."""

from __future__ import annotations

import sys

import pytest

from neuron_migrate.engine.failsafe import beyond_limits, never_raise, too_deep
from neuron_migrate.model import FileResult

DATA = b"x = 1\n"


def _raises(error: BaseException):  # type: ignore[no-untyped-def]
    def work() -> FileResult:
        raise error
    return work


def test_a_result_is_passed_through() -> None:
    done = FileResult("m.py", original=DATA)
    assert never_raise("m.py", DATA, lambda: done) is done


def test_an_expected_error_is_the_files_message() -> None:
    result = never_raise("m.py", DATA, _raises(KeyError("m.py: bad pin")), expected=(KeyError,))
    assert result == FileResult("m.py", original=DATA, error="'m.py: bad pin'")


@pytest.mark.parametrize("error", [RecursionError("deep"), MemoryError()])
def test_running_out_of_stack_is_nested_too_deeply(error: BaseException) -> None:
    data = b"x = 1\ny = -(-(-(-1)))\n"
    result = never_raise("m.py", data, _raises(error))
    assert result == FileResult("m.py", original=data,
                                error="m.py:2: nested too deeply to analyse; file skipped")


def test_anything_else_is_an_internal_error_to_report() -> None:
    result = never_raise("m.py", DATA, _raises(ZeroDivisionError("boom")))
    assert result == FileResult("m.py", original=DATA, error=(
        "m.py: internal error (ZeroDivisionError: boom); file left untouched, "
        "please report this"))
    with pytest.raises(KeyboardInterrupt):  # not an Exception: the run stops
        never_raise("m.py", DATA, _raises(KeyboardInterrupt()))


def test_a_number_longer_than_python_converts_names_its_line_and_length() -> None:
    limit = sys.get_int_max_str_digits()
    digits = "7" * (limit + 5)
    data = f"a = 1\nb = 2\nc = {digits}\n".encode()
    error = ValueError("Exceeds the limit (4300 digits) for integer string conversion")
    expected = (f"m.py:3: a number of {limit + 5} digits, longer than Python reads ({limit}); "
                "file skipped")
    assert beyond_limits("m.py", data, error) == expected
    assert never_raise("m.py", data, _raises(error)).error == expected
    # exactly at the limit is readable: the number found is the one past it
    assert beyond_limits("m.py", b"a = " + b"7" * limit + b"\n", error) == (
        f"m.py: a number longer than Python reads ({limit} digits); file skipped")
    assert beyond_limits("m.py", data, ValueError("other")) is None
    assert beyond_limits("m.py", data, TypeError(
        "integer string conversion")) is None  # type: ignore[arg-type]


def test_too_deep_names_the_busiest_line() -> None:
    assert too_deep("m.py", b"a = 1\nb = [(1, 2), {3: 4}]\nc = d\n") == (
        "m.py:2: nested too deeply to analyse; file skipped")
    assert too_deep("m.py", b"not a\nawait b and not c\nlambda: 1\n") == (
        "m.py:2: nested too deeply to analyse; file skipped")
    assert too_deep("m.py", b"lambda: lambda: lambda: 1\nx = 1\n") == (
        "m.py:1: nested too deeply to analyse; file skipped")
    assert too_deep("m.py", b"pass\n") == "m.py: nested too deeply to analyse; file skipped"
    # counted up to where the tokenizer gives up
    assert too_deep("m.py", b"a = 1\nb = ((((\n") == (
        "m.py:2: nested too deeply to analyse; file skipped")


def test_lambdas_count_towards_the_busiest_line_and_one_digit_past_the_limit_is_found() -> None:
    assert too_deep("m.py", b"a = b\nlambda: 1\n") == (
        "m.py:2: nested too deeply to analyse; file skipped")
    limit = sys.get_int_max_str_digits()
    error = ValueError("Exceeds the limit for integer string conversion")
    assert beyond_limits("m.py", b"a = " + b"7" * (limit + 1) + b"\n", error) == (
        f"m.py:1: a number of {limit + 1} digits, longer than Python reads ({limit}); "
        "file skipped")
