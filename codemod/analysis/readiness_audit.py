"""`audit` of one file, whole: will it run on TorchNeuron?

Three sources answer it. The readiness rules (NM9xx) read PyTorch code and notebooks, XLA-era
or not. The dependency scanner knows the environment a project settles on: a base image, a
`requires-python`, a conda environment or CI job whose Python has no TorchNeuron wheel
(NM950-NM952), reported as the scanner words them. And the migration itself: a file that
`apply` would still change or asks to review (torch_xla calls, an XLA-lineage pin) does not
run on TorchNeuron at all, so it gets one NM960 finding with the number of findings the
migration holds for it, rather than silence when no readiness rule applies to XLA code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from neuron_migrate import deps
from neuron_migrate.deps.ids import PYTHON_IMAGE, PYTHON_PIN, REQUIRES_PYTHON
from neuron_migrate.model import BY_POSITION, FileResult, Finding, Kind
from neuron_migrate.registry import XLA_ERA, Registry

Migrate = Callable[..., FileResult]
"""`neuron_migrate.runner.migrate_bytes`: a file's migration findings, by its kind (the
runner hands it over, so this module does not import the runner that imports it)."""
ENVIRONMENT = frozenset({PYTHON_IMAGE, REQUIRES_PYTHON, PYTHON_PIN})
CODE = (".py", ".ipynb")


def audited(path: Path) -> bool:
    """What `audit` reads: code and notebooks, and every file the dependency scanner reads
    (for the Python it settles on, and the XLA-era pins it holds)."""
    return path.suffix in CODE or deps.is_dependency_file(path)


def audit_file(name: str, data: bytes, registry: Registry,
               migrate: Migrate) -> FileResult:
    """The readiness findings of a code file or notebook, its environment findings and, when
    the migration still has work in it, NM960. Never raises for bad input."""
    from neuron_migrate.analysis.readiness import audit_source

    suffix = Path(name).suffix
    if suffix == ".ipynb":
        from neuron_migrate.notebooks.audit import audit_notebook

        result = audit_notebook(name, data, registry.readiness)
    elif suffix == ".py":
        result = audit_source(name, data, registry.readiness)
    else:
        result = FileResult(name, original=data)
    if result.error is not None or result.skipped is not None:
        return result
    migration = _migration(name, data, registry, migrate)
    if migration is None:
        return result
    if migration.error is not None:  # code it could not check for pending migration work
        return dataclasses.replace(result, error=migration.error) if suffix in CODE else \
            dataclasses.replace(result, skipped=f"{migration.error} (not audited)")
    found = [*result.findings, *(f for f in migration.findings if f.rule_id in ENVIRONMENT)]
    pending = [f for f in migration.findings if not _readiness(f, registry)]
    if pending and registry.options.enabled(XLA_ERA):
        found.append(_not_migrated(pending))
    return dataclasses.replace(result, findings=tuple(sorted(found, key=BY_POSITION)))


def _migration(name: str, data: bytes, registry: Registry,
               migrate: Migrate) -> FileResult | None:
    """What `check` finds in the file, or None when it cannot find anything: code without
    an XLA-era token (the engine's own prefilter)."""
    if Path(name).suffix in CODE and not registry.prefilter(data) and \
            not deps.is_dependency_file(Path(name)):
        return None
    return migrate(name, data, registry, generate=False)


def _readiness(finding: Finding, registry: Registry) -> bool:
    """A finding `audit` reports on its own (the readiness and environment rules): not part
    of the migration's count."""
    rule = registry.by_id.get(finding.rule_id)
    return rule is not None and hasattr(rule, "limit")


def _not_migrated(pending: list[Finding]) -> Finding:
    first = min(pending, key=BY_POSITION)
    fixes = sum(f.kind is Kind.FIX for f in pending)
    unsafe = sum(f.kind is Kind.UNSAFE_FIX for f in pending)
    review = sum(f.kind is Kind.REVIEW for f in pending)
    parts = [f"{count} {what}" for count, what in ((fixes, "fixes" if fixes != 1 else "fix"),
                                                   (unsafe, "unsafe"),
                                                   (review, "to review")) if count]
    rules = ", ".join(sorted({f.rule_id for f in pending}))
    return Finding(first.path, first.line, first.column, XLA_ERA, Kind.REVIEW,
                   f"XLA-era code or pins: {len(pending)} migration finding"
                   f"{'s' * (len(pending) != 1)} ({', '.join(parts)}; {rules}) that `apply` "
                   "holds for this file; it does not run on TorchNeuron until they are made: "
                   "run `neuron-migrate apply` (or `--dry-run` to see them first), then audit "
                   "again")
