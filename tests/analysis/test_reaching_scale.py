"""The questions the rules ask of `analysis.reaching` and `analysis.training` cost a file of
N statements work in proportion to N. A rule asks about the same name at many statements
(the function `f` at each of N `f(model)` calls, the optimizer at each of N steps), and a flow
over the whole scope for each question made such a file cost N². The work is counted (the
statements the flows pass, the questions asked), not timed."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from neuron_migrate.analysis import reaching

from tests.conftest import PYTHON_FIXTURES, fixture_id, migrated

_HEAD = ("import torch\nimport torch_xla.core.xla_model as xm\nfrom torch import nn\n\n"
         "class Net(nn.Module):\n    pass\n\n")


def _callee_then_placed(n: int) -> str:
    """Each model handed to a function of the file, then put on the device."""
    return _HEAD + "def f(m):\n    return m\n\n" + "".join(
        f"m{i} = Net()\nf(m{i})\nm{i}.to(xm.xla_device())\n" for i in range(n))


def _parameters_then_placed(n: int) -> str:
    """Each model's parameters handed to a function of the file: each placement asks whether
    the module's own code trains, through every call of `f` in it."""
    return _HEAD + "def f(m):\n    return m\n\n" + "".join(
        f"m{i} = Net()\nf(m{i}.parameters())\nm{i}.to(xm.xla_device())\n" for i in range(n))


def _functions_called_once(n: int) -> str:
    """N functions, each called with its own model: N names, each asked about once, and each
    flow passes the statements that cannot bind its name together."""
    return _HEAD + "".join(f"def f{i}(m):\n    return m\n\n" for i in range(n)) + "".join(
        f"m{i} = Net()\nf{i}(m{i})\nm{i}.to(xm.xla_device())\n" for i in range(n))


def _optimizer_steps(n: int) -> str:
    """An optimizer step after each of N constructions of the model and its optimizer."""
    return _HEAD + "from torch.nn.parallel import DistributedDataParallel as DDP\n\n" + "".join(
        "model = DDP(Net())\nopt = torch.optim.SGD(model.parameters())\n"
        "xm.optimizer_step(opt)\n" for _ in range(n))


def _work(monkeypatch: pytest.MonkeyPatch, source: str) -> tuple[int, int]:
    """The statements the flows pass and the statements asked about, migrating `source`."""
    passed, asked = [0], [0]
    statement, ancestors = reaching._Flow.statement, reaching.ancestors

    def counted_statement(self, stmt, state):  # type: ignore[no-untyped-def]
        passed[0] += 1
        return statement(self, stmt, state)

    def counted_ancestors(tree, at):  # type: ignore[no-untyped-def]
        asked[0] += 1
        return ancestors(tree, at)

    with monkeypatch.context() as patch:
        patch.setattr(reaching._Flow, "statement", counted_statement)
        patch.setattr(reaching, "ancestors", counted_ancestors)
        migrated(source)
    return passed[0], asked[0]


@pytest.mark.parametrize("shape", [_callee_then_placed, _parameters_then_placed,
                                   _functions_called_once, _optimizer_steps],
                         ids=lambda shape: shape.__name__)
def test_work_grows_linearly_with_the_statements(monkeypatch: pytest.MonkeyPatch,
                                                 shape: Callable[[int], str]) -> None:
    small = _work(monkeypatch, shape(30))
    large = _work(monkeypatch, shape(60))
    assert small[0] > 0 and small[1] > 0  # the rules do ask: the shape exercises the flows
    for before, after in zip(small, large):
        assert after <= 2.5 * before  # twice the statements: N² would be four times the work


def _unkept(tree: ast.Module, at: ast.stmt, target: str) -> reaching.State:
    """`reaching` by a flow of its own for the one question, nothing kept between questions."""
    chain = reaching.ancestors(tree, at)
    if chain is None or reaching._declared_elsewhere(tree, target):
        return frozenset({reaching.UNKNOWN})
    owner = next((n for n in reversed(chain) if isinstance(n, (*reaching._FUNCTIONS, ast.Module))),
                 tree)
    state = reaching._Flow(target, at, None).found_in(owner)
    if reaching.UNKNOWN not in state:
        return state
    outer = reaching._outer(chain, owner, target, None)
    return (state - {reaching.UNKNOWN}) | outer


@pytest.mark.parametrize("path", PYTHON_FIXTURES, ids=fixture_id)
def test_kept_answers_are_the_answers_of_a_flow_of_their_own(path: Path) -> None:
    """Every name each statement of a fixture reads, asked at that statement: the answer
    built from the module's recorded flow is the one a flow for that question alone gives."""
    tree = ast.parse(path.read_bytes())
    asked = 0
    for at in ast.walk(tree):
        if not isinstance(at, ast.stmt):
            continue
        names = {reaching.ast_dotted(n) for n in reaching.expressions(at)
                 if isinstance(n, (ast.Name, ast.Attribute))} - {None}
        for name in sorted(names):  # type: ignore[type-var]
            assert reaching.reaching(tree, at, name) == _unkept(tree, at, name), (at.lineno, name)
            asked += 1
    assert asked or not tree.body
