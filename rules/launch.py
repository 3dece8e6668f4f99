"""NM220: launching. `xmp.spawn` and `torch_xla.launch` give way to torchrun."""

from __future__ import annotations

import shlex

import libcst as cst

from codemod.model import Kind
from codemod.rule import Example, Outcome, Review, Rule, Site
from codemod.quote import code
from rules.support import argument, has_star_args, keyword, string_value

D_DIST = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html"


class Spawn(Rule):
    id = "NM220"
    name = "xmp-spawn"
    kind = Kind.REVIEW
    summary = "`xmp.spawn` / `torch_xla.launch` are replaced by launching with torchrun"
    explanation = """\
What it does: reports `xmp.spawn(fn, args=..., nprocs=..., start_method=...)` and
`torch_xla.launch(fn, args=...)` with the torchrun command line that replaces them and the
call to put in their place.

Why: TorchNeuron uses standard torch.distributed: each process is started by torchrun, which
sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and the script calls its entry
function once. AWS's distributed guide launches this way.

What to do: replace the call with `fn(int(os.environ["LOCAL_RANK"]), *args)` and launch with
`torchrun --nproc-per-node=N script.py`. When `nprocs` was omitted, PJRT started one process
per NeuronCore on the instance; pass that count to torchrun (AWS's tutorial uses 64 on a
trn2.48xlarge). `start_method="fork"` has no equivalent: torchrun starts fresh processes, and
the native runtime refuses to be forked after it has started."""
    doc_url = D_DIST
    example = Example(
        before="import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
               "xmp.spawn(_mp_fn, args=(flags,))\n",
        after="import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
              "xmp.spawn(_mp_fn, args=(flags,))\n",
    )
    calls = frozenset({"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch",
                       "torch_xla.torch_xla.launch"})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if has_star_args(node.args):
            return Review(f"`{code(node)}`: launch with torchrun instead")
        fn = argument(node.args, 0, "fn")
        args = argument(node.args, 1, "args")
        nprocs = argument(node.args, 2, "nprocs") if "spawn" in (site.qualname or "") else None
        start_arg = keyword(node.args, "start_method")
        start = string_value(start_arg.value) if start_arg is not None else None
        count = code(nprocs.value) if nprocs is not None else None
        if count in (None, "None"):
            count_text = "N"
            note = ("nprocs was omitted, so PJRT ran one process per NeuronCore on the "
                    "instance: use that count for N")
        elif count.isdigit():
            count_text, note = count, f"nprocs={count}"
        else:
            count_text, note = "N", f"nprocs came from `{count}`: use its value for N"
        command = f"torchrun --nproc-per-node={count_text} {shlex.quote(site.path)}"
        if args is None:
            call_args = ""
        elif isinstance(args.value, cst.Tuple):
            call_args = "".join(f", {code(e.value)}" for e in args.value.elements)
        else:
            call_args = f", *{code(args.value)}"
        entry = code(fn.value) if fn is not None else "fn"
        suggestion = f'{entry}(int(os.environ["LOCAL_RANK"]){call_args})'
        fork = " start_method='fork' has no equivalent: torchrun starts fresh processes " \
            "and the native runtime cannot be forked once started." if start == "fork" else ""
        return Review(f"launch with `{command}` and call the entry function directly ({note})."
                      f"{fork}", suggestion=suggestion)


RULES: tuple[type[Rule], ...] = (Spawn,)
