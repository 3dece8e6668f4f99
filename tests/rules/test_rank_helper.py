"""The global rank and world size: once or twice in a file, the expression itself; asked for
three times or more, one small helper; a master-only print inside an `if` that already tests for the
same master is printed without a second test."""

from __future__ import annotations

import pytest

from tests.conftest import migrated

ONCE = '''\
import torch_xla.core.xla_model as xm

rank = xm.get_ordinal()
world = xm.xrt_world_size()
'''


TWICE = ONCE + "xm.master_print(rank)\nsize = xm.xrt_world_size()\n"
THRICE = TWICE + "print(xm.get_ordinal(), xm.xrt_world_size())\n"


@pytest.mark.parametrize("source", [ONCE, TWICE])
def test_one_or_two_uses_stay_inline(source: str) -> None:
    text, _ = migrated(source)
    assert "_neuron_rank" not in text and "_neuron_world_size" not in text
    assert 'int(os.environ.get("RANK", 0))' in text


def test_three_uses_share_one_helper() -> None:
    text, _ = migrated(THRICE)
    assert text.count("def _neuron_rank():") == 1 and text.count("def _neuron_world_size") == 1
    assert "rank = _neuron_rank()" in text and "if _neuron_rank() == 0:" in text
    assert "print(_neuron_rank(), _neuron_world_size())" in text
    assert text.count('environ.get("RANK"') == 1  # in the helper only


@pytest.mark.torch  # runs the migrated file, which imports torch
@pytest.mark.parametrize("rank, world, printed", [("0", "2", True), ("1", "2", False),
                                                  (None, None, True)])
def test_the_helpers_answer_as_the_expressions_did(rank: str | None, world: str | None,
                                                   printed: bool,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in (("RANK", rank), ("WORLD_SIZE", world)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    text, _ = migrated(THRICE + "xm.master_print('hello')\n")
    assert "def _neuron_rank" in text
    space: dict[str, object] = {}
    exec(compile(text, "train.py", "exec"), space)
    assert space["rank"] == int(rank or 0) and space["size"] == int(world or 1)
    assert ("hello" in capsys.readouterr().out) == printed


NESTED = '''\
import torch_xla.core.xla_model as xm


def report(loss):
    if xm.is_master_ordinal(local=False):
        xm.master_print(loss)
        with open("log") as log:
            xm.master_print(loss, fd=log)
    else:
        xm.master_print("never")
    if xm.is_master_ordinal():
        xm.master_print(loss)

        def later():
            xm.master_print(loss)
'''


def test_a_master_print_under_the_same_master_test_is_not_guarded_twice() -> None:
    text, _ = migrated(NESTED)
    body = text.split("def report", 1)[1]
    assert "        print(loss)\n        with open" in body
    assert "            print(loss, file=log)" in body
    assert "    else:\n        if _neuron_rank() == 0:" in body  # the else is not the master
    # a local master is not the global one; a nested function may run anywhere
    assert body.count("if _neuron_rank() == 0:") == 4
