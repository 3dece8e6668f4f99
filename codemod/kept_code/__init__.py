"""Compiled code that every run would otherwise compile again although its source never
changes, kept between runs in the package's `__pycache__` as Python keeps module bytecode:
the methods `dataclasses` writes for each class (`dataclass_methods`) and the regular
expressions modules compile at import (`regexes`). Both only change where compiled code
comes from, never what it is; `store` is the file both keep it in."""

from __future__ import annotations


def install() -> None:
    """Install both, before anything of a run defines a dataclass or compiles a pattern."""
    from neuron_migrate.kept_code import dataclass_methods, regexes

    dataclass_methods.install()
    regexes.install()
