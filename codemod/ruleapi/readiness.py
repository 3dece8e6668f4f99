"""What the NM9xx readiness rules build on: their base class and limits, the facts gathered
once per file, the lines a finding spans, and the questions they ask of the stdlib `ast`."""

from __future__ import annotations

from neuron_migrate.analysis.readiness import Limit, ReadinessRule, Where
from neuron_migrate.analysis.readiness_facts import Facts, is_module_compile
from neuron_migrate.analysis.readiness_plan import (Scope, lines_of, may_declare_encoding,
                                                    text_lines)
from neuron_migrate.analysis.readiness_queries import (applied, code, is_device, is_float64,
                                                       keyword, method, numpy_float64,
                                                       on_device)

__all__ = [
    "Facts", "Limit", "ReadinessRule", "Scope", "Where", "applied", "code", "is_device",
    "is_float64", "is_module_compile", "keyword", "lines_of", "may_declare_encoding", "method",
    "numpy_float64",
    "on_device", "text_lines",
]
