"""The name guard: output that uses a name whose binding the rewrite
removed is never written, and the engine keeps an import while anything uses it."""

from __future__ import annotations

import ast
from pathlib import Path

import neuron_migrate.engine.migrate
import neuron_migrate.engine.rewrite
import pytest
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.engine.nameguard import lost_names, original_line
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

from tests.conftest import cli


def _lost(before: str, after: str) -> list[tuple[str, int, int, bool]]:
    """(name, the line of the original that uses it, the line that bound it, exported)"""
    return [(n.name, original_line(before.encode(), after.encode(), n.line), n.bound_at,
             n.exported) for n in lost_names(ast.parse(before), after.encode())]


@pytest.mark.parametrize("before, after, expected", [
    pytest.param("import m\n\ndef f():\n    return m.x\n",
                 "\n\ndef f():\n    return m.x\n", [("m", 4, 1, False)], id="removed-import"),
    pytest.param("import a.b\nprint(a.b)\n", "print(a.b)\n", [("a", 2, 1, False)],
                 id="dotted-import-binds-its-root"),
    pytest.param("def f():\n    import m\n    return m\nm = 1\n",
                 "def f():\n    return m\nm = 1\n", [("m", 3, 2, False)],
                 id="local-binding-lost-although-the-module-binds-it"),
    pytest.param("x = 1\n__all__ = ['x', 'y']\n", "__all__ = ['x', 'y']\n",
                 [("x", 2, 1, True)], id="all-entry"),
    pytest.param("import m\n__all__ = []\n__all__ += ['m']\n", "__all__ = []\n__all__ += ['m']\n",
                 [("m", 3, 1, True)], id="all-extended"),
    pytest.param("import m\n__all__ = []\n__all__.append('m')\n",
                 "__all__ = []\n__all__.append('m')\n", [("m", 3, 1, True)], id="all-appended"),
    pytest.param("import m\ndef f() -> 'm.T':\n    pass\n", "def f() -> 'm.T':\n    pass\n",
                 [("m", 2, 1, False)], id="string-annotation"),
    pytest.param("import m\nclass C:\n    m = 1\n    def f(self):\n        return m\n",
                 "class C:\n    m = 1\n    def f(self):\n        return m\n",
                 [("m", 5, 1, False)], id="class-binding-is-not-seen-by-methods"),
    pytest.param("def f():\n    global g\n    g = 1\ndef h():\n    return g\n",
                 "def f():\n    pass\ndef h():\n    return g\n", [("g", 5, 3, False)],
                 id="global-declaration"),
    # every kind of binding, with the line that bound it
    pytest.param("def helper():\n    pass\nhelper()\n", "helper()\n", [("helper", 3, 1, False)],
                 id="function"),
    pytest.param("class K:\n    pass\nK()\n", "K()\n", [("K", 3, 1, False)], id="class"),
    pytest.param("def f(\n        m):\n    return m\n", "def f(\n        ):\n    return m\n",
                 [("m", 3, 1, False)], id="parameter-bound-at-its-def"),
    pytest.param("try:\n    pass\nexcept E as err:\n    print(err)\n",
                 "try:\n    pass\nexcept E:\n    print(err)\n", [("err", 4, 3, False)],
                 id="except-as"),
    pytest.param("match v:\n    case [x]:\n        print(x)\n",
                 "match v:\n    case [_]:\n        print(x)\n", [("x", 3, 2, False)],
                 id="match-capture"),
    pytest.param("if (n := 3):\n    print(n)\n", "if 3:\n    print(n)\n", [("n", 2, 1, False)],
                 id="walrus"),
    pytest.param("x: int = 1\nprint(x)\n", "print(x)\n", [("x", 2, 1, False)],
                 id="annotated-assignment"),
    pytest.param("from m import T\nx: T\n", "x: T\n", [("T", 2, 1, False)],
                 id="name-in-a-variable-annotation"),
    pytest.param("from m import y\nx: int = y\n", "x: int = y\n", [("y", 2, 1, False)],
                 id="value-of-an-annotated-assignment"),
    pytest.param("import a.b.c\nprint(a.b.c)\n", "print(a.b.c)\n", [("a", 2, 1, False)],
                 id="three-part-import-binds-its-root"),
    pytest.param("import m\ndef f(*, k=m):\n    pass\n", "def f(*, k=m):\n    pass\n",
                 [("m", 2, 1, False)], id="keyword-only-default"),
    pytest.param("import m\ndef f(a: m.T):\n    pass\n", "def f(a: m.T):\n    pass\n",
                 [("m", 2, 1, False)], id="parameter-annotation"),
    pytest.param("from m import T\ndef f(a: T):\n    pass\n", "def f(a: T):\n    pass\n",
                 [("T", 2, 1, False)], id="parameter-annotation-a-plain-name"),
    pytest.param("import m\nf = lambda: m\n", "f = lambda: m\n", [("m", 2, 1, False)],
                 id="used-in-a-lambda"),
    pytest.param("import m\nv = [y for x in a for y in m]\n", "v = [y for x in a for y in m]\n",
                 [("m", 2, 1, False)], id="iterable-of-a-later-generator"),
    pytest.param("import m\nv = [m for _ in a]\n", "v = [m for _ in a]\n", [("m", 2, 1, False)],
                 id="comprehension-element"),
    pytest.param("import m\nv = {m: 1 for _ in a}\n", "v = {m: 1 for _ in a}\n",
                 [("m", 2, 1, False)], id="comprehension-key"),
    pytest.param("import m\nv = {1: m for _ in a}\n", "v = {1: m for _ in a}\n",
                 [("m", 2, 1, False)], id="comprehension-value"),
    pytest.param("import m\nimport x\nv = [x + y for x in a for y in b]\nprint(m)\n",
                 "import x\nv = [x + y for x in a for y in b]\nprint(m)\n", [("m", 4, 1, False)],
                 id="every-generator-binds-its-own-target"),
    pytest.param("import m\nm.a()\nm.b()\n", "m.a()\nm.b()\n", [("m", 2, 1, False)],
                 id="the-first-use-is-named"),
    pytest.param("import m\nfrom n import *\nm()\n", "from n import *\nm()\n",
                 [("m", 3, 1, False)], id="beside-a-star-import"),
    # scopes
    pytest.param("def f():\n    import m\n    def g():\n        return m\n    return g\n",
                 "def f():\n    def g():\n        return m\n    return g\n",
                 [("m", 4, 2, False)], id="bound-in-the-enclosing-function"),
    pytest.param("def f():\n    m = 1\n    return m\n",
                 "def f():\n    def _helper():\n        return m\n    return _helper()\n",
                 [("m", 2, 2, False)], id="a-new-nested-helper-looks-from-its-known-ancestor"),
    pytest.param("import m\ndef f():\n    global m\n    return m\n",
                 "def f():\n    global m\n    return m\n", [("m", 4, 1, False)],
                 id="declared-global-and-bound-at-module-level"),
    pytest.param("class A:\n    m = 1\nclass B:\n    import m\n    x = m\n",
                 "class A:\n    m = 1\nclass B:\n    x = m\n", [("m", 5, 4, False)],
                 id="two-classes-are-two-scopes"),
    # from Python 3.12 the compiler enters a comprehension's loop variable in the enclosing
    # function's table; a nested function's `m` still means the module's
    pytest.param("m = 1\ndef f(xs):\n    a = [m for m in xs]\n    def g():\n        return m\n"
                 "    return g\n",
                 "def f(xs):\n    a = [m for m in xs]\n    def g():\n        return m\n"
                 "    return g\n",
                 [("m", 5, 1, False)], id="an-inlined-comprehension-binds-nothing-outside"),
    pytest.param("import a\nimport b\ndef f():\n    return a\nprint(b)\n",
                 "def f():\n    return a\nprint(b)\n", [("a", 4, 1, False), ("b", 5, 2, False)],
                 id="in-line-order-across-scopes"),
    # `__all__`
    pytest.param("import m\n__all__ = []\n__all__.extend(['m'])\n",
                 "__all__ = []\n__all__.extend(['m'])\n", [("m", 3, 1, True)], id="all-extend"),
])
def test_lost_names(before: str, after: str, expected: list) -> None:
    assert _lost(before, after) == expected


@pytest.mark.parametrize("before, after", [
    pytest.param("import m\nm.f()\n", "import torch\n\ndef _h(m):\n    return m\n_h(1)\n",
                 id="a-helper-binds-its-own-parameter"),
    pytest.param("import m\n", "print(len([]))\n", id="builtins"),
    pytest.param("from m import *\nf()\n", "f()\n", id="star-import-binds-nothing-known"),
    pytest.param("import m\nx = [m for m in range(3)]\n", "x = [m for m in range(3)]\n",
                 id="comprehension-variable"),
    pytest.param("import m\nf = lambda m: m\n", "f = lambda m: m\n", id="lambda-parameter"),
    pytest.param("import m\nclass C:\n    m = 1\n    x = m\n", "class C:\n    m = 1\n    x = m\n",
                 id="a-class-body-sees-its-own-names"),
    pytest.param("import m\nnames = ['m']\n", "names = ['m']\n", id="a-list-that-is-not-all"),
    pytest.param("import m\n__all__ = list(names) + ['x']\n__all__ += ['x', y]\nx = 1\nprint(m)\n",
                 "__all__ = list(names) + ['x']\n__all__ += ['x', y]\nx = 1\nprint(1)\n",
                 id="all-built-from-other-values"),
    pytest.param("def f():\n    global q\n    return q\nimport m\nm()\n",
                 "def f():\n    global q\n    return q\nm = 1\nm()\n",
                 id="declared-global-bound-nowhere"),
    pytest.param("def f():\n    x: int = 1\n    return x\n", "pass\n",
                 id="an-annotated-scope-removed-whole"),
    pytest.param("import m\ndef f():\n    m = 2\n    return m\n",
                 "def f():\n    m = 2\n    return m\n", id="local-shadow"),
    pytest.param("def f():\n    x = 1\n    def g():\n        nonlocal x\n        x = 2\n"
                 "    return x\n",
                 "def f():\n    x = 1\n    def g():\n        nonlocal x\n        x = 2\n"
                 "    return x\n", id="nonlocal"),
    pytest.param("import m\n__all__ = ['m']\n", "import m\n__all__ = ['m']\n", id="kept-export"),
    pytest.param("__all__ = ['late']\ndef late():\n    pass\n",
                 "__all__ = ['late']\ndef late():\n    pass\n", id="export-bound-later"),
])
def test_nothing_lost(before: str, after: str) -> None:
    assert _lost(before, after) == []


def _keep_nothing(imports, used, registry, silenced=lambda rule_id, unit: False,
                  kept=lambda binding: None):
    """Import bookkeeping that lost track of every use: the class of bug the guard exists for."""
    return _plan_removals(imports, set(), registry, silenced)


_plan_removals = neuron_migrate.engine.rewrite.plan_removals


def test_guard_refuses_output_that_uses_a_removed_import(in_tmp: Path, monkeypatch) -> None:
    monkeypatch.setattr(neuron_migrate.engine.rewrite, "plan_removals", _keep_nothing)
    source = ("import torch_xla.core.xla_model as xm\n\n\n"
              "def main():\n    device = xm.xla_device()\n    return xm.some_unmapped_api(device)\n")
    (in_tmp / "train.py").write_text(source)
    run = cli("apply", "train.py")
    assert run.exit_code == 2
    assert "train.py:6: `xm` is still used here" in run.stderr
    assert "binding at line 1 was removed" in run.stderr and "was not written" in run.stderr
    assert (in_tmp / "train.py").read_text() == source


def test_guard_refuses_an_export_that_lost_its_binding(in_tmp: Path, monkeypatch) -> None:
    monkeypatch.setattr(neuron_migrate.engine.rewrite.ModuleRewriter, "_kept",
                        lambda self: lambda binding: None)
    source = "from torch_xla.core.xla_model import xla_device\n\n__all__ = ['xla_device']\n"
    (in_tmp / "api.py").write_text(source)
    run = cli("apply", "api.py")
    assert run.exit_code == 2
    assert "api.py:3: `__all__` lists `xla_device`" in run.stderr
    assert (in_tmp / "api.py").read_text() == source


def test_report_only_check_guards_only_files_that_change(in_tmp: Path, monkeypatch) -> None:
    guarded: list[bytes] = []
    real = neuron_migrate.engine.migrate.lost_names

    def spy(original, new, path="<rewritten>", source=None):
        guarded.append(new)
        return real(original, new, path, source)

    monkeypatch.setattr(neuron_migrate.engine.migrate, "lost_names", spy)
    (in_tmp / "train.py").write_text("import torch_xla.core.xla_model as xm\nxm.mark_step()\n")
    (in_tmp / "review.py").write_text("import torch_xla.debug.metrics as met\n"
                                      "print(met.counter_value('ExecuteTime'))\n")
    run = cli("check", "train.py", "review.py", "-j", "1")
    assert run.exit_code == 1 and "NM110" in run.stdout and "review.py" in run.stdout
    assert len(guarded) == 1 and b"mark_step" not in guarded[0]


def _migrate(source: str, unsafe: bool = False):
    registry = Registry(all_rules())
    result = migrate_source("t.py", source.encode(), registry)
    assert result.error is None, result.error
    return result


def test_xla_call_inside_a_rewritten_calls_arguments_is_reported_and_its_import_kept() -> None:
    result = _migrate("import torch_xla.core.xla_model as xm\n"
                      "import torch_xla.debug.metrics as met\n\n"
                      "xm.master_print(met.counter_value('ExecuteTime'))\n")
    new = result.new_source.decode()  # a metric query stays for review (NM707)
    assert "import torch_xla.debug.metrics as met\n" in new
    assert "print(met.counter_value('ExecuteTime'))" in new
    found = {(f.rule_id, f.line, f.column) for f in result.findings}
    assert ("NM707", 4, 17) in found  # the inner call, at its own column


@pytest.mark.parametrize("listed", ["__all__ = [\"xla_device\", \"mark_step\"]\n",
                                    "__all__ = []\n__all__.extend([\"xla_device\", \"mark_step\"])\n",
                                    "__all__ = [\"xla_device\"]\n__all__.append(\"mark_step\")\n"])
def test_names_in_all_keep_their_imports_and_are_reported(listed: str) -> None:
    source = "from torch_xla.core.xla_model import xla_device, mark_step\n\n" + listed
    result = _migrate(source)
    assert result.new_source is None
    kept = [f for f in result.findings if f.rule_id == "NM701"]
    assert [f.message.split(":")[0] for f in kept] == [
        "`from torch_xla.core.xla_model import xla_device` stays",
        "`from torch_xla.core.xla_model import mark_step` stays"]
    assert all("__all__" in f.message and not f.applied for f in kept)


def test_guarded_import_named_in_all_stays() -> None:
    source = ("try:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n"
              "    xm = None\n\n__all__ = [\"xm\"]\n\nxm.mark_step()\n")
    result = _migrate(source)
    assert result.new_source.decode() == (
        "try:\n    import torch_xla.core.xla_model as xm\nexcept ImportError:\n"
        "    xm = None\n\n__all__ = [\"xm\"]\n")
    assert [f.rule_id for f in result.findings if not f.applied] == ["NM701"]


def test_import_used_only_in_a_string_annotation_is_kept_and_reported() -> None:
    source = ("import torch_xla.core.xla_model as xm\n"
              "from torch_xla.distributed.spmd import XLAShardedTensor\n\n\n"
              "def shard(t) -> \"XLAShardedTensor\":\n    xm.mark_step()\n    return t\n")
    result = _migrate(source)
    new = result.new_source.decode()
    assert new.startswith("from torch_xla.distributed.spmd import XLAShardedTensor\n")
    assert "mark_step" not in new
    kept = [f for f in result.findings if f.rule_id == "NM701"]
    assert len(kept) == 1 and "still used at line 5" in kept[0].message


_LOST_CASES = [p.values[:2] for p in test_lost_names.pytestmark[0].args[1]]


@pytest.mark.parametrize("before, after", _LOST_CASES)
def test_symbol_table_pass_alone_sees_every_lost_name(before: str, after: str) -> None:
    """The fast pass (the compiler's symbol tables) decides whether the new module is parsed
    at all: it must flag everything the full pass finds."""
    from neuron_migrate.engine import nameguard

    tree = ast.parse(before)
    table = nameguard._table(tree)
    fast = nameguard._symbol_table(after.encode(), "t.py", table)
    found = {n.name for n in nameguard._lost(table, fast, nameguard.exports(tree))}
    assert found >= {n.name for n in lost_names(tree, after.encode())} != set()


def test_a_file_with_nothing_lost_is_never_parsed_again(monkeypatch) -> None:
    import neuron_migrate.engine.nameguard

    def refuse(*args, **kwargs):
        raise AssertionError("parsed the new module although nothing was lost")

    monkeypatch.setattr(neuron_migrate.engine.nameguard.ast, "parse", refuse)
    original = ast.Module(body=[], type_ignores=[])
    assert lost_names(original, b"import torch\n\nx = torch.ones(2)\n") == []


@pytest.mark.parametrize("before, after", _LOST_CASES)
def test_reading_only_the_originals_bindings_finds_the_same(before: str, after: str) -> None:
    """Given the original's bytes, the guard skips what the original only loads: the same
    names, lines and bindings come out."""
    tree = ast.parse(before)
    assert lost_names(tree, after.encode(), "t.py", before.encode()) == \
        lost_names(tree, after.encode(), "t.py")


@pytest.mark.parametrize("before, after", [
    ("print(y := 1)\nprint(y)\n", "print(1)\nprint(y)\n"),
    ("def f():\n    [z for x in (1,) if (z := x)]\n    return z\n", "def f():\n    return z\n"),
    ("g = lambda: (w := 1)\ndef h():\n    return w\n", "g = lambda: 1\ndef h():\n    return w\n"),
])
def test_a_binding_inside_an_expression_is_still_read(before: str, after: str) -> None:
    """`:=` binds from inside an expression read as a value: such a file's expressions are
    all walked."""
    tree = ast.parse(before)
    found = lost_names(tree, after.encode(), "t.py", before.encode())
    assert found == lost_names(tree, after.encode(), "t.py")
    assert [n.name for n in found] != []


_SCOPES = """\
import os, a.b as ab
from m import (x as y, z)
G = 1
def f(p, /, q=G, *args, r: "T" = 2, **kw) -> "R":
    global G, H
    G = H = 3
    l = lambda u, v=os: u + v + q
    c = [i * j for i in args if i for j in kw]
    d = {k: v for k, v in kw.items()}
    s = {w for w in z}
    gen = (t for t in y)
    late = lambda: (lambda: [n + outer for n in range(3)])
    def inner():
        nonlocal l
        l = 1
        return p, c, d, s, gen
    class K(ab):
        attr = q
        def m(self):
            return attr
    try:
        pass
    except Exception as e:
        print(e)
    with open(f) as fh:
        del fh
    for a1, (a2, a3) in kw:
        pass
    if (w := len(args)) > 1:
        return w
    return inner
async def co():
    async for x2 in co():
        await x2
class C(object, metaclass=type):
    x = 1
    def f(self):
        return x
outer = [o for o in range(2)]
"""


def test_the_symbol_table_pass_reads_the_same_scopes_as_the_full_pass() -> None:
    """The fast pass stands in for the full one whenever it finds nothing lost: scope by
    scope, the same kind, the same names bound and loaded, the same `global` and `nonlocal`
    declarations (the module's own `global` set aside: it declares nothing there)."""
    from neuron_migrate.engine import nameguard

    tree = ast.parse(_SCOPES)
    full = nameguard._table(tree)
    fast = nameguard._symbol_table(_SCOPES.encode(), "t.py", nameguard._table(tree, True))

    def shape(table: dict) -> dict:
        return {key: (scope.kind, set(scope.bound), set(scope.loads),
                      scope.globals if key else set(), scope.nonlocals)
                for key, scope in table.items()}

    assert shape(fast) == shape(full)
    assert {("f",), ("f", "inner"), ("f", "K"), ("f", "K", "m"), ("co",), ("C",),
            ("C", "f")} == set(full) - {()}


def test_output_the_symbol_tables_refuse_is_read_by_the_full_pass() -> None:
    """`nonlocal` with nothing to bind it parses but has no symbol table: the full pass
    decides."""
    before = "import m\ndef f():\n    return m\n"
    after = "def f():\n    nonlocal q\n    return m\n"
    assert _lost(before, after) == [("m", 3, 1, False)]


@pytest.mark.parametrize("before, after, line, expected", [
    ("a\nb\nc\nd\n", "a\nb\nc\nd\n", 3, 3),
    ("a\nb\nc\nd\n", "a\nX\nY\nd\n", 3, 2),  # replaced: the first line it replaced
    ("a\nb\nc\nd\n", "a\nd\n", 2, 4),  # kept, after lines removed
    ("a\nb\nc\nd\n", "a\nb\nNEW\nc\nd\n", 4, 3),  # kept, after a line inserted
    ("a\nb\n", "a\nb\n", 7, 7),  # past the end: itself
])
def test_original_line_maps_a_line_of_the_output_to_the_original(
        before: str, after: str, line: int, expected: int) -> None:
    assert original_line(before.encode(), after.encode(), line) == expected
