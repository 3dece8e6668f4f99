"""What the rules that document or borrow from the dependency scanner may use: its ids and
kinds (spelt once, in `deps.ids`), the signals it looks for, and a way to scan text lines
with a set of rules (the install strings found in Python code)."""

from __future__ import annotations

from neuron_migrate.deps import ids, scan_text_lines
from neuron_migrate.deps.script_mentions import maybe_several_processes
from neuron_migrate.deps.signals import (DLC, REMOVABLE_PREFIXES, REMOVABLE_VARIABLES,
                                         REVIEW_ONLY, XLA_CC_FLAGS, XLA_VENV,
                                         xla_compiler_flags, xla_image_message,
                                         xla_variable_advice, xla_venv_message)
from neuron_migrate.registry import Registry

__all__ = [
    "DLC", "REMOVABLE_PREFIXES", "REMOVABLE_VARIABLES", "REVIEW_ONLY", "Registry",
    "XLA_CC_FLAGS", "XLA_VENV", "ids", "maybe_several_processes", "scan_text_lines",
    "xla_compiler_flags", "xla_image_message", "xla_variable_advice", "xla_venv_message",
]
