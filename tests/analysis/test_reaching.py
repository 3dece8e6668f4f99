"""`analysis.reaching`: which assignments can be live at a statement. A proof built on it must
never hold where some path breaks it, so every jump is followed."""

from __future__ import annotations

import ast
import textwrap

import pytest

from neuron_migrate.analysis.reaching import UNKNOWN, definitions_of, reaching


def _live(source: str, target: str = "model") -> set[str]:
    """The assigned expressions (as source) of `target` live at the line marked `# here`."""
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "# here" in text)
    at = next(n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line)
    found = reaching(tree, at, target)
    return {"?" if d is UNKNOWN else ast.unparse(d.value) if d.value else "<bound>"
            for d in found}


@pytest.mark.parametrize("source, expected", [
    ("""
     def f():
         model = Net()
         model = DDP(model)
         use(model)  # here
     """, {"DDP(model)"}),
    ("""
     def f(flag):
         model = Net()
         if flag:
             model = DDP(model)
         use(model)  # here
     """, {"Net()", "DDP(model)"}),
    ("""
     def f(flag):
         model = Net()
         for x in data:
             use(model)  # here
             model = DDP(model)
     """, {"Net()", "DDP(model)"}),
    ("""
     def f(flag):
         model = Net()
         while True:
             if flag:
                 break
             model = DDP(model)
         use(model)  # here
     """, {"Net()", "DDP(model)"}),
    ("""
     def f():
         model = Net()
         try:
             model = DDP(model)
         except RuntimeError:
             pass
         use(model)  # here
     """, {"Net()", "DDP(model)"}),
    ("""
     def f(model):
         use(model)  # here
     """, {"?"}),
    ("""
     def f(items):
         model = Net()
         if any((model := m) for m in items):
             pass
         use(model)  # here
     """, {"Net()", "<bound>"}),
    ("""
     model = Net()
     model = DDP(model)

     def f():
         use(model)  # here
     """, {"DDP(model)"}),
    ("""
     model = Net()

     def f():
         use(model)  # here

     f()
     model = DDP(model)
     """, {"Net()", "DDP(model)"}),
    ("""
     def outer(flag):
         model = Net()
         model = DDP(model)

         def inner():
             use(model)  # here
         return inner
     """, {"DDP(model)"}),
    ("""
     def outer(model):
         def inner():
             use(model)  # here
         model = DDP(model)
         return inner
     """, {"?"}),
    ("""
     model = Net()

     def f(items):
         use(model)  # here
         if any((model := m) for m in items):
             pass
     """, {"?"}),
    ("""
     model = Net()

     def f(items):
         use(model)  # here
         for model in items:
             pass
     """, {"?"}),
])
def test_every_path_is_followed(source: str, expected: set[str]) -> None:
    assert _live(source) == expected


def test_an_early_return_leaves_its_value_for_the_other_methods() -> None:
    source = """
    class T:
        def __init__(self, plain):
            self.model = Net()
            if plain:
                return
            self.model = DDP(self.model)

        def step(self):
            use(self.model)  # here
    """
    assert _live(source, "self.model") == {"Net()", "DDP(self.model)"}


def test_an_attribute_set_by_two_methods_is_unknown() -> None:
    source = """
    class T:
        def __init__(self):
            self.model = DDP(Net())

        def reset(self):
            self.model = Net()

        def step(self):
            use(self.model)  # here
    """
    assert _live(source, "self.model") == {"?"}


def test_a_global_statement_anywhere_makes_the_name_unknown() -> None:
    source = """
    model = DDP(Net())

    def reset():
        global model
        model = Net()

    def f():
        use(model)  # here
    """
    assert _live(source) == {"?"}


def test_definitions_of_finds_functions_and_methods_only() -> None:
    source = textwrap.dedent("""
    def step(x):
        return x

    class T:
        def fn(self):
            return 1

        def build(self, other):
            a = compile(step)
            b = compile(self.fn)
            c = compile(other)  # here
    """)
    tree = ast.parse(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "# here" in text)
    at = next(n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line)
    step = definitions_of(tree, at, "step")
    assert step is not None and [d.name for d in step] == ["step"]  # type: ignore[union-attr]
    method = definitions_of(tree, at, "self.fn")
    assert method is not None and [d.name for d in method] == ["fn"]  # type: ignore[union-attr]
    assert definitions_of(tree, at, "other") is None


def test_a_name_no_def_or_lambda_can_bind_is_answered_without_the_flow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`definitions_of` is asked once per call that passes a model; walking the whole scope for
    each made a file of many `model = ...; log(model)` pairs quadratic. A name that no `def` and
    no lambda of the file can be is answered at once; one that may be is still followed."""
    import neuron_migrate.analysis.reaching as module
    flows: list[str] = []
    real = module._Flow.found_in

    def counted(self: module._Flow, owner: ast.AST) -> frozenset:
        flows.append(self.target)
        return real(self, owner)

    monkeypatch.setattr(module._Flow, "found_in", counted)
    tree = ast.parse("model = 1\nlog(model)\ndef train(m):\n    return m\ntrain(model)\n")
    log_call, train_call = tree.body[1], tree.body[3]
    assert definitions_of(tree, log_call, "log") is None
    assert flows == []
    found = definitions_of(tree, train_call, "train")
    assert found is not None and [f.name for f in found] == ["train"]
    assert flows == ["train"]
    with_lambda = ast.parse("log = lambda m: m\nmodel = 1\nlog(model)\n")
    assert definitions_of(with_lambda, with_lambda.body[2], "log") is not None
