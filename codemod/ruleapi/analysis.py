"""The read-only analyses rules may ask: what a stdlib `ast` node names, every node of a tree
and each one's parent, which assignments reach a statement, whether a function trains, where
a string's value flows, whether an optimizer's parameters are averaged by a wrapper. They
belong to the analysis layer; rules reach them only through here."""

from __future__ import annotations

from neuron_migrate.analysis.analyse import Use
from neuron_migrate.analysis.flow import Flow, Source
from neuron_migrate.analysis.import_guards import stops
from neuron_migrate.analysis.locate import ast_dotted
from neuron_migrate.analysis.nodes import every_node, nodes_on_lines, parents_by_id, walked
from neuron_migrate.analysis.reaching import (UNKNOWN, Definition, ancestors, definitions_of,
                                              expressions, reaching)
from neuron_migrate.analysis.statements import statements
from neuron_migrate.analysis.training import Function, called_functions, decorated, trains
from neuron_migrate.analysis.wrapped import WRAPPERS, Proof, averaged_by_wrapper

__all__ = [
    "UNKNOWN", "WRAPPERS", "Definition", "Flow", "Function", "Proof", "Source", "Use",
    "ancestors", "ast_dotted", "averaged_by_wrapper", "called_functions", "decorated",
    "definitions_of", "every_node", "expressions", "nodes_on_lines", "parents_by_id",
    "reaching", "statements", "stops", "trains", "walked",
]
