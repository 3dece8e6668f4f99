"""NM102 renames a device string everywhere its value flows, or nowhere: the flow analysis
(`neuron_migrate.analysis.flow`) and the guarantee, checked on the fixtures and on generated programs."""

from __future__ import annotations

import ast
import sys
import textwrap
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_migrate.analysis.analyse import analyse
from neuron_migrate.analysis.flow import Flow, string_flows
from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules
from tests.conftest import PYTHON_FIXTURES, fixture_id

REGISTRY = Registry(all_rules())
ONLY_NM102 = Registry(all_rules(), Options(select=frozenset({"NM102"})))


def _flows(source: str | ast.Module, registry: Registry = REGISTRY) -> list[Flow]:
    tree = ast.parse(source) if isinstance(source, str) else source
    analysis = analyse(tree, registry.interesting_string, registry.star_names,
                       registry.watched_roots, registry.device_calls)
    flows = string_flows(analysis, registry.flow_string, registry.device_calls)
    found = {id(flows.of(n)): flows.of(n) for n in _literals(tree) if flows.of(n) is not None}
    return list(found.values())  # type: ignore[arg-type]


def _literals(tree: ast.AST) -> list[ast.expr]:
    """String constants and f-strings (not the texts inside them), in an order that only
    depends on the tree's shape."""
    parts = {id(p) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for p in n.values}
    return [n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) or
            isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts]


def _groups(source: str) -> list[list[tuple[int, str]]]:
    """Each flow as the (line, text) of its literals, sorted."""
    source = textwrap.dedent(source)
    groups = []
    for flow in _flows(source):
        groups.append(sorted((n.lineno, ast.get_source_segment(source, n) or "")
                             for n in flow.literals))
    return sorted(groups)


def _flow_at(source: str, line: int) -> Flow:
    source = textwrap.dedent(source)
    for flow in _flows(source):
        if any(n.lineno == line for n in flow.literals):
            return flow
    raise AssertionError(f"no flow with a literal on line {line}")


# --------------------------------------------------------------------- the flow analysis
def test_a_module_constant_read_in_a_function_is_one_flow_with_its_comparison() -> None:
    groups = _groups("""\
        DEVICE = "xla"
        def f(x):
            return x == DEVICE or DEVICE.startswith("xla:")
    """)
    assert groups == [[(1, '"xla"'), (3, '"xla:"')]]


def test_a_parameter_meets_its_default_and_every_argument_passed_to_it() -> None:
    groups = _groups("""\
        def resolve(requested="xla"):
            if requested in ("xla", "cuda"):
                return 1
        resolve("xla:0")
        resolve(requested=f"xla:{3}")
        other = "xla"
    """)
    assert groups == [[(1, '"xla"'), (2, '"xla"'), (4, '"xla:0"'), (5, 'f"xla:{3}"')],
                      [(6, '"xla"')]]


def test_returned_values_reach_the_names_they_are_unpacked_into() -> None:
    groups = _groups("""\
        def pick():
            return 0, "xla"
        device, kind = pick()
        if kind == "xla":
            pass
    """)
    assert groups == [[(2, '"xla"'), (4, '"xla"')]]


def test_an_argparse_option_is_its_default_its_choices_and_args_attribute() -> None:
    source = """\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--device-kind", default="xla", choices=["xla", "cpu"])
        args = parser.parse_args()
        if args.device_kind == "xla":
            pass
    """
    assert _groups(source) == [[(3, '"xla"'), (3, '"xla"'), (5, '"xla"')]]
    assert [s.kind for s in _flow_at(source, 5).sources] == ["option"]


def test_attributes_and_dict_items_are_keyed_by_name() -> None:
    groups = _groups("""\
        class Runner:
            def __init__(self, device="xla"):
                self.device = device
            def place(self):
                return self.device == "xla:0"
        config = {"device": "xla:1"}
        same = config["device"] == "xla"
    """)
    assert groups == [[(2, '"xla"'), (5, '"xla:0"'), (6, '"xla:1"'), (7, '"xla"')]]


def test_a_string_built_from_a_flow_joins_it_when_compared() -> None:
    groups = _groups("""\
        kind = "xla"
        name = f"{kind}:0"
        if name == "xla:0" or kind + ":1" == "xla:1":
            pass
    """)
    assert groups == [[(1, '"xla"'), (3, '"xla:0"'), (3, '"xla:1"')]]


def test_a_case_pattern_compares_with_the_subject() -> None:
    groups = _groups("""\
        def f(device="xla"):
            match device:
                case "xla:0":
                    pass
    """)
    assert groups == [[(1, '"xla"'), (3, '"xla:0"')]]


def test_what_a_value_meets_that_is_not_followed_is_recorded() -> None:
    flow = _flow_at("""\
        import os
        kind = os.environ.get("ACCEL", "xla")
        if kind == "xla":
            register(kind)
    """, 3)
    assert [ast.unparse(s.node) for s in flow.sources if s.node is not None] == \
        ["os.environ.get('ACCEL', 'xla')"]
    assert any(isinstance(u.parent, ast.Call) and ast.unparse(u.parent) == "register(kind)"
               for u in flow.ends)


def test_a_function_used_as_a_value_has_parameters_from_outside() -> None:
    flow = _flow_at("""\
        def worker(index, device="xla"):
            return device
        spawn(worker)
    """, 1)
    assert {s.kind for s in flow.sources} == {"parameter"}


# --------------------------------------------------------------------- the rule's verdicts
def _migrate(source: str, registry: Registry = REGISTRY):  # type: ignore[no-untyped-def]
    result = migrate_source("t.py", textwrap.dedent(source).encode(), registry)
    assert result.error is None, result.error
    return (result.new_source or result.original).decode(), result.findings


def test_a_device_name_formatted_into_logs_and_passed_to_a_rewritten_loader_is_renamed() -> None:
    new, findings = _migrate("""\
        import logging
        import torch_xla.distributed.parallel_loader as pl

        def train(loader, model):
            device = 'xla'
            logging.info("device {}".format(device))
            for batch in pl.MpDeviceLoader(loader, device):
                model(batch)
    """)
    assert "device = 'neuron'" in new and "'xla'" not in new
    assert [f.kind for f in findings if f.rule_id == "NM102"] == [Kind.FIX]


def test_the_issue_example_still_takes_the_device_branch_by_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    before = """\
        import torch_xla.core.xla_model as xm

        def resolve(requested="xla"):
            if requested == "xla":
                return xm.xla_device(), "xla"
            return "cpu", "cpu"
    """
    new, findings = _migrate(before)
    assert 'requested="neuron"' in new and 'requested == "neuron"' in new
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(device=lambda kind: kind))
    namespace: dict[str, object] = {}
    exec(compile(new, "t.py", "exec"), namespace)
    assert namespace["resolve"]() == ("neuron", "xla")  # type: ignore[operator]
    # the returned name goes to callers outside the file and never selects a device here
    review = [f for f in findings if f.rule_id == "NM102" and not f.applied]
    assert len(review) == 1 and "returned by `resolve`" in review[0].message


def test_a_value_that_escapes_is_renamed_nowhere_and_each_string_says_why() -> None:
    new, findings = _migrate("""\
        import os
        def pick(t):
            accel = os.environ.get("ACCEL", "cpu") or "xla"
            if accel == "xla":
                return t.to(accel)
    """)
    assert new.count('"xla"') == 2
    reviews = [f for f in findings if f.rule_id == "NM102"]
    assert [f.kind for f in reviews] == [Kind.REVIEW, Kind.REVIEW]
    assert all("os.environ.get" in f.message and "lines 3, 4" in f.message for f in reviews)


def test_a_label_on_the_command_line_that_never_selects_a_device_is_left() -> None:
    new, findings = _migrate("""\
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--backend", choices=["xla", "cuda"], default="xla")
        args = parser.parse_args()
        print(args.backend == "xla")
    """)
    assert new.count('"xla"') == 3
    assert {f.kind for f in findings if f.rule_id == "NM102"} == {Kind.REVIEW}


def test_an_enum_member_keeps_its_value_even_beside_a_device_use() -> None:
    """Renamed, `Backend("xla")` would fail and XLA would become an alias of NEURON."""
    new, findings = _migrate("""\
        import enum
        class Mode(enum.Enum):
            XLA = "XLA"  # one attribute name, so one flow with the member below
        class Base(str, enum.Enum):
            pass
        class Backend(Base):
            XLA = "xla"
            NEURON = "neuron"
        def place(t):
            return t.to(Backend.XLA.value)
    """)
    assert 'XLA = "xla"' in new
    review = [f for f in findings if f.rule_id == "NM102"]
    assert [f.kind for f in review] == [Kind.REVIEW]
    assert "enum member `Backend.XLA`" in review[0].message and \
        'Backend("xla")' in review[0].message


def test_a_class_attribute_is_read_by_other_modules_like_a_module_level_name() -> None:
    new, findings = _migrate("""\
        class Defaults:
            kind = "xla"
            _private = "xla"
        class Placement:
            device = "xla"
            def place(self, t):
                return t.to(self.device)
    """)
    assert 'kind = "xla"' in new  # nothing here makes it a device: reported
    assert '_private = "neuron"' in new and 'device = "neuron"' in new
    review = [f for f in findings if f.rule_id == "NM102" and not f.applied]
    assert len(review) == 1 and "class attribute `Defaults.kind`" in review[0].message


def test_an_index_compared_with_the_xla_device_itself_is_reported() -> None:
    new, findings = _migrate("""\
        import torch_xla.core.xla_model as xm
        device = xm.xla_device()
        same = str(device) == "xla:0"
    """)
    assert '"xla:0"' in new
    [review] = [f for f in findings if f.rule_id == "NM102"]
    assert review.kind is Kind.REVIEW and "without an index" in review.message


def test_a_string_silenced_on_one_line_keeps_its_whole_flow() -> None:
    new, findings = _migrate("""\
        def pick(t, device="xla"):  # neuron-migrate: ignore[NM102]
            if device == "xla":
                return t.to(device)
    """)
    assert new.count('"xla"') == 2
    [review] = [f for f in findings if f.rule_id == "NM102"]
    assert review.line == 2 and "silenced" in review.message


def test_strings_another_rule_renames_in_its_own_call_are_left_to_it() -> None:
    new, findings = _migrate("""\
        import torch
        import torch.distributed as dist
        dist.init_process_group("xla")
        with torch.autocast("xla"):
            pass
    """)
    assert '"xla"' not in new
    assert {f.rule_id for f in findings if f.applied} == {"NM201", "NM401"}


# --------------------------------------------------------------------- the guarantee
def _assert_all_or_none(before: str) -> None:
    """With NM102 alone the tree keeps its shape: literals pair up in walk order. Every flow
    of the input has all its literals renamed or none of them, and nothing outside a flow
    is renamed."""
    result = migrate_source("t.py", before.encode(), ONLY_NM102)
    assert result.error is None, result.error
    after = (result.new_source or result.original).decode()
    old_tree, new_tree = ast.parse(before), ast.parse(after)
    pairs = list(zip(_literals(old_tree), _literals(new_tree), strict=True))
    renamed = {id(old) for old, new in pairs if _text(old) != _text(new)}
    in_flows: set[int] = set()
    for flow in _flows(old_tree, ONLY_NM102):
        ids = {id(n) for n in flow.literals}
        in_flows |= ids
        lines = sorted(n.lineno for n in flow.literals)
        assert ids <= renamed or not ids & renamed, f"flow on lines {lines} split:\n{after}"
    assert renamed <= in_flows


def _text(node: ast.expr) -> str:
    return ast.unparse(node)


@pytest.mark.parametrize("before", PYTHON_FIXTURES, ids=fixture_id)
def test_every_fixture_flow_is_renamed_whole_or_not_at_all(before: Path) -> None:
    _assert_all_or_none(before.read_text(encoding="utf-8-sig"))


_NAMES = ("device", "kind", "self.device", "args.device", "cfg['device']")
_VALUES = ('"xla"', '"xla:0"', '"cpu"', 'f"xla:{rank}"', "xm.xla_device()",
           'os.environ.get("D", "xla")', "other")
_STATEMENTS = (
    "{a} = {v}",
    "if {a} == {v}:\n    pass",
    "if {a} in ({v}, \"cuda\"):\n    pass",
    "ok = {a}.startswith({v})",
    "t = t.to({a})",
    "register({a})",
    "print(f\"on {{{a}}}\")",
    "logging.info(\"%s\", {a})",
    "{a}, label = pick({v})",
)
_PROGRAM = st.lists(st.tuples(st.sampled_from(_STATEMENTS), st.sampled_from(_NAMES),
                              st.sampled_from(_VALUES)), min_size=1, max_size=8)


def _program(lines: list[tuple[str, str, str]], nest: bool) -> str:
    header = ("import logging\nimport os\nimport torch_xla.core.xla_model as xm\n\n"
              "def pick(requested=\"xla\"):\n    return requested, \"xla\"\n\n")
    body = "\n".join(s.format(a=a, v=v) for s, a, v in lines)
    if nest:
        body = "def main(t, rank, args, cfg, device=\"xla\"):\n" + textwrap.indent(body, "    ")
    return header + body + "\n"


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_PROGRAM, st.booleans())
def test_generated_programs_never_split_a_flow(lines: list[tuple[str, str, str]],
                                               nest: bool) -> None:
    source = _program(lines, nest)
    try:
        compile(source, "t.py", "exec")
    except SyntaxError:  # `self.device, label = ...` at module level is fine; others skip
        return
    _assert_all_or_none(source)


# --------------------------------------------------------------------- end to end
BENCHMARK = '''\
import argparse

import torch
import torch_xla.core.xla_model as xm

DEFAULT_DEVICE = "xla"


def resolve(requested=DEFAULT_DEVICE):
    if requested == "xla" or requested.startswith("xla:"):
        return xm.xla_device(), "xla"
    return torch.device("cpu"), "cpu"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default=DEFAULT_DEVICE, choices=["xla", "cpu"])
    device, kind = resolve(parser.parse_args().device)
    model = torch.nn.Linear(8, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8, device=device)).sum().backward()
        optimizer.step()
    print(f"trained on {kind}")


if __name__ == "__main__":
    main()
'''


@pytest.mark.slow
@pytest.mark.torch
def test_a_migrated_benchmark_trains_on_the_neuron_device_not_the_cpu(tmp_path: Path) -> None:
    """The issue's benchmark: with the comparison renamed and the default not, smoke passed
    with every op on the CPU. The smoke report counts the ops run on the device."""
    from neuron_migrate.smoke.run import SmokeOptions, run_smoke

    new, findings = _migrate(BENCHMARK)
    assert not [f for f in findings if not f.applied]
    script = tmp_path / "bench.py"
    script.write_text(new)
    result = run_smoke(SmokeOptions(script=script, steps=2, timeout=300))
    assert result.passed, result.error
    assert result.optimizer_steps == 2 and "aten::addmm" in result.ops


def test_a_finding_on_a_string_after_an_f_string_with_the_same_text_has_its_own_column() -> None:
    source = 'import torch\ndef f(i, t):\n    x, y = register(f"xla:{i}"), t.to("xla:")\n'
    _, findings = _migrate(source)
    fix = next(f for f in findings if f.rule_id == "NM102" and f.applied)
    assert fix.column == source.splitlines()[2].index('"xla:")') + 1


@pytest.mark.parametrize("literal", ['"xla:0"', "f'xla:{i}'"])
def test_a_string_compared_with_the_unindexed_device_is_told_and_suggested_alike(
        literal: str) -> None:
    """`torch.device("neuron")` prints as "neuron": the message's advice and the suggestion
    both name that, never an indexed string that could not match."""
    source = ("import torch_xla.core.xla_model as xm\n\n\ndef same(i):\n"
              f"    return str(xm.xla_device()) == {literal}\n")
    result = migrate_source("train.py", source.encode(), Registry(all_rules()))
    [finding] = [f for f in result.findings if f.rule_id == "NM102"]
    assert finding.kind is Kind.REVIEW
    assert "without an index" in finding.message
    assert finding.message.endswith("change them all to 'neuron'")
    assert finding.suggestion in ('"neuron"', "'neuron'")
