"""Which hardware the migrated code runs on, since only some of it has a native path.

TorchNeuron supports Trn2 and Trn3 only; Trn1 and Inf2 have no native path and stay on the
PyTorch/XLA `torch-neuronx` in maintenance (AWS's TorchNeuron release notes). The target is given
(`--target`, `target = ...` in `[tool.neuron-migrate]`) or, failing that, read from the
instance types the files of the run name. A given Trn1/Inf2 target stops every rewrite toward
TorchNeuron; a detected one is only reported, because XLA-era code names the Trn1 instances it
ran on before, not necessarily those it will run on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

TARGETS = ("trn2", "trn3", "trn1", "inf2")
NATIVE = frozenset({"trn2", "trn3"})
LEGACY = frozenset({"trn1", "inf2"})
INSTANCE = re.compile(rb"\b(?:ml\.)?(trn1n?|trn2u?|trn3u?|inf2)\.(?:\d*xlarge|large)\b|"
                      rb"\b(NEURON_PLATFORM_TARGET_OVERRIDE)[\"']?\]?\s*[=:,]\s*[\"']?"
                      rb"(trn1|trn2|trn3|inf2)\b")
"""An instance type, or the platform the Neuron compiler is told to build for."""
STARTS = (b"trn", b"inf2", b"NEURON_PLATFORM_TARGET_OVERRIDE")
"""What every `INSTANCE` match starts with, after an optional `ml.`."""
ASSUMPTION_DOC = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/"
                  "components/torchneuron.html")
XLA_DOC = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/setup/pytorch/"
           "update-manual.html")
LAST_XLA = ("the XLA stack's last release for them is Neuron 2.31: torch-neuronx "
            "2.9.0.2.15.32035 with torch 2.9.0 (maintenance since Neuron 2.32: critical and "
            "security fixes only), the DLAMI \"Deep Learning AMI Neuron PyTorch 2.9\", "
            "NxD Inference in maintenance at 2.31; the matching neuronx-cc build and the "
            "Pythons those wheels cover are UNCONFIRMED here, check the Neuron 2.31 release "
            "notes")


def native(target: str | None) -> bool:
    """Whether rewrites toward TorchNeuron apply: a Trn2/Trn3 target, or none given."""
    return target not in LEGACY


def family(instance: str) -> str:
    """`trn1n` and `trn2u` are Trn1 and Trn2 machines; `ml.` is SageMaker's prefix."""
    return instance.removeprefix("ml.").rpartition("=")[2][:4]


def named_instances(data: bytes) -> tuple[tuple[int, str], ...]:
    """The Neuron instance types a file names, with their lines; a substring test first, as
    almost no file names one."""
    if b"trn" not in data and b"inf2" not in data:
        return ()
    found = []
    line, counted = 1, 0  # lines counted as the matches go: a notebook can hold thousands
    for match in _matches(data):
        line += data.count(b"\n", counted, match.start())
        counted = match.start()
        said = match.group() if match[2] is None else match[2] + b"=" + match[3]
        found.append((line, said.decode("ascii")))
    return tuple(found)


def _matches(data: bytes) -> Iterator[re.Match[bytes]]:
    """`INSTANCE.finditer(data)`, with the pattern tried only where a match can start. It
    opens with `\\b`, so `re` has no literal to scan for and tries it at every byte of the
    file (a notebook's outputs are megabytes); `bytes.find` finds the few places instead.
    Tried in order, skipping those inside the last match, they give `finditer`'s matches:
    `match` at a position still sees the byte before it for `\\b`."""
    starts: set[int] = set()
    for literal in STARTS:
        at = data.find(literal)
        while at >= 0:
            starts.add(at)
            if at >= 3 and data.startswith(b"ml.", at - 3):
                starts.add(at - 3)
            at = data.find(literal, at + 1)
    end = 0
    for start in sorted(starts):
        match = INSTANCE.match(data, start) if start >= end else None
        if match is not None:
            end = match.end()
            yield match


@dataclass(frozen=True)
class Mention:
    path: str
    line: int
    instance: str

    def __str__(self) -> str:
        return f"`{self.instance}` in {self.path}:{self.line}"


def detected(mentions: Iterable[Mention]) -> tuple[str | None, list[Mention], list[Mention]]:
    """The target the named instances agree on (None when they name both kinds or none),
    with the native and the Trn1/Inf2 mentions. A file that names both kinds lists
    instances (an issue template's menu, a label map, a comparison table) rather than
    choosing one, so it does not count."""
    mentions = list(mentions)
    kinds: dict[str, set[bool]] = {}
    for mention in mentions:
        kinds.setdefault(mention.path, set()).add(family(mention.instance) in NATIVE)
    mentions = [m for m in mentions if len(kinds[m.path]) == 1]
    new = [m for m in mentions if family(m.instance) in NATIVE]
    old = [m for m in mentions if family(m.instance) in LEGACY]
    if new and not old:
        return family(new[0].instance), new, old
    if old and not new:
        return family(old[0].instance), new, old
    return None, new, old


def _places(mentions: list[Mention]) -> str:
    """The first mention in each of the first three files, and how many files more."""
    first = list({m.path: m for m in reversed(mentions)}.values())[::-1]
    shown = ", ".join(str(m) for m in first[:3])
    more = len(first) - 3
    return shown + (f" and {more} more file{'s' if more > 1 else ''}" if more > 0 else "")


def legacy_notice(target: str, where: str) -> str:
    """Why nothing is rewritten for a Trn1/Inf2 target."""
    return (f"target {target} ({where}): TorchNeuron supports Trn2 and Trn3 only, so "
            f"neuron-migrate rewrites no code and no pin toward it; {target.capitalize()} "
            f"stays on PyTorch/XLA: {LAST_XLA}. Inference scripts using torch_neuronx.trace "
            f"should not be migrated ({XLA_DOC}). Moving to Trn2/Trn3? Run with --target trn2.")


def notes(target: str | None, where: str | None, mentions: Iterable[Mention],
          findings: int) -> list[str]:
    """What the summary says about the hardware after a run on a Trn2/Trn3 (or unknown)
    target: where a detected target came from, or which findings assume Trn2/Trn3."""
    if target is not None:
        return [] if where is None else [f"target {target} ({where})"]
    guess, new, old = detected(mentions)
    if guess in NATIVE:
        return [f"target {guess} (detected: {_places(new)})"]
    if not findings:
        return []
    said = (f"the {findings} finding{'s' if findings != 1 else ''} above assume"
            f"{'s' if findings == 1 else ''} Trn2/Trn3, the only hardware TorchNeuron "
            f"supports ({ASSUMPTION_DOC})")
    if guess in LEGACY:
        return [(f"target not given; the repository names {_places(old)}: {said}. If this "
                 f"code stays on {guess.capitalize()}, run with --target {guess}: nothing is "
                 "rewritten, and the run says which PyTorch/XLA release to stay on")]
    if old:
        return [(f"target not given; the repository names both Trn2/Trn3 ({_places(new)}) "
                 f"and Trn1/Inf2 ({_places(old)}) instances: {said}. Code that stays on "
                 "Trn1/Inf2 keeps PyTorch/XLA: exclude it, or run it with --target trn1")]
    return [(f"target not given (--target trn2|trn3|trn1|inf2, or target = \"...\" in "
             f"[tool.neuron-migrate]): {said}")]
