"""The readiness walk's shortcuts (rule scopes, candidate lines, the one-walk facts) change
nothing: the pruned walk reports what a walk handing every node to every rule reports, and the
facts read what `ast.walk` read."""

from __future__ import annotations

import ast
import pytest

from neuron_migrate.analysis import readiness
from neuron_migrate.analysis.readiness import check_tree
from neuron_migrate.analysis.readiness_plan import Scope, text_lines
from neuron_migrate.analysis.readiness_facts import facts_of
from neuron_migrate.engine.suppress import read_suppressions
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import FIXTURES

RULES = Registry(all_rules()).readiness
SOURCES = sorted((FIXTURES / "python").glob("*.before.py"))


def _stressed(data: bytes) -> bytes:
    """The file, then every function and class compiled with the neuron backend, and a
    training loop that calls the rest: the compiled-code and training-step rules get to
    look at most of it."""
    tree = ast.parse(data)
    functions = sorted({n.name for n in ast.walk(tree)
                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    classes = sorted({n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)})
    lines = ["", "import torch", "torch.compiler.set_default_backend('neuron')",
             *(f"torch.compile({name}, backend='neuron')" for name in functions[::2]),
             *(f"torch.compile({name}().to(device), mode='max-autotune')" for name in classes),
             "for batch in loader:", *(f"    {name}(batch)" for name in functions[1::2]),
             "    loss.backward()", "    total += loss.item()"]
    return data.rstrip() + "\n".join(lines).encode() + b"\n"


def _findings(path: str, data: bytes, engine: bool) -> tuple[object, ...]:
    ready = check_tree(path, data, ast.parse(data), RULES, read_suppressions(data), engine)
    return (tuple((f.line, f.column, f.rule_id, f.message) for f in ready.findings),
            tuple((s.lineno, tuple(o.lineno for o in outer)) for s, outer in ready.fixes))


@pytest.fixture
def full_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule asked about every node of its types, in every file its bytes allow."""
    for rule in RULES:
        for cls in type(rule).__mro__:
            if "candidates" in vars(cls):
                monkeypatch.setattr(cls, "candidates", lambda self, facts, data: None)
            if "applies" in vars(cls):
                monkeypatch.setattr(cls, "applies", lambda self, facts: True)
            if "scope" in vars(cls):
                monkeypatch.setattr(cls, "scope", Scope.ANYWHERE)


def _cases() -> list[tuple[str, bytes]]:
    cases = []
    for path in SOURCES:
        data = path.read_bytes()
        cases += [(path.name, data), (path.name + "+stress", _stressed(data))]
    return cases


def test_the_pruned_walk_reports_what_the_full_walk_reports(
        request: pytest.FixtureRequest) -> None:
    cases = _cases()
    pruned = [_findings(name, data, engine) for name, data in cases for engine in (False, True)]
    assert sum(len(found[0]) for found in pruned) > 100  # the rules do report here
    request.getfixturevalue("full_walk")
    full = [_findings(name, data, engine) for name, data in cases for engine in (False, True)]
    for (name, _), found, expected in zip([c for c in cases for _ in (0, 1)], pruned, full):
        assert found == expected, name


def test_a_later_import_deeper_in_the_file_wins_as_in_ast_walk() -> None:
    """`ast.walk` is breadth first: the import inside the function comes after the module's
    even though it comes first in the file."""
    facts = facts_of(ast.parse("def f():\n    import jax.numpy as np\n\n\nimport numpy as np\n"))
    assert facts.aliases["np"] == "jax.numpy"
    facts = facts_of(ast.parse("import numpy as np\nimport jax.numpy as np\n"))
    assert facts.aliases["np"] == "jax.numpy"


def test_a_loop_steps_only_on_backward_directly_in_its_body() -> None:
    source = ("for batch in loader:\n    loss.backward()\n"                    # 1: steps
              "for batch in loader:\n    hook = lambda: loss.backward()\n"     # 3: a lambda's
              "for epoch in range(3):\n    for batch in loader:\n        loss.backward()\n"  # 5
              "for batch in loader:\n    if ready:\n        loss.backward()\n"  # 8: steps
              "for batch in loader:\n    step(batch)\n"                       # 11: a step function
              "for batch in loader.backward():\n    pass\n"                   # 13: the header's
              "def step(batch):\n    loss.backward()\n")
    tree = ast.parse(source)
    facts = facts_of(tree)
    loops = {node.lineno: facts.loop_steps(node) for node in ast.walk(tree)
             if isinstance(node, ast.For)}
    assert loops == {1: True, 3: False, 5: False, 6: True, 8: True, 11: True, 13: False}
    assert facts.may_step()
    assert not facts_of(ast.parse("for b in loader:\n    f = lambda: loss.backward()\n")).may_step()


def test_text_lines_numbers_lines_as_python_does_and_matches_whole_names() -> None:
    data = (b"import torch\r\nx = torch.fft.rfft(a)\ry = torch.sparse_coo_tensor(i)\n"
            b"z = fftx + nfft  # no\nw = torch.\\\n    fft.fft(x)\n")
    assert text_lines(data, {"fft": False, "sparse_": True}) == {2, 3, 6}
    tree = ast.parse(data)
    assert [s.lineno for s in tree.body] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("seed", range(3))
def test_text_lines_finds_the_lines_a_look_behind_for_whole_names_finds(seed: int) -> None:
    """The search skips to the bytes a word can start with and drops the matches inside a
    longer name afterwards; a search that asks for the name's start first is the oracle."""
    import random
    import re

    from neuron_migrate.analysis.readiness_plan import line_numbers

    chooser = random.Random(seed)
    pieces = ["aa", "a", "fft", "fftx", "_", "x", "1", " ", ".", "\n", "\r\n", "é", "sparse_"]
    for _ in range(300):
        data = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 30))).encode()
        words = {w: chooser.random() < 0.5 for w in chooser.sample(["aa", "a", "fft", "sparse_",
                                                                     "x1", "_a"], 3)}
        pattern = b"|".join(re.escape(w.encode()) + (b"" if prefix else rb"(?![A-Za-z0-9_])")
                            for w, prefix in sorted(words.items()))
        found = re.finditer(rb"(?<![A-Za-z0-9_])(?:" + pattern + rb")", data)
        assert text_lines(data, words) == line_numbers(data, (m.start() for m in found)), \
            (data, words)


def test_a_file_no_rule_can_report_in_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile-backend file with no neuron compile call and nothing compiled: every
    wanted rule is ruled out by the facts, so no statement is looked at."""
    walked: list[ast.stmt] = []
    statement = readiness._Walk.statement

    def spy(self, node, *args):  # type: ignore[no-untyped-def]
        walked.append(node)
        statement(self, node, *args)

    monkeypatch.setattr(readiness._Walk, "statement", spy)
    data = (b"import torch\nimport torch_neuronx  # compile it later\n\n"
            b"x = torch.ones(3).cpu()\nprint(x.item())\n")
    assert all(r.wanted(data) for r in RULES if r.id in ("NM920", "NM930", "NM931"))
    assert _findings("a.py", data, False) == ((), ())
    assert walked == []
    found, _ = _findings("b.py", data + b"y = torch.compile(f, backend='neuron')\n", False)
    assert [f[2] for f in found] == ["NM920"]  # type: ignore[index]
    assert len(walked) == 5  # the module's statements, only the last one's expressions


def test_the_facts_read_the_same_whatever_the_statements_nest_in() -> None:
    """Imports, classes and functions in every kind of block are found."""
    source = ("try:\n    import torch as t\nexcept ImportError:\n    import numpy as t\n"
              "with ctx:\n    class Net:\n        def forward(self): ...\n"
              "match x:\n    case 1:\n        from torch import compile as tc\n"
              "while True:\n    def step(): ...\n")
    facts = facts_of(ast.parse(source))
    assert facts.aliases == {"t": "numpy", "tc": "torch.compile"}
    assert sorted(facts.functions) == ["forward", "step"]
