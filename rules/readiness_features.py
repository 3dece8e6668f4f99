"""NM910-NM916: PyTorch features TorchNeuron does not list as supported: sparse and nested
tensors, torch.func (functorch), forward-mode AD, torch.distributions, torch.fft, TorchAO.

The reference this tool is built from could not confirm each of these against AWS's per-op
support table (aws-neuron/torch-neuronx `docs/torch_api_compatibility.md`, linked from the
API reference): sparse and nested tensors are layouts a device backend must implement, so
they are reported as blocking; the rest are reported as "verify on the device".
"""

from __future__ import annotations

import ast
from typing import ClassVar

from neuron_migrate.ruleapi import Example, Kind
from neuron_migrate.ruleapi.readiness import (Facts, Limit, ReadinessRule, Where, code, keyword,
                                              lines_of, method, text_lines)
from neuron_migrate.rules.readiness_links import D_APIREF, D_RN

_VERIFY = ("run it on a Trainium instance (or `neuron-migrate smoke`) and check AWS's "
           "operator support table before relying on it")


class NamespaceRule(ReadinessRule):
    """Reports every use of names under `namespaces` (outermost dotted chain only)."""

    nodes: ClassVar[tuple[type[ast.AST], ...]] = (ast.Name, ast.Attribute)
    namespaces: ClassVar[tuple[str, ...]] = ()
    excluded: ClassVar[tuple[str, ...]] = ()
    methods: ClassVar[tuple[str, ...]] = ()
    callees: ClassVar[tuple[str, ...]] = ()
    """The last names of what `call` reports calls to."""
    what: ClassVar[str] = ""

    def candidates(self, facts: Facts, data: bytes) -> set[int] | None:
        """The lines that spell a name under `namespaces`: a name imported from one (its alias
        is reported), or the attribute that enters one from an imported parent (`fft` in
        `torch.fft.rfft`); and the calls of `methods` and `callees`. In a file that is not
        ASCII an identifier may be spelled otherwise (Python normalises them): no filter."""
        if not data.isascii():
            return None
        words: dict[str, bool] = {}
        for alias, target in facts.aliases.items():
            for namespace in self.namespaces:
                if _under(target, (namespace,)):
                    words[alias] = False
                elif namespace.startswith(target + "."):
                    rest = namespace[len(target) + 1:]
                    word = rest.split(".", 1)[0]
                    # `torch.sparse_` covers `torch.sparse_coo_tensor`: a prefix of the name
                    prefix = word == rest and rest.endswith("_")
                    words[word] = words.get(word, False) or prefix
        found = text_lines(data, words)
        if ast.Call in self.nodes:
            found |= lines_of(facts.calls_named((*self.methods, *self.callees)))
        return found

    def check(self, node: ast.AST, where: Where) -> str | None:
        if isinstance(node, ast.Call):
            if self.methods and method(node, *self.methods):
                return self.message(f".{node.func.attr}()")  # type: ignore[attr-defined]
            return self.call(node, where)
        parent = where.parent
        if type(parent) is ast.Attribute and parent.value is node or \
                type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
            return None
        qualname = where.qualname(node)
        if qualname is None or not _under(qualname, self.namespaces) or \
                _under(qualname, self.excluded):
            return None
        return self.message(qualname)

    def call(self, node: ast.Call, where: Where) -> str | None:
        return None

    def message(self, name: str) -> str:
        return f"`{name}`: {self.what}"


def _under(qualname: str, namespaces: tuple[str, ...]) -> bool:
    """`qualname` is one of `namespaces` or inside one (`torch.sparse_` covers
    `torch.sparse_coo_tensor`)."""
    for namespace in namespaces:
        if qualname.startswith(namespace) and (
                len(qualname) == len(namespace) or namespace.endswith("_")
                or qualname[len(namespace)] == "."):
            return True
    return False


class SparseTensors(NamespaceRule):
    id = "NM910"
    name = "sparse-tensors"
    kind = Kind.REVIEW
    limit = Limit.BLOCKS
    nodes = (ast.Name, ast.Attribute, ast.Call)
    namespaces = ("torch.sparse", "torch.sparse_")
    needs = (b"sparse",)
    methods = ("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr",
               "to_sparse_bsc")
    callees = ("Embedding", "EmbeddingBag", "embedding", "embedding_bag")
    what = ("sparse tensors are not supported by TorchNeuron; keep them on the CPU or use "
            "dense tensors (`.to_dense()`) on the device")
    summary = "sparse tensors (`torch.sparse`, `.to_sparse()`, `sparse=True` embeddings) are not supported on the neuron device"
    explanation = """\
What it does: reports `torch.sparse.*`, `torch.sparse_coo_tensor` and the other sparse
constructors and layouts, `.to_sparse*()`, and `nn.Embedding`/`nn.EmbeddingBag`/
`F.embedding` with `sparse=True` (their gradients are sparse tensors).

Why: TorchNeuron implements the strided (dense) layout; its release notes list torch.sparse
among the features it does not support, so sparse tensors on the `neuron` device fail.

What differs: nothing is rewritten. Use dense tensors on the device (`sparse=False`
embeddings, `.to_dense()`), or keep the sparse part of the computation on the CPU."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\n\nembedding = torch.nn.Embedding(50000, 512, sparse=True).to(\"neuron\")\n"
        "adjacency = torch.sparse_coo_tensor(indices, values, (n, n))\n")

    def call(self, node: ast.Call, where: Where) -> str | None:
        qualname = where.qualname(node.func) or ""
        if qualname.rsplit(".", 1)[-1] in self.callees and qualname.startswith("torch.nn"):
            sparse = keyword(node, "sparse")
            if isinstance(sparse, ast.Constant) and sparse.value is True:
                return (f"`{code(node)}`: `sparse=True` makes sparse gradients; {self.what}")
        return None


class NestedTensors(NamespaceRule):
    id = "NM911"
    name = "nested-tensors"
    kind = Kind.REVIEW
    limit = Limit.BLOCKS
    namespaces = ("torch.nested", "torch.jagged")
    needs = (b"nested", b"jagged")
    what = ("nested (jagged) tensors are not supported by TorchNeuron; pad to a fixed shape "
            "with a mask instead")
    summary = "nested tensors (`torch.nested`, `layout=torch.jagged`) are not supported on the neuron device"
    explanation = """\
What it does: reports `torch.nested.*` (`nested_tensor`, `as_nested_tensor`,
`to_padded_tensor`) and the `torch.jagged` layout.

Why: TorchNeuron's release notes list torch.nested among the features it does not support:
nested tensors are a layout a device backend must implement, and ragged shapes are exactly
what the static-shape compiler cannot take.

What differs: nothing is rewritten. Pad the sequences to a few fixed lengths (bucketing) and
carry an attention or padding mask; this is also what keeps compiled graphs few."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\n\nbatch = torch.nested.nested_tensor(sequences, device=\"neuron\")\n")


class FunctionTransforms(NamespaceRule):
    id = "NM912"
    name = "torch-func-transforms"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    namespaces = ("torch.func", "functorch", "torch.vmap")
    needs = (b"torch.func", b"functorch", b"vmap", b"import func")
    # not transforms: AOTAutograd's compiler hooks, control flow, and plain-Python helpers
    # that swap or stack parameters
    excluded = ("functorch.compile", "functorch.experimental", "functorch.dim",
                "torch.func.functional_call", "torch.func.stack_module_state",
                "functorch.functional_call")
    what = f"torch.func (functorch) transforms are not among TorchNeuron's supported features; {_VERIFY}"
    summary = "torch.func / functorch transforms (`vmap`, `grad`, `jacrev`, `jvp`...) are not listed as supported"
    explanation = """\
What it does: reports uses of the `torch.func` transforms (`vmap`, `grad`,
`grad_and_value`, `jacrev`, `jacfwd`, `hessian`, `jvp`, `vjp`, `linearize`,
`functionalize`), `torch.vmap` and the older `functorch` package. Not reported:
`functional_call` and `stack_module_state`, which only swap or stack parameters in Python,
and `functorch.compile` (AOTAutograd's hooks), which transform nothing.

Why: TorchNeuron's release notes name torch.func among what it does not support yet. The
transforms run through batching and functionalization rules that a backend must cover for
every operator involved; the reference this tool relies on could not confirm which work, so
this is a "verify" item rather than a certain failure.

What differs: nothing is rewritten. Replace `vmap` by batched tensor code where it is simple
(a leading batch dimension), compute per-sample quantities on the CPU, or test the transform
on a Trainium instance first."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\nfrom torch.func import vmap\n\ndevice = \"neuron\"\n"
        "per_sample = vmap(loss_fn)(params, batch.to(device))\n")


class ForwardAD(NamespaceRule):
    id = "NM913"
    name = "forward-mode-autograd"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    namespaces = ("torch.autograd.forward_ad",)
    needs = (b"forward_ad",)
    what = f"forward-mode autograd is not among TorchNeuron's supported features; {_VERIFY}"
    summary = "forward-mode autograd (`torch.autograd.forward_ad`: `dual_level`, `make_dual`) is not listed as supported"
    explanation = """\
What it does: reports uses of `torch.autograd.forward_ad` (`dual_level`, `make_dual`,
`unpack_dual`).

Why: TorchNeuron's release notes list forward-mode AD among the features it does not support
yet: dual tensors need forward-derivative formulas the backend's operators must provide.
Reverse mode (`backward()`, `torch.autograd.grad`) is what TorchNeuron trains with.

What differs: nothing is rewritten. Compute Jacobian-vector products with reverse mode (the
double-backward trick `torch.autograd.functional.jvp` uses), or on the CPU."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\nimport torch.autograd.forward_ad as fwAD\n\n"
        "with fwAD.dual_level():\n    dual = fwAD.make_dual(x.to(\"neuron\"), tangent)\n")


class Distributions(NamespaceRule):
    id = "NM914"
    name = "torch-distributions"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    namespaces = ("torch.distributions",)
    needs = (b"distributions",)
    what = f"torch.distributions is not among TorchNeuron's supported features; {_VERIFY}"
    summary = "`torch.distributions` is not listed as supported on the neuron device"
    explanation = """\
What it does: reports uses of `torch.distributions` (`Normal`, `Categorical`, `kl_divergence`,
transforms and constraints).

Why: TorchNeuron's release notes list torch.distributions among what it does not support
yet. Distributions are built from ordinary tensor operations, but sampling and several
log-probability formulas use operators that may have no native lowering and fall back to
the CPU (slowly, with a warning) or fail; the reference this tool relies on could not
confirm which.

What differs: nothing is rewritten. Sample on the CPU where the sampling is cheap (an RL
action, a noise vector), or check the operators on a Trainium instance."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\nfrom torch.distributions import Categorical\n\n"
        "action = Categorical(logits=policy(state.to(\"neuron\"))).sample()\n")


class FFT(NamespaceRule):
    id = "NM915"
    name = "fft-transforms"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    namespaces = ("torch.fft", "torch.stft", "torch.istft")
    needs = (b"fft",)
    what = (f"TorchNeuron supports only some torch.fft transforms (see its release notes); "
            f"{_VERIFY}")
    summary = "`torch.fft` transforms (and `torch.stft`): TorchNeuron supports only some of them"
    explanation = """\
What it does: reports uses of `torch.fft` (`fft`, `rfft`, `fft2`, `fftn`, `ifft`, `fftshift`,
...) and `torch.stft`/`torch.istft`, which are built on them.

Why: TorchNeuron's release notes say only some torch.fft transforms are supported. The
reference this tool relies on does not name which, so every transform is reported for a
check rather than guessed at; an unsupported one fails or falls back to the CPU.

What differs: nothing is rewritten. Check each transform in the release notes, run it on a
Trainium instance, or compute it on the CPU (`torch.fft.rfft(x.cpu())`) if it is outside the
hot loop."""
    doc_url = D_RN
    example = Example.unchanged(
        "import torch\n\nspectrum = torch.fft.rfft(signal.to(\"neuron\"), dim=-1)\n")


class TorchAO(NamespaceRule):
    id = "NM916"
    name = "torchao"
    kind = Kind.REVIEW
    limit = Limit.UNCONFIRMED
    namespaces = ("torchao",)
    needs = (b"torchao",)
    what = (f"TorchAO's quantization and low-precision kernels are not among TorchNeuron's "
            f"supported features; {_VERIFY}")
    summary = "TorchAO (`torchao` quantization, float8, low-bit optimizers) is not listed as supported"
    explanation = """\
What it does: reports uses of the `torchao` package (`quantize_`, float8 training,
`int8_weight_only`, low-bit optimizers).

Why: TorchAO's kernels and tensor subclasses target CUDA and CPU backends; TorchNeuron's
release notes do not list TorchAO among supported features, and the reference this tool
relies on could not confirm any of it on the `neuron` device.

What differs: nothing is rewritten. Train in bfloat16 with `torch.autocast("neuron",
dtype=torch.bfloat16)`, and verify any quantization flow on a Trainium instance."""
    doc_url = D_APIREF
    example = Example.unchanged(
        "import torch\nfrom torchao.quantization import quantize_, int8_weight_only\n\n"
        "model = Net().to(\"neuron\")\nquantize_(model, int8_weight_only())\n")


RULES: tuple[type[ReadinessRule], ...] = (SparseTensors, NestedTensors, FunctionTransforms,
                                          ForwardAD, Distributions, FFT, TorchAO)
