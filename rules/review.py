"""NM0xx and NM70x: what the engine itself reports about imports and leftover XLA names.

The engine raises these findings (it knows which references remain after every other rule has
run); their documentation lives here like every other rule's.
"""

from __future__ import annotations

from neuron_migrate.ruleapi import Example, Kind, Rule
from neuron_migrate.ruleapi.findings import (AMBIGUOUS, HELPERS_MODULE, STAR_IMPORT, UNMAPPED,
                                             UNUSED_IMPORT, UNUSED_SUPPRESSION)

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_SETUP_TS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/setup/troubleshooting.html"


class UnusedXlaImport(Rule):
    id = UNUSED_IMPORT
    name = "unused-xla-import"
    kind = Kind.FIX
    summary = "torch_xla imports nothing uses after the migration are removed"
    explanation = """\
What it does: once every use of a torch_xla import has been rewritten, removes the import
(only that name, if the statement imports several). Imports still used by code that needs
review are kept, so the file keeps running as it did until you finish by hand.

Why: TorchNeuron does not need torch_xla, and AWS says not to install the XLA library beside
it; an import left behind would fail on a clean native environment. A bare `import torch_xla`
kept only to register the XLA device is removed too: the `neuron` device registers itself."""
    doc_url = D_SETUP_TS
    example = Example(
        before="import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n\n"
               "device = xm.xla_device()\n",
        after="import torch\n\ndevice = torch.device(\"neuron\")\n",
    )


class UnusedSuppression(Rule):
    id = UNUSED_SUPPRESSION
    name = "unused-suppression"
    kind = Kind.REVIEW
    summary = "a `# neuron-migrate: ignore` comment that silences nothing is reported"
    explanation = """\
What it does: reports `# neuron-migrate: ignore` and `# neuron-migrate: ignore[NMxxx]`
comments on statements where no finding of those rules would be made.

Why: suppressions outlive the code they were written for. Once the line they silenced has been
migrated by hand, a left-over comment would silently hide a future problem on that line.

How suppressions work: the comment silences the listed rules (or every rule, without a list)
on the lines of the statement it is on; `# neuron-migrate: ignore-file` among the comments
before the first statement silences the whole file; `per-file-ignores` in
`[tool.neuron-migrate]` silences rules for files matching a glob."""
    doc_url = D_HOME
    example = Example(
        before="import torch\n\nx = torch.ones(2)  # neuron-migrate: ignore[NM110]\n"
               "y = \"xla\"\n",
        after="import torch\n\nx = torch.ones(2)  # neuron-migrate: ignore[NM110]\n"
              "y = \"xla\"\n",
    )


class UnmappedXlaApi(Rule):
    id = UNMAPPED
    name = "unmapped-xla-api"
    kind = Kind.REVIEW
    summary = "a torch_xla API with no automatic rewrite (yet) is reported with its line"
    explanation = """\
What it does: after every other rule has run, reports each remaining reference to a torch_xla
name, so that nothing XLA-specific is left behind silently. The import it needs is kept.

Why: some XLA APIs have no mechanical native equivalent, and a module passed around as a value
(`self.xm = xm`) cannot be followed. Each needs a decision by someone who knows the code.

What to do: find the native replacement in the TorchNeuron documentation (device placement,
torch.distributed, torch.compile, torch.autocast), rewrite the line, and run neuron-migrate
again: the import goes once nothing uses it."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.runtime as xr\n\ndevices = xr.global_runtime_device_count()\n",
        after="import torch_xla.runtime as xr\n\ndevices = xr.global_runtime_device_count()\n",
    )


class AmbiguousXlaName(Rule):
    id = AMBIGUOUS
    name = "ambiguous-xla-name"
    kind = Kind.REVIEW
    summary = "a name bound both to a torch_xla import and to something else is not rewritten"
    explanation = """\
What it does: reports uses of a name that one statement binds to a torch_xla module and
another binds to something else in the same scope (for example `xm = MyShim()` beside
`import torch_xla.core.xla_model as xm`). A function parameter or local variable that merely
shares the name (`def f(xm): ...`) is a different name and is left alone without a report.

Why: which object the name holds depends on the path the program took, so any rewrite would be
a guess. The usual fallback pattern, `except ImportError: xm = None`, is understood and is not
reported.

What to do: give the two things different names, then run neuron-migrate again."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.core.xla_model as xm\nif cpu:\n    xm = CpuShim()\nxm.mark_step()\n",
        after="import torch_xla.core.xla_model as xm\nif cpu:\n    xm = CpuShim()\n"
              "xm.mark_step()\n",
    )


class XlaStarImport(Rule):
    id = STAR_IMPORT
    name = "xla-star-import"
    kind = Kind.REVIEW
    summary = "`from torch_xla... import *` is kept and reported"
    explanation = """\
What it does: resolves the names neuron-migrate knows (such as `mark_step`) through a star
import from a torch_xla module and rewrites their uses, but never removes the star import.

Why: a star import may provide names the file uses that neuron-migrate has no rule for, so
it cannot prove the import is unused.

What to do: once the file no longer uses any torch_xla name, delete the star import."""
    doc_url = D_SETUP_TS  # AWS's old→new snippet drops the torch_xla imports
    example = Example(
        before="from torch_xla.core.xla_model import *\n",
        after="from torch_xla.core.xla_model import *\n",
    )


class SharedHelpersModule(Rule):
    id = HELPERS_MODULE
    name = "helpers-module"
    kind = Kind.FIX
    summary = ("with `helpers-module` set, the helpers migrated files call are written to that "
               "module of the repository, which they import")
    explanation = """\
What it does: with `helpers-module = "myproj/neuron_helpers.py"` in `[tool.neuron-migrate]`
(a path relative to the configuration's folder), a migrated file imports the helpers it calls
(`from myproj.neuron_helpers import _neuron_save`) instead of defining a copy of each, and the
run writes that module: every helper its files import, with those they call, in a fixed order.
A helper the module already holds stays (files migrated earlier import it); the module changes
only when a helper is missing, so a second `apply` changes nothing. `check` reports that it
would write it. A module edited by hand is not regenerated: missing helpers are appended.

The import name comes from the file's place: a file runs with the folder above its top package
on the import path (its own folder for a script outside any package), so the module must lie
in that folder or in a package below it. A file from which the module cannot be imported is
not rewritten, and the error says where the module would have to be.

Why: a repository of many training scripts otherwise holds the same helpers many times. The
code still never imports neuron-migrate: the module is plain PyTorch in your repository."""
    doc_url = D_HOME
    example = Example.unchanged(  # a whole repository's run: tests/rules/test_helpers_module.py
        "[tool.neuron-migrate]\nhelpers-module = \"myproj/neuron_helpers.py\"\n", "toml")


RULES: tuple[type[Rule], ...] = (UnusedXlaImport, UnusedSuppression, SharedHelpersModule,
                                 UnmappedXlaApi, AmbiguousXlaName, XlaStarImport)
