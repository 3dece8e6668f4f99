"""The dependency decisions, independent of the file kind: which pins belong to the XLA-era
stack and what TorchNeuron installs instead (`versions` classifies each version).

Each check looks at one group of requirements (a requirements file, one pyproject array, the
packages one Dockerfile stage installs) and returns `Verdict`s: a rule, where, what to change
to, and the edits that make the change when the reader could offer them.
"""

from __future__ import annotations

from collections.abc import Iterator

from neuron_migrate.deps import cuda, ids
from neuron_migrate.deps.emit import Emitter, from_cuda
from neuron_migrate.deps.entries import Edit, Entry, Index, Manifest, Verdict
from neuron_migrate.deps.versions import (
    CPU_INDEX, CURRENT_COMPILER, NATIVE_COMPILER, NATIVE_ERA_TORCH, NATIVE_NEURONX, NATIVE_NKI,
    NATIVE_TORCH, NATIVE_TORCH_VERSION, Lineage, admits, exact_version, is_cpu_index,
    is_neuron_index, lineage_of_spec, torch_minor,
)

NEURONX = "torch-neuronx"
NXD_TRAINING = ("torch.distributed (DDP, FSDP2, DTensor, pipelining) on the `neuron` backend, "
                "or TorchTitan Neuron for pre-training")
NXD_INFERENCE = "vLLM Neuron (Neuron 2.33 ships 0.29.0.1.2.0)"
REPLACED_BY = {
    "neuronx-distributed": NXD_TRAINING,
    "neuronx-distributed-training": NXD_TRAINING,
    "neuronx-distributed-inference": NXD_INFERENCE,
    "transformers-neuronx": NXD_INFERENCE,
}
REVIEW_ONLY: dict[str, tuple[str, str]] = {
    **{name: (ids.NXD_PACKAGE, "is part of the XLA-era stack and does not run on TorchNeuron; "
                               f"replace it with {what}, then remove it")
       for name, what in REPLACED_BY.items()},
    "torch-neuron": (ids.INF1_PACKAGE,
                     "is the archived Inf1 product; TorchNeuron runs on Trn2/Trn3 only: keep "
                     "Inf1 code on a separate Inf1 environment, or move the workload to "
                     f"Trn2/Trn3 with `{NATIVE_NEURONX}`"),
    "optimum-neuron": (ids.OPTIMUM_NEURON,
                       "was built on XLA torch-neuronx and NxD; whether it runs on TorchNeuron "
                       f"is unconfirmed: check its release notes before moving to "
                       f"`{NATIVE_NEURONX}`"),
}
"""Packages with no pin to rewrite: what to do about each."""
XLA_RUNTIME = ("torch-xla", "libneuronxla")
NEURON_PACKAGES = frozenset({NEURONX, "neuronx-cc", "libneuronxla", "torch-neuron",
                             *REPLACED_BY})


class Group:
    """The requirements one check can see: its own and the shared ones, indexed by name
    (a generated requirements file can list thousands)."""

    def __init__(self, own: list[Entry], visible: list[Entry], neuron_index: bool) -> None:
        self.own = own
        self.visible = visible
        self.by_name: dict[str, Entry] = {}
        for entry in visible:
            self.by_name.setdefault(entry.name, entry)
        self.neuron_signal = neuron_index or not NEURON_PACKAGES.isdisjoint(self.by_name)

    def first(self, name: str) -> Entry | None:
        return self.by_name.get(name)


def verdicts(manifest: Manifest) -> Iterator[Verdict]:
    shared = [e for e in manifest.entries if e.group == manifest.shared_group]
    neuron_index = any(is_neuron_index(i.url) for i in manifest.indexes)
    for name, own in manifest.groups().items():
        visible = own if name == manifest.shared_group else [*own, *shared]
        group = Group(own, visible, neuron_index)
        for entry in own:
            yield from _entry_verdicts(entry, group)
        if manifest.lock_command is None:  # a generated file lists what resolved, not wishes
            yield from _missing(group)
    if manifest.lock_command is None:
        yield from _indexes(manifest)


def emit(manifest: Manifest, emitter: Emitter, source_hint: str = "") -> None:
    found = list(verdicts(manifest))
    if from_cuda(emitter.registry):
        found += cuda.verdicts(manifest)
    for verdict in found:
        if manifest.lock_command is not None:
            message = (f"{verdict.message} (generated file: change the pins in "
                       f"{source_hint or 'the project file'}, then run "
                       f"`{manifest.lock_command}`; the lockfile is never edited)")
            emitter.report(ids.LOCKFILE, verdict.offset, message)
        elif manifest.not_edited is not None:
            emitter.report(verdict.rule_id, verdict.offset,
                           f"{verdict.message} ({manifest.not_edited})")
        else:
            emitter.report(verdict.rule_id, verdict.offset, verdict.message,
                           verdict.edits, verdict.suggestion)


def _entry_verdicts(entry: Entry, group: Group) -> Iterator[Verdict]:
    neuronx = group.first(NEURONX)
    if entry.name == NEURONX:
        yield from _neuronx(entry, group)
    elif entry.name == "torch" and neuronx is not None:
        yield from _torch(entry, neuronx)
    elif entry.name == "neuronx-cc" and neuronx is not None:
        yield from _compiler(entry)
    elif entry.name in XLA_RUNTIME:
        yield from _xla_runtime(entry, group)
    elif entry.name in REVIEW_ONLY:
        rule_id, advice = REVIEW_ONLY[entry.name]
        yield Verdict(rule_id, entry.offset, f"`{entry.raw}` {advice}")


def _rewrite(entry: Entry, spec: str) -> Edit | None:
    return entry.rewrite(spec) if entry.rewrite is not None else None


def _neuronx(entry: Entry, group: Group) -> Iterator[Verdict]:
    target = _rewrite(entry, "==2.14.*")
    if entry.spec is None:
        yield Verdict(ids.UNPINNED, entry.offset,
                      f"`{entry.raw}`: the version cannot be read as PEP 440; "
                      f"pin `{NATIVE_NEURONX}`")
        return
    lineage = lineage_of_spec(entry.spec)
    if lineage is Lineage.NATIVE:
        return
    if lineage is Lineage.BETA:
        yield _beta(entry, group, target)
        return
    rule = ids.XLA_LINEAGE if lineage is Lineage.XLA else ids.UNPINNED
    yield Verdict(rule, entry.offset, f"`{entry.raw}` is {_describe(entry, group, lineage)}; "
                  f"change it to `{NATIVE_NEURONX}` (TorchNeuron for PyTorch 2.14)", (target,))


def _describe(entry: Entry, group: Group, lineage: Lineage) -> str:
    assert entry.spec is not None
    exact = exact_version(entry.spec)
    if exact is not None:
        major, minor = torch_minor(exact)
        return f"XLA lineage (the PyTorch/XLA library for torch {major}.{minor})"
    torch = group.first("torch")
    pinned_xla = torch is not None and torch.spec is not None and bool(str(torch.spec)) and \
        not any(admits(torch.spec, v) for v in NATIVE_ERA_TORCH)
    hint = f", and `{torch.raw}` beside it selects the XLA lineage" if pinned_xla else ""
    if lineage is Lineage.UNPINNED:
        return ("unpinned: from the Neuron index it can resolve to the XLA library "
                f"(the last is 2.9.0.2.15.32035){hint}")
    if lineage is Lineage.XLA:
        return "a range that admits only XLA-lineage versions"
    return f"a range that admits XLA-lineage versions (up to 2.9.0.2.15.32035){hint}"


def _beta(entry: Entry, group: Group, target: Edit | None) -> Verdict:
    edits = [target]
    torch = group.first("torch")
    if torch is not None and torch.spec and not admits(torch.spec, NATIVE_TORCH_VERSION):
        edits.append(_rewrite(torch, "==2.14.0"))
    return Verdict(ids.BETA, entry.offset,
                   f"`{entry.raw}` is a native beta build (PyTorch 2.10-2.13); move to the 2.14 "
                   f"family: `{NATIVE_NEURONX}` with `{NATIVE_TORCH}`", tuple(edits))


def _torch(entry: Entry, neuronx: Entry) -> Iterator[Verdict]:
    if entry.spec is None or not str(entry.spec) or admits(entry.spec, NATIVE_TORCH_VERSION):
        return
    if neuronx.spec is not None and lineage_of_spec(neuronx.spec) is Lineage.BETA:
        return  # moved together with torch-neuronx by the beta verdict
    yield Verdict(ids.TORCH_FAMILY, entry.offset,
                  f"`{entry.raw}` does not match the torch-neuronx 2.14 family; change it to "
                  f"`{NATIVE_TORCH}`", (_rewrite(entry, "==2.14.0"),))


def _compiler(entry: Entry) -> Iterator[Verdict]:
    if entry.spec is None or admits(entry.spec, CURRENT_COMPILER):
        return
    yield Verdict(ids.COMPILER_PACKAGES, entry.offset,
                  f"`{entry.raw}` excludes the compiler TorchNeuron 2.14 ships with "
                  f"(neuronx-cc 2.28.7631.0); change it to `{NATIVE_COMPILER}`",
                  (_rewrite(entry, "==2.*"),))


def _missing(group: Group) -> Iterator[Verdict]:
    anchor = next((e for e in group.own if e.name == NEURONX), None)
    if anchor is None:
        return
    missing = [r for n, r in (("neuronx-cc", NATIVE_COMPILER), ("nki", NATIVE_NKI))
               if n not in group.by_name]
    if not missing:
        return
    listed = " and ".join(f"`{m}`" for m in missing)
    edit = anchor.insert(missing) if anchor.insert is not None else None
    yield Verdict(ids.COMPILER_PACKAGES, anchor.offset,
                  f"TorchNeuron needs {listed} beside `{anchor.raw}` (the compiler, and the "
                  f"NKI package torch-neuronx imports on load); add "
                  f"{'them' if len(missing) > 1 else 'it'}", (edit,))


def _xla_runtime(entry: Entry, group: Group) -> Iterator[Verdict]:
    neuron_build = entry.spec is not None and any(
        "torchneuron" in s.version for s in entry.spec)
    if not (neuron_build or group.neuron_signal):
        return  # torch-xla in a project with no Neuron package: a TPU or GPU user's business
    neuronx = group.first(NEURONX)
    native = neuronx is not None and neuronx.spec is not None and \
        lineage_of_spec(neuronx.spec) in (Lineage.NATIVE, Lineage.BETA)
    if entry.name == "torch-xla" and native and not neuron_build:
        yield Verdict(ids.XLA_RUNTIME_PACKAGE, entry.offset,
                      f"`{entry.raw}` beside native torch-neuronx: Neuron lists torch-xla for "
                      "vLLM Neuron, purpose unconfirmed; remove it unless vLLM Neuron needs it")
        return
    what = "the PyTorch/XLA library" if entry.name == "torch-xla" else \
        "the XLA PJRT plug-in (jax-neuronx also uses it; keep it only for JAX)"
    if neuronx is None:
        yield Verdict(ids.XLA_RUNTIME_PACKAGE, entry.offset,
                      f"`{entry.raw}` is {what}; replace it with `{NATIVE_NEURONX}`, "
                      f"`{NATIVE_COMPILER}` and `{NATIVE_NKI}`")
        return
    yield Verdict(ids.XLA_RUNTIME_PACKAGE, entry.offset,
                  f"`{entry.raw}` is {what}; TorchNeuron does not use it: remove it",
                  (entry.remove,))


def installs_torchneuron(entries: list[Entry]) -> bool:
    """Whether these requirements install TorchNeuron: torch-neuronx (the XLA lineage is
    rewritten to the native one beside this), or torch on a Neuron index without the Inf1
    `torch-neuron`. MXNet, TensorFlow and Inf1 installs take the Neuron index for packages
    the CPU wheel index has nothing for."""
    names = {entry.name for entry in entries}
    return NEURONX in names or ("torch" in names and "torch-neuron" not in names)


def _indexes(manifest: Manifest) -> Iterator[Verdict]:
    by_group: dict[str, list[Index]] = {}
    for index in manifest.indexes:
        by_group.setdefault(index.group, []).append(index)
    file_level = by_group.get("", [])
    groups = manifest.groups()
    for name, indexes in by_group.items():
        seen = indexes if name == "" else [*indexes, *file_level]
        if any(is_cpu_index(i.url) for i in seen):
            continue
        installed = manifest.entries if name == "" else \
            [*groups.get(name, []), *groups.get(manifest.shared_group or "", [])]
        if not installs_torchneuron(installed):
            continue
        neuron = next((i for i in indexes if is_neuron_index(i.url)), None)
        if neuron is None:
            continue
        edit = neuron.add_after([CPU_INDEX]) if neuron.add_after is not None else None
        yield Verdict(ids.CPU_INDEX, neuron.offset,
                      "only the Neuron pip index is configured; TorchNeuron takes torch 2.14.0 "
                      f"from the PyTorch CPU wheel index: add `--extra-index-url {CPU_INDEX}`",
                      (edit,))
