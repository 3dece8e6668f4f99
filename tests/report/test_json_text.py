"""The reports' JSON writer gives `json.dumps(indent=2, ensure_ascii=False)`'s text, character
for character, on every kind of value a report holds and on those it hands back to `json`."""

from __future__ import annotations

import enum
import json
import random

import pytest

from neuron_migrate.report.json_text import indented_json


class Word(str, enum.Enum):
    FIX = "fix"


class Count(enum.IntEnum):
    THREE = 3


LEAVES: list[object] = [
    "", "plain", "é ü 漢字", "quote \" backslash \\ newline \n tab \t", "\x00\x1f\x7f",
    "\u2028\u2029\u202e", "\ud800", 0, -7, 10**30, 1.5, -0.0, 1e-7, 3.0, 1e300, True, False,
    None,
]

KEYS = ["k", "é", "a b", "\"", ""]


def _document(chooser: random.Random, depth: int = 0) -> object:
    roll = chooser.random()
    if depth > 4 or roll < 0.45:
        return chooser.choice(LEAVES)
    if roll < 0.7:
        return [_document(chooser, depth + 1) for _ in range(chooser.randint(0, 4))]
    if roll < 0.8:
        return tuple(_document(chooser, depth + 1) for _ in range(chooser.randint(0, 3)))
    return {chooser.choice(KEYS) + str(index): _document(chooser, depth + 1)
            for index in range(chooser.randint(0, 4))}


@pytest.mark.parametrize("seed", range(5))
def test_documents_are_written_as_json_writes_them(seed: int) -> None:
    chooser = random.Random(seed)
    for _ in range(400):
        document = _document(chooser)
        assert indented_json(document) == json.dumps(document, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("document", [
    {}, [], {"a": {}}, {"a": []}, [[], {}], "text", 5, None,
    {"kind": Word.FIX, "count": Count.THREE},  # subclasses: handed to json
    {"not a number": float("nan")}, [float("inf"), float("-inf")],
    {1: "a number key"}, {None: 1}, {True: 1}, {1.5: 2},
])
def test_edge_values_are_written_as_json_writes_them(document: object) -> None:
    assert indented_json(document) == json.dumps(document, indent=2, ensure_ascii=False)


def test_what_json_refuses_is_still_refused() -> None:
    with pytest.raises(TypeError):
        indented_json({"path": object()})
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        indented_json(looped)
