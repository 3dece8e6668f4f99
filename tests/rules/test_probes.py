"""NM715 on `try: import torch_xla... except ImportError:`: the migration removes the import,
so the `try` no longer decides what it did; each such `try` is reported, once."""

from __future__ import annotations

import textwrap

from neuron_migrate.engine.migrate import migrate_source
from neuron_migrate.model import Finding, Kind, Options
from neuron_migrate.registry import Registry
from neuron_migrate.rules import all_rules

REGISTRY = Registry(all_rules())


def _probes(source: str, registry: Registry = REGISTRY) -> tuple[str, list[Finding]]:
    result = migrate_source("t.py", textwrap.dedent(source).encode(), registry)
    assert result.error is None, result.error
    new = (result.new_source or result.original or b"").decode()
    return new, [f for f in result.findings if f.rule_id == "NM715"]


def test_a_flag_set_by_the_try_is_reported_at_the_try() -> None:
    new, found = _probes("""\
        try:
            import torch_xla.core.xla_model as xm
            HAVE_XLA = True
        except ImportError:
            HAVE_XLA = False

        def step():
            xm.mark_step()
    """)
    assert "torch_xla" not in new and "HAVE_XLA = True" in new
    assert [(f.line, f.kind, f.applied) for f in found] == [(1, Kind.REVIEW, False)]
    assert "branch (line 4)" in found[0].message


def test_one_finding_per_try_whatever_it_imports() -> None:
    _, found = _probes("""\
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            READY = True
        except (ImportError, ModuleNotFoundError):
            READY = False
        xm.mark_step()
        print(xr.world_size())
    """)
    assert len(found) == 1


def test_a_guard_that_goes_whole_and_a_branch_that_stops_are_not_reported() -> None:
    new, found = _probes("""\
        try:
            import torch_xla.core.xla_model as xm
        except ImportError:
            xm = None
        try:
            import torch_xla.runtime as xr
        except ImportError:
            print("install torch_xla")
            raise
        def step():
            xm.mark_step()
            return xr.world_size()
    """)
    assert "xm = None" not in new and "install torch_xla" not in new and "try" not in new
    assert found == []


def test_a_branch_that_stops_goes_unless_it_binds_a_name() -> None:
    """The `try` is dead once its imports go; it is dropped only where nothing it binds could
    be missed: a `:=` in the branch binds a name the rest of the module may read."""
    new, found = _probes("""\
        import sys
        def device():
            try:
                import torch_xla.core.xla_model as xm
            except ImportError as error:
                raise RuntimeError("install torch_xla") from error
            return xm.xla_device()
        try:
            import torch_xla.runtime as xr
        except ImportError:
            sys.exit(f"missing {(what := 'the XLA runtime')}")
        print(what, xr.world_size())
    """)
    assert "install torch_xla" not in new and "error" not in new
    assert "except ImportError:" in new and "what :=" in new  # kept: `what` is read below
    assert found == []


def test_an_import_the_migration_keeps_changes_nothing_and_is_not_reported() -> None:
    _, found = _probes("""\
        try:
            import torch_xla.core.xla_model as xm
            HAVE = True
        except ImportError:
            HAVE = False
        xm.set_replication("xla:0", [])  # no native form: reported, and the import stays
    """)
    assert found == []


def test_a_try_that_keeps_one_torch_xla_import_still_probes_and_is_not_reported() -> None:
    new, found = _probes("""\
        try:
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            HAVE = True
        except ImportError:
            HAVE = False
        xm.set_replication("xla:0", [])  # keeps `xm`
        print(xr.world_size())  # rewritten: `xr` goes
    """)
    assert "torch_xla.runtime" not in new and "torch_xla.core.xla_model" in new
    assert found == []


def test_a_with_that_suppresses_the_import_error_is_reported() -> None:
    new, found = _probes("""\
        import contextlib
        HAVE_XLA = False
        with contextlib.suppress(ImportError):
            import torch_xla.core.xla_model as xm
            HAVE_XLA = True
        def step():
            xm.mark_step()
    """)
    assert "torch_xla" not in new
    assert [(f.line, f.kind) for f in found] == [(3, Kind.REVIEW)]
    assert "the `with` on line 3" in found[0].message


def test_the_report_obeys_suppressions_and_selection() -> None:
    source = """\
        try:  # neuron-migrate: ignore[NM715]
            import torch_xla.core.xla_model as xm
            HAVE_XLA = True
        except ImportError:
            HAVE_XLA = False
        xm.mark_step()
    """
    assert _probes(source)[1] == []
    without = Registry(all_rules(), Options(ignore=frozenset({"NM715"})))
    assert _probes(source.replace("  # neuron-migrate: ignore[NM715]", ""), without)[1] == []
