"""What the migration empties goes: an `if` whose body became `pass` over a test that only
reads is removed; one whose test may do something stays."""

from __future__ import annotations

from tests.conftest import migrated


def _migrate(source: str) -> str:
    return migrated(source)[0]


def test_an_if_emptied_by_the_migration_goes() -> None:
    new = _migrate("import torch_xla.core.xla_model as xm\n\n\ndef step(loss, args):\n"
                   "    loss.backward()\n    if args.sync and args.steps > 1:\n"
                   "        xm.mark_step()\n    return loss\n")
    assert "if args" not in new and "pass" not in new
    assert "    loss.backward()\n    return loss\n" in new


def test_an_if_whose_test_may_act_or_that_has_an_else_stays() -> None:
    new = _migrate("import torch_xla.core.xla_model as xm\n\n\ndef step(loss, flag):\n"
                   "    if ready():\n        xm.mark_step()\n"
                   "    if flag:\n        xm.mark_step()\n    else:\n        print(1)\n")
    assert "if ready():\n        pass\n" in new
    assert "if flag:\n        pass\n    else:\n        print(1)\n" in new


def test_an_if_that_was_empty_before_stays() -> None:
    source = ("import torch_xla.core.xla_model as xm\n\n\ndef step(flag):\n"
              "    if flag:\n        pass\n    xm.mark_step()\n")
    assert "if flag:\n        pass\n" in _migrate(source)


def test_branches_the_migration_made_the_same_become_one() -> None:
    new = _migrate("import torch_xla.core.xla_model as xm\n\n\ndef step(loss, version):\n"
                   "    if version >= 2.1:\n        xm.mark_step()\n        log(loss)\n"
                   "    else:\n        log(loss)\n    return loss\n")
    assert "if version" not in new and "else" not in new
    assert "    log(loss)\n    return loss\n" in new


def test_branches_both_emptied_go_with_their_test() -> None:
    new = _migrate("import torch_xla.core.xla_model as xm\n\n\ndef step(loss, flag):\n"
                   "    if flag:\n        xm.mark_step()\n    else:\n        xm.mark_step()\n"
                   "    return loss\n")
    assert "if flag" not in new and "pass" not in new


def test_an_elif_chain_is_left_to_the_author() -> None:
    new = _migrate("import torch_xla.core.xla_model as xm\n\n\ndef step(a, b):\n"
                   "    if a:\n        xm.mark_step()\n        log()\n    elif b:\n"
                   "        log()\n    else:\n        log()\n")
    assert "if a:\n        log()\n    elif b:" in new
