"""A leftover CUDA call that stopped `smoke`: which `--from cuda` rule would have rewritten it.

The emulator recognises the failure ("Torch not compiled with CUDA enabled", a missing
`torch._C._cuda_*` function, a process group without NCCL); this module reads the script as
`neuron-migrate check --from cuda` would and names the rules with a finding on the failing
line, or else the file's CUDA findings, so the user learns the command and the rule that fix it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuron_migrate.model import Finding, Options
from neuron_migrate.smoke.paths import relative

CUDA_LEFTOVER = "cuda-leftover"  # the emulator's cause key (emulator/failure_causes.py)
_SHOWN = 3


def cuda_origin(error: dict[str, Any]) -> dict[str, Any] | None:
    """For an error the emulator took for a leftover CUDA call: the rules that would fix it."""
    if (error.get("cause") or {}).get("key") != CUDA_LEFTOVER:
        return None
    location = error.get("location") or {}
    file, line = location.get("file"), int(location.get("line") or 0)
    if not file or not str(file).endswith(".py"):
        return None
    findings = _cuda_findings(str(file))
    if not findings:
        return None
    here = [f for f in findings if f.line == line]
    where = relative(str(file))
    if here:
        text = (f"`neuron-migrate apply --from cuda` rewrites {where}:{line}: "
                f"{', '.join(_names(here))}")
    else:
        shown = ", ".join(f"{name} at line {f.line}" for f, name in
                          zip(findings[:_SHOWN], _names(findings[:_SHOWN])))
        more = f" and {len(findings) - _SHOWN} more" if len(findings) > _SHOWN else ""
        text = (f"`neuron-migrate apply --from cuda` rewrites {len(findings)} CUDA use(s) in "
                f"{where}: {shown}{more}")
    return {"helper": None, "rules": sorted({f.rule_id for f in (here or findings)}),
            "call_site": None, "label": "would fix", "text": text}


def _cuda_findings(file: str) -> list[Finding]:
    from neuron_migrate.engine.migrate import migrate_source
    from neuron_migrate.registry import Registry
    from neuron_migrate.rules import all_rules

    try:
        data = Path(file).read_bytes()
    except OSError:
        return []
    registry = Registry(all_rules(), Options(sources=frozenset({"xla", "cuda"})))
    result = migrate_source(file, data, registry, generate=False)
    return [f for f in result.findings if f.rule_id.startswith("NMC")]


def _names(findings: list[Finding]) -> list[str]:
    from neuron_migrate.rules import all_rules

    names = {rule.id: rule.name for rule in all_rules()}
    return list(dict.fromkeys(f"{f.rule_id} ({names.get(f.rule_id, '')})" for f in findings))
