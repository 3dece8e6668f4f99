"""A call that a rule leaves as it is keeps its arguments as they were written.

The rewriter works bottom-up: the arguments of a call are rewritten before a rule looks at the
call. When that rule then leaves the call for review (no safe rewrite, an unsafe fix not
asked for, a suppression), the rewritten arguments would put the native stack's values into a
call of the old stack: `xm.all_reduce(torch.distributed.ReduceOp.SUM, t, groups=g)` runs on
neither. So the call goes back to its original text, and each change made inside it becomes a
review item that says why it was not written: the two are changed together, by hand.
Either way, a rule's message quotes the code as it is in the file, not as the rules below
made it (`quoted_as_written`).
"""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from neuron_migrate.engine.context import Pending
from neuron_migrate.syntax.quote import code
from neuron_migrate.model import Kind

_ONE_LINE = re.compile(r"(?:^|(?<=\S))\s*\n\s*")  # from a run's start: linear in its length


def held_back(inner: list[Pending], call: cst.Call, outer: list[Pending]) -> list[Pending]:
    """The findings made inside a call left as it is, with the changes among them turned into
    review items (the rest as they were). `outer`: the findings about the call itself."""
    why = f"stays for review ({outer[0].rule_id})" if outer else "stays as it is"
    return [replace(p, kind=Kind.REVIEW, applied=False,
                    message=f"{p.message} (not written: `{one_line(code(call))}` around it "
                    f"{why}, and would then run on neither stack; change the two together)")
            if p.applied else p for p in inner]


def quoted_as_written(message: str, updated: cst.CSTNode, original: cst.CSTNode) -> str:
    """`message` with the node it quotes as it stands in the file: rules run bottom-up and
    see a node with the changes inside it already made, so their "before" quote would show
    code the user never wrote (`xm.all_reduce(dist.ReduceOp.SUM, t)`). Only a whole quoted
    span is replaced, so an "after" quote that contains the node stays as written."""
    if updated is original:
        return message
    new, old = code(updated), code(original)
    if new == old:
        return message
    for was, written in ((new, old), (one_line(new), one_line(old))):
        message = message.replace(f"`{was}`", f"`{written}`")
    return message


def anchors(findings: list[Pending]) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """(name, node) for each held-back finding: the XLA name its finding covers, and the
    subtree whose strings it covers (as the rewriter's `_report` takes them)."""
    found: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for finding in findings:
        anchor = finding.anchor
        if anchor is None:
            continue
        head = anchor.func if isinstance(anchor, cst.Call) else anchor
        found.append((head, anchor))
    return found


def one_line(text: str) -> str:
    """Code quoted in a message, its lines joined by single spaces."""
    return _ONE_LINE.sub(" ", text)
