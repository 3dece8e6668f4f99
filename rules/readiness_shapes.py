"""NM930-NM936: shapes and host syncs under static-shape compilation. TorchNeuron compiles
one graph per input shape and runs eagerly with an asynchronous queue: data-dependent
shapes, host reads and ragged batches turn into graph breaks, stalls and recompiles."""

from __future__ import annotations

import ast

from neuron_migrate.ruleapi import Example, Kind
from neuron_migrate.ruleapi.analysis import ast_dotted
from neuron_migrate.ruleapi.readiness import (Facts, Limit, ReadinessRule, Scope, Where, code,
                                              keyword, lines_of, method)
from neuron_migrate.rules.readiness_links import D_BP, D_COPT

_DATA_DEPENDENT = ("nonzero", "masked_select", "unique", "unique_consecutive", "argwhere")
_HOST_READS = ("item", "tolist", "cpu", "numpy")
_STEP_READS = ("item", "tolist", "cpu")
_COLLATORS = frozenset({"DataCollatorWithPadding", "DataCollatorForSeq2Seq",
                        "DataCollatorForTokenClassification", "DataCollatorForLanguageModeling"})

BUCKETING = """\
    BUCKETS = (128, 256, 512, 1024)  # a few fixed lengths: one compiled graph each

    def collate(batch):
        longest = max(len(item["input_ids"]) for item in batch)
        length = next((b for b in BUCKETS if b >= longest), BUCKETS[-1])
        ids = torch.full((len(batch), length), PAD_ID, dtype=torch.long)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for row, item in enumerate(batch):
            tokens = torch.as_tensor(item["input_ids"][:length])
            ids[row, :len(tokens)] = tokens
            mask[row, :len(tokens)] = 1
        return {"input_ids": ids, "attention_mask": mask}

    loader = DataLoader(dataset, batch_size=32, collate_fn=collate, drop_last=True)"""


class DataDependentShapes(ReadinessRule):
    id = "NM930"
    name = "data-dependent-shapes"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"compile",)
    nodes = (ast.Call, ast.Subscript)
    summary = "data-dependent shapes in compiled code (`nonzero`, `masked_select`, boolean-mask indexing, `unique`, one-argument `torch.where`) break the graph"
    explanation = """\
What it does: in code torch.compile traces (a compiled function, or `forward` of a module
this file compiles, with the methods and submodules it calls) reports operations whose
output shape depends on the data: `nonzero`, `argwhere`, `masked_select`, `unique`,
`unique_consecutive`, `torch.where(condition)` with one argument, and indexing with a
boolean mask (`x[x > 0]`, `x[mask]`).

Why: the neuron backend compiles static shapes. Dynamo cannot put an operator with a
data-dependent output size in a static graph: it breaks the graph there (or raises with
`fullgraph=True`), runs the operator eagerly, and the code after it compiles again for every
new size.

What differs: nothing is rewritten. Keep shapes fixed: `torch.where(mask, x, 0)` instead of
`x[mask]`, a masked sum `(x * mask).sum()` instead of `x[mask].sum()`, `torch.topk` with a
fixed k instead of `nonzero`, and a padded `unique` with a fixed size if one is needed."""
    doc_url = D_COPT
    example = Example.unchanged(
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x[x > 0].sum()\n\n\nmodel = Net().to(\"neuron\")\n"
        "model.compile(backend=\"neuron\", dynamic=False)\n")

    scope = Scope.COMPILED

    def check(self, node: ast.AST, where: Where) -> str | None:
        if not where.compiled:
            return None
        if isinstance(node, ast.Subscript):
            return self._mask_index(node, where)
        call: ast.Call = node  # type: ignore[assignment]
        qualname = where.qualname(call.func) or ""
        name = qualname.removeprefix("torch.") if qualname.startswith("torch.") else None
        if name == "where" and len(call.args) == 1 and not call.keywords:
            return (f"`{code(call)}`: one-argument torch.where returns indices whose number "
                    "depends on the data; " + _BREAK)
        if name in _DATA_DEPENDENT or (name is None and method(call, *_DATA_DEPENDENT)):
            return f"`{code(call)}`: its output shape depends on the data; {_BREAK}"
        return None

    @staticmethod
    def _mask_index(node: ast.Subscript, where: Where) -> str | None:
        if not isinstance(node.ctx, ast.Load):
            return None
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(_boolean(p) for p in parts):
            return (f"`{code(node)}`: indexing with a boolean mask gives a data-dependent "
                    f"shape; {_BREAK}")
        return None


_BREAK = ("under the static-shape neuron compiler this breaks the graph (an error with "
          "fullgraph=True) and recompiles per size; keep shapes fixed (torch.where(mask, x, 0), "
          "a masked sum)")


def _boolean(expr: ast.AST) -> bool:
    if isinstance(expr, ast.Compare) and not any(isinstance(op, (ast.Is, ast.IsNot, ast.In,
                                                                 ast.NotIn))
                                                 for op in expr.ops):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return _boolean(expr.operand) or _mask_name(expr.operand)
    if method(expr, "bool"):
        return True
    return _mask_name(expr)


def _mask_name(expr: ast.AST) -> bool:
    name = ast_dotted(expr)
    return name is not None and name.rsplit(".", 1)[-1].lower().endswith("mask")


class HostSyncInCompiled(ReadinessRule):
    id = "NM931"
    name = "host-read-in-compiled-code"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"item(", b"tolist(", b"cpu", b"numpy(")
    also = (b"compile",)
    summary = "`.item()`, `.tolist()`, `.cpu()`, `.numpy()` in compiled code break the graph and wait for the device"
    explanation = """\
What it does: in code torch.compile traces (a compiled function, or `forward` of a module
this file compiles, with what it calls) reports `.item()`, `.tolist()`, `.cpu()` and
`.numpy()`.

Why: each reads a device value on the host. Dynamo cannot keep that in the graph: it breaks
the graph there (or raises with `fullgraph=True`), the device queue drains before the value
comes back, and the rest of the function compiles as a separate graph, which may recompile
for every value that feeds control flow.

What differs: nothing is rewritten. Keep the value a tensor inside compiled code (return it,
compare with `torch.where`), and read it on the host after the compiled call, ideally every
N steps."""
    doc_url = D_COPT
    example = Example.unchanged(
        "import torch\n\n\n@torch.compile(backend=\"neuron\", dynamic=False)\n"
        "def accuracy(logits, labels):\n    return (logits.argmax(-1) == labels).float().mean().item()\n\n\n"
        "print(accuracy(logits.to(\"neuron\"), labels))\n")

    scope = Scope.COMPILED

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named((*_HOST_READS, "to")))  # host_read

    def check(self, node: ast.AST, where: Where) -> str | None:
        if not where.compiled or not host_read(node, _HOST_READS):
            return None
        return (f"`{code(node)}` in compiled code reads a device value on the host: a graph "
                "break and a device sync (an error with fullgraph=True)")


class HostSyncPerStep(ReadinessRule):
    id = "NM932"
    name = "host-read-every-step"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"item(", b"tolist(", b"cpu")
    summary = "`.item()`, `.tolist()`, `.cpu()` on every training step stall TorchNeuron's asynchronous queue"
    explanation = """\
What it does: reports `.item()`, `.tolist()` and `.cpu()` that run on every step: in the
body of a loop that calls `backward()`, or of a step function called from a loop, or of a loop
that calls a compiled model or function (an evaluation loop: `model = torch.compile(model)`,
then `loss.item()` per batch), outside any `if` (a read every N steps, under
`if step % N == 0:`, is not reported).

Why: TorchNeuron runs eagerly but asynchronously: operations are queued and the host goes on
to the next step. Reading a value on the host waits until the device has caught up, every
step, so the host and the device take turns instead of overlapping (the best-practices guide
names these host syncs). `total += loss.item()` in the loop is the usual case.

What differs: nothing is rewritten. Accumulate on the device (`total += loss.detach()`) and
read once per epoch, or read every N steps under an `if`."""
    doc_url = D_BP
    example = Example.unchanged(
        "import torch\n\nmodel = Net().to(\"neuron\")\nfor batch, labels in loader:\n"
        "    loss = loss_fn(model(batch.to(\"neuron\")), labels.to(\"neuron\"))\n"
        "    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n"
        "    total += loss.item()\n")

    scope = Scope.STEP

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named((*_STEP_READS, "to")))  # host_read

    def check(self, node: ast.AST, where: Where) -> str | None:
        if where.compiled or not where.per_step or not host_read(node, _STEP_READS):
            return None
        return (f"`{code(node)}` runs on every step and waits for the device "
                "(a host sync); accumulate on the device or read every N steps")


def host_read(node: ast.AST, methods: tuple[str, ...]) -> bool:
    """`x.item()`, `x.cpu()`, ... (no arguments), or `x.to("cpu")`."""
    if not isinstance(node, ast.Call):
        return False
    if method(node, *methods):
        return not node.args
    if method(node, "to") and node.args:
        first = node.args[0]
        if isinstance(first, ast.Call) and ast_dotted(first.func) in ("torch.device", "device") \
                and first.args:
            first = first.args[0]
        return isinstance(first, ast.Constant) and first.value == "cpu"
    return False


def _data_loader(call: ast.Call, where: Where) -> bool:
    qualname = where.qualname(call.func)
    if qualname is not None:
        return qualname.startswith("torch.utils.data") and qualname.endswith(".DataLoader")
    return False


class DataLoaderLastBatch(ReadinessRule):
    id = "NM935"
    name = "compiled-last-batch"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"DataLoader",)
    summary = "a DataLoader without `drop_last=True` in a file that compiles its model: the smaller last batch compiles another graph"
    explanation = """\
What it does: in a file that compiles a model or function (torch.compile, Module.compile,
torch_xla.compile) or imports torch_xla (XLA compiled every step, and the migration compiles
the model: NM503), reports `DataLoader(...)` calls with a `batch_size` other than 1 and no
`drop_last=True` (and no `batch_sampler`).

Why: the neuron backend compiles one graph per input shape. Unless the dataset size is a
multiple of the batch size, the last batch of every epoch is smaller: a new shape, so a new
graph compiles (minutes on a large model), the first time and whenever the cache misses.

What differs: nothing is rewritten, since dropping the last batch changes which samples an
epoch trains on. Pass `drop_last=True` to the training loader; for evaluation, where every
sample counts, pad the last batch to the full size and mask the padded rows."""
    doc_url = D_COPT
    example = Example.unchanged(
        "import torch\nfrom torch.utils.data import DataLoader\n\n"
        "model = Net().to(\"neuron\")\nmodel.compile(backend=\"neuron\", dynamic=False)\n"
        "loader = DataLoader(dataset, batch_size=32, shuffle=True)\n")

    def applies(self, facts: Facts) -> bool:
        return facts.compiles

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named(("DataLoader",)))  # _data_loader

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        if not where.facts.compiles or not _data_loader(call, where):
            return None
        if any(k.arg is None for k in call.keywords) or keyword(call, "batch_sampler"):
            return None
        size = keyword(call, "batch_size") or (call.args[1] if len(call.args) > 1 else None)
        if size is None or isinstance(size, ast.Constant) and size.value in (1, None):
            return None
        drop = keyword(call, "drop_last") or (call.args[-1] if len(call.args) > 9 else None)
        if isinstance(drop, ast.Constant) and drop.value is True:
            return None
        if drop is not None and not isinstance(drop, ast.Constant):
            return None  # computed: the user chose
        return (f"`{code(call)}` feeds a compiled model without drop_last=True: the smaller "
                "last batch compiles another graph every epoch")


class PadToLongest(ReadinessRule):
    id = "NM936"
    name = "compiled-pad-to-longest"
    kind = Kind.REVIEW
    limit = Limit.SLOWS
    needs = (b"DataLoader",)
    summary = "a collate_fn that pads each batch to its longest sequence compiles one graph per length: bucket to a few lengths"
    explanation = f"""\
What it does: in a file that compiles a model or function, reports a `DataLoader` whose
`collate_fn` pads each batch to the longest sequence in it: a function of this file that
calls `pad_sequence` or a tokenizer with `padding=True`/`"longest"`, or a Hugging Face
`DataCollatorWithPadding` (or Seq2Seq, TokenClassification, LanguageModeling collator)
without `padding="max_length"` or `pad_to_multiple_of`.

Why: the neuron backend compiles one graph per input shape. Padding to the longest sequence
of each batch makes the sequence length vary from batch to batch, so nearly every batch
compiles a new graph (each can take minutes) until Dynamo's recompile limit, after which the
model runs eagerly.

What differs: nothing is rewritten. Pad to one of a few fixed lengths (bucketing):
`pad_to_multiple_of=128` on a Hugging Face collator, or a collate function such as:

{BUCKETING}"""
    doc_url = D_COPT
    example = Example.unchanged(
        "import torch\nfrom torch.nn.utils.rnn import pad_sequence\n"
        "from torch.utils.data import DataLoader\n\n\ndef collate(batch):\n"
        "    return pad_sequence(batch, batch_first=True)\n\n\n"
        "model = Net().to(\"neuron\")\nmodel.compile(backend=\"neuron\", dynamic=False)\n"
        "loader = DataLoader(dataset, batch_size=8, collate_fn=collate, drop_last=True)\n")

    def applies(self, facts: Facts) -> bool:
        return facts.compiles

    def candidates(self, facts: Facts, data: bytes) -> set[int]:
        return lines_of(facts.calls_named(("DataLoader",)))  # _data_loader

    def check(self, node: ast.AST, where: Where) -> str | None:
        call: ast.Call = node  # type: ignore[assignment]
        if not where.facts.compiles or not _data_loader(call, where):
            return None
        collate = keyword(call, "collate_fn")
        if collate is None:
            return None
        how = self._pads(collate, where, 0)
        if how is None:
            return None
        return (f"`collate_fn={code(collate)}` {how}, so every batch length compiles another "
                "graph; pad to a few fixed lengths (bucketing, see `neuron-migrate explain "
                "NM936`)")

    def _pads(self, expr: ast.AST, where: Where, depth: int) -> str | None:
        if depth > 3:
            return None
        if isinstance(expr, ast.Call):
            name = (where.qualname(expr.func) or ast_dotted(expr.func) or "").rsplit(".", 1)[-1]
            if name in _COLLATORS:
                padding = keyword(expr, "padding")
                fixed = isinstance(padding, ast.Constant) and padding.value == "max_length"
                if keyword(expr, "pad_to_multiple_of") is None and not fixed:
                    return f"({name}) pads each batch to its longest sequence"
            return None
        if isinstance(expr, ast.Lambda):
            return self._body_pads([expr.body], where)
        name = ast_dotted(expr)
        if name is None:
            return None
        short = name.rsplit(".", 1)[-1]
        if "." not in name or name.startswith("self."):
            for function in where.facts.functions.get(short, ()):
                found = self._body_pads(function.body, where)
                if found:
                    return found
        for value in where.facts.assigned.get(name, ()):
            found = self._pads(value, where, depth + 1)
            if found:
                return found
        return None

    @staticmethod
    def _body_pads(body: list, where: Where) -> str | None:  # type: ignore[type-arg]
        for statement in body:
            for node in ast.walk(statement):
                if not isinstance(node, ast.Call):
                    continue
                name = where.qualname(node.func) or ast_dotted(node.func) or ""
                if name.endswith("pad_sequence"):
                    return "pads each batch to its longest sequence (pad_sequence)"
                padding = keyword(node, "padding")
                if isinstance(padding, ast.Constant) and padding.value in (True, "longest") \
                        and keyword(node, "pad_to_multiple_of") is None:
                    return f"pads each batch to its longest sequence (padding={padding.value!r})"
        return None


RULES: tuple[type[ReadinessRule], ...] = (DataDependentShapes, HostSyncInCompiled,
                                          HostSyncPerStep, DataLoaderLastBatch, PadToLongest)
