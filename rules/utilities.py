"""NM302-NM307: the PyTorch/XLA utilities training scripts use around the training itself:
fake data, throughput, progress lines and TensorBoard summaries, metrics reports, profiler
annotations, environment flags.

None of them touches the device, so each becomes a plain-Python helper defined in the user's
file, torch.profiler's counterpart, or a note where what it reported does not exist natively.
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst

from neuron_migrate.ruleapi import (Example, Kind, Outcome, Remove, Replace, Review, Role, Rule,
                                    Site, argument, code, dotted, has_star_args, string)
from neuron_migrate.rules.emitted_helpers import HELPERS

D_HOME = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html"
D_PROF = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/"
          "how-to-profile-pytorch.html")
D_TENSORBOARD = "https://docs.pytorch.org/docs/stable/tensorboard.html"
XM = "torch_xla.core.xla_model"
XU = "torch_xla.utils.utils"
TEST_UTILS = "torch_xla.test.test_utils"
METRICS = "torch_xla.debug.metrics"
PROFILER = "torch_xla.debug.profiler"

METRICS_NOTE = "XLA metrics: none on TorchNeuron; profile with torch.profiler"
"""What a migrated script prints where it printed an XLA metrics report."""

# calls that only show a report: print, master_print, a logger's or a file's methods
_SHOWS = frozenset({"info", "debug", "warning", "warn", "error", "critical", "exception", "log",
                    "write", "print"})


def _defined(*names: str) -> str:
    """The helpers as the engine writes them into a file: each with what it requires first."""
    order: list[str] = []
    for name in names:
        for needed in (*HELPERS[name].requires, name):
            if needed not in order:
                order.append(needed)
    return "".join("\n\n" + HELPERS[n].source for n in order)


def _called_here(node: cst.BaseExpression, site: Site) -> cst.Call | None:
    """The call whose callee `node` is, if it is one."""
    parent = site.parent
    if isinstance(parent, cst.Call) and dotted(parent.func) == dotted(node):
        return parent
    return None


def _shown(site: Site) -> bool:
    """Whether the matched call is an argument of a call that only shows it (print, a
    logger), so that a note in its place changes nothing but the text shown. Anywhere else
    (`assertIn(..., report)`, `report = ...`) the text may decide something."""
    if not isinstance(site.parent, cst.Arg):
        return False
    call = _grandparent(site)
    if not isinstance(call, cst.Call):
        return False
    if site.qualname_of(call.func) == f"{XM}.master_print":
        return True
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "print"
    return isinstance(func, cst.Attribute) and func.attr.value in _SHOWS


def _grandparent(site: Site) -> cst.CSTNode | None:
    """The node around the matched node's parent. `Site` offers only the parent; the engine's
    stack of open nodes (whose top `Site.parent` returns) holds the rest. Without it, nothing
    counts as shown and the report is reviewed."""
    stack = getattr(getattr(site, "_rewriter", None), "parents", None)
    if not isinstance(stack, list) or len(stack) < 2 or stack[-1] is not site.parent:
        return None
    return stack[-2]


def _assigned(node: cst.BaseExpression, site: Site) -> bool:
    """Whether `node` is the target of an assignment or a `del` (not a value read)."""
    parent = site.parent
    if isinstance(parent, (cst.AssignTarget, cst.Del)):
        return True
    if isinstance(parent, (cst.AugAssign, cst.AnnAssign)):
        return dotted(parent.target) == dotted(node)
    return False

class HelperRename(Rule):
    """A utility whose helper takes the same arguments: every reference (a call, or the
    function passed around, as to `xm.add_step_closure`) becomes the helper's name."""

    kind = Kind.FIX
    helpers: ClassVar[dict[str, str]] = {}
    """qualified name -> the helper (rules/emitted_helpers.py) that replaces it"""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.names = frozenset(cls.helpers)

    def on_reference(self, node: cst.Name | cst.Attribute, site: Site) -> Outcome | None:
        if _assigned(node, site):
            return Review(f"`{code(node)}` is assigned here (a patch of the XLA function); "
                          "patch or replace what calls it by hand")
        helper = site.helper(self.helpers[site.qualname or ""])
        what = "call" if _called_here(node, site) is not None else "reference"
        message = f"`{code(node)}` → `{helper.value}`: {self.consequence(node, site)}"
        return Replace(helper, message if what == "call" else message + " (used as a value)")

    def consequence(self, node: cst.Name | cst.Attribute, site: Site) -> str:
        """What the helper does, and what differs, for the finding."""
        return self.summary


class SampleGenerator(HelperRename):
    id = "NM302"
    name = "xla-sample-generator"
    summary = "`xu.SampleGenerator(data, sample_count)` becomes a helper serving the same fake data"
    explanation = """\
What it does: replaces torch_xla's `SampleGenerator` (from `torch_xla.utils.utils`) with a
small class defined in your file that takes the same arguments and serves `data`
`sample_count` times per pass, each pass starting afresh, with the same length.

Why: scripts use it as fake data in place of a DataLoader (`--fake_data`); it has nothing to
do with XLA, but importing it needs torch_xla, which TorchNeuron does not install.

What differs: nothing. The batches stay where `data` was created (usually the CPU), and the
device loader that wraps it moves them, as before."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.utils.utils as xu\n\n"
               "loader = xu.SampleGenerator(data=(x, y), sample_count=100)\n",
        after=_defined("_NeuronSampleGenerator").lstrip("\n")
              + "\n\nloader = _NeuronSampleGenerator(data=(x, y), sample_count=100)\n",
    )
    helpers = {f"{XU}.SampleGenerator": "_NeuronSampleGenerator"}

    def consequence(self, node: cst.Name | cst.Attribute, site: Site) -> str:
        return "the same fake data, `sample_count` times per pass"


class RateTracker(HelperRename):
    id = "NM303"
    name = "xla-rate-tracker"
    summary = "`xm.RateTracker()` becomes a helper class measuring the same rates"
    explanation = """\
What it does: replaces `xm.RateTracker` with a small class defined in your file with the same
methods: `add(count)`, `rate()` (samples per second since the previous call, smoothed with the
previous rate by `smooth_factor`, 0.4 by default or RATE_TRACKER_SMOOTHING) and
`global_rate()` (samples per second since the tracker was created).

Why: the tracker only reads the wall clock; importing it needs torch_xla, which TorchNeuron
does not install.

What differs: nothing in the arithmetic. With eager execution the rate measures the work as it
runs, where under XLA's lazy tensors it measured graph building between synchronisations;
call `torch.neuron.synchronize()` before `rate()` if you need device time."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.core.xla_model as xm\n\ntracker = xm.RateTracker()\n",
        after=_defined("_NeuronRateTracker").lstrip("\n") + "\n\ntracker = _NeuronRateTracker()\n",
    )
    helpers = {f"{XM}.RateTracker": "_NeuronRateTracker"}

    def consequence(self, node: cst.Name | cst.Attribute, site: Site) -> str:
        return "the same add(), rate() and global_rate()"


class EnvironmentUtils(HelperRename):
    id = "NM307"
    name = "xla-env-utils"
    summary = ("`xu.getenv_as(name, type, default)` and `xu.check_env_flag(name)` become helpers "
               "reading the environment the same way")
    explanation = """\
What it does: replaces `getenv_as` and `check_env_flag` from `torch_xla.utils.utils` with
functions defined in your file that take the same arguments: `getenv_as` returns the variable
converted with `type` (a bool from its integer value, so "0" is False) or the default when it
is not set; `check_env_flag` is true for "true" or a positive integer.

Why: they only read `os.environ`; importing them needs torch_xla, which TorchNeuron does not
install.

What differs: nothing. The variable itself may have been an XLA setting that means nothing
natively (XLA_USE_BF16, XLA_FLAGS, ...); NM601/NM602 report those where they are named."""
    doc_url = D_HOME
    example = Example(
        before="import torch_xla.utils.utils as xu\n\n"
               "steps = xu.getenv_as(\"LOG_STEPS\", int, 20)\n",
        after=_defined("_neuron_getenv_as").lstrip("\n")
              + "\n\nsteps = _neuron_getenv_as(\"LOG_STEPS\", int, 20)\n",
    )
    helpers = {f"{XU}.getenv_as": "_neuron_getenv_as",
               f"{XU}.check_env_flag": "_neuron_check_env_flag"}

    def consequence(self, node: cst.Name | cst.Attribute, site: Site) -> str:
        return "reads the environment variable the same way"


class TestUtils(HelperRename):
    id = "NM304"
    name = "xla-test-utils"
    summary = ("`torch_xla.test.test_utils` progress lines and TensorBoard summaries become "
               "helpers in the file")
    explanation = """\
What it does: replaces the helpers of `torch_xla.test.test_utils` that training scripts use
with functions defined in your file that take the same arguments:
`print_training_update` and `print_test_update` print the same progress line (`| Training
Device=neuron/0 Epoch=1 Step=10 Loss=... Rate=... GlobalRate=... Time=...`);
`get_summary_writer(logdir)` returns a `torch.utils.tensorboard.SummaryWriter` when a log
directory is given and None otherwise; `write_to_summary` and `close_summary_writer` write to
and close it, doing nothing for None; `now()` formats the local time.

Why: these print and log; they never touched the device, but importing them needs torch_xla,
which TorchNeuron does not install.

What differs: the device shows as `neuron` with the process's rank (`neuron/1`), where XLA
printed `xla:0/1`. A log directory needs the `tensorboard` package (PyTorch/XLA used
`tensorboardX`; both write the same event files); without one, tensorboard is never imported.
`write_to_summary(..., write_xla_metrics=True)` writes no XLA metrics: there are none natively."""
    doc_url = D_TENSORBOARD
    example = Example(
        before="import torch_xla.test.test_utils as test_utils\n\n"
               "print(\"train begin\", test_utils.now())\n",
        after=_defined("_neuron_now").lstrip("\n")
              + "\n\nprint(\"train begin\", _neuron_now())\n",
    )
    helpers = {f"{TEST_UTILS}.{name}": f"_neuron_{name}" for name in (
        "print_training_update", "print_test_update", "get_summary_writer", "write_to_summary",
        "close_summary_writer", "now")}
    emits = ("torch.distributed.is_initialized", "torch.distributed.get_rank")

    def consequence(self, node: cst.Name | cst.Attribute, site: Site) -> str:
        function = (site.qualname or "").rsplit(".", 1)[-1]
        if function in ("print_training_update", "print_test_update"):
            return "the same progress line, the device shown as `neuron/<rank>`"
        if function == "get_summary_writer":
            return ("a torch.utils.tensorboard SummaryWriter when a log directory is given "
                    "(needs the `tensorboard` package; XLA used tensorboardX), None otherwise")
        if function == "write_to_summary":
            call = _called_here(node, site)
            metrics = argument(call.args, 3, "write_xla_metrics") if call is not None else None
            if metrics is not None and code(metrics.value) != "False":
                return ("the same scalars; `write_xla_metrics` writes nothing: there are no "
                        "XLA metrics natively")
            return "the same scalars, nothing written without a writer"
        if function == "close_summary_writer":
            return "flushes and closes the writer, if there is one"
        return "the local time as text"


class MetricsReport(Rule):
    id = "NM305"
    name = "xla-metrics-report"
    kind = Kind.FIX
    summary = ("a printed or logged `met.metrics_report()` becomes a note that XLA metrics do "
               "not exist natively; `met.clear_all()` is removed")
    explanation = f"""\
What it does: where a script prints or logs `met.metrics_report()` or
`met.short_metrics_report(...)` (from `torch_xla.debug.metrics`, or
`torch_xla._XLAC._xla_metrics_report()` called directly), puts this text in its place:
    "{METRICS_NOTE}"
so that the script keeps running and says why there is no report. Deletes
`met.clear_all()`, `clear_counters()` and `clear_metrics()` statements.

Why: the report counted XLA graph compilations, executions and host-device transfers.
TorchNeuron runs eagerly and compiles through torch.compile; none of those counters exist,
and AWS documents no native report with the same content.

What differs: the report's content is gone. Profile with `torch.profiler` (with Neuron's
ProfilerActivity.PrivateUse1) or Neuron Explorer to see where time goes. Only a report passed
straight to `print`, `xm.master_print` or a logger's or file's method is rewritten; one whose
text is used otherwise (`self.assertIn("CompileTime", met.metrics_report())`, `report =
met.metrics_report()`) is reported for review, like the counter and metric queries
(`counter_value`, `metric_data`, ...: NM707)."""
    doc_url = D_PROF
    example = Example(
        before="import torch_xla.debug.metrics as met\n\nprint(met.metrics_report())\n"
               "met.clear_all()\n",
        after=f"print(\"{METRICS_NOTE}\")\n",
    )
    calls = frozenset({*(f"{METRICS}.{name}" for name in (
        "metrics_report", "short_metrics_report", "clear_all", "clear_counters", "clear_metrics")),
        # the same report and clears, called on the C++ extension directly
        *(f"torch_xla._XLAC.{name}" for name in (
            "_xla_metrics_report", "_short_xla_metrics_report", "_clear_xla_counters",
            "_clear_xla_metrics"))})

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        function = (site.qualname or "").rsplit(".", 1)[-1]
        if function.startswith(("clear_", "_clear_")):
            return Remove(f"delete `{code(node)}`: there are no XLA metrics or counters to "
                          "clear natively")
        if site.role is Role.STATEMENT:
            return Remove(f"delete `{code(node)}`: its report was not used")
        if not _shown(site):
            return Review(f"`{code(node)}`: the report's text is used here, not only shown, and "
                          "XLA metrics do not exist natively; delete what depends on it, or "
                          "measure with torch.profiler")
        note = string(METRICS_NOTE)
        dropped = " (its arguments are dropped)" if node.args else ""
        return Replace(note, f"`{code(node)}` → a note that TorchNeuron has no XLA metrics"
                       f"{dropped}: the report's content is lost; profile with torch.profiler")


class ProfilerAnnotation(Rule):
    id = "NM306"
    name = "xla-profiler-annotation"
    kind = Kind.FIX
    summary = ("`xp.Trace(name)` / `xp.StepTrace(name)` / `@xp.trace_me(name)` become "
               "`torch.profiler.record_function(name)`; the profiler server and its capture "
               "are dropped")
    explanation = """\
What it does: replaces the profiler annotations of `torch_xla.debug.profiler`, `Trace`,
`StepTrace` (as context managers) and `trace_me` (as a decorator), with
`torch.profiler.record_function(name)`, which labels the same region in a torch.profiler
trace. `xp.start_server(port)` is removed (a bare statement) or becomes `None` (its server
assigned to a name); the statements that captured a trace from that server (`xp.trace(...)`,
`xp.trace_detached(...)`) are removed too.

Why: the annotations only named regions for XLA's profiler and cost nothing when no profile
was being captured; record_function does the same for PyTorch's profiler, which Neuron
extends (ProfilerActivity.PrivateUse1). StepTrace also cut the lazy graph at its end, which
eager execution does not need.

What differs: metadata keywords (`step_num=` and the like) are dropped. There is no profiler
server natively, so a run can no longer be captured from outside and the capture writes no
trace files: wrap the steps you want in
`torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])`,
as the Neuron Explorer guide shows."""
    doc_url = D_PROF
    example = Example(
        before="import torch_xla.debug.profiler as xp\n\n"
               "with xp.StepTrace(\"train\", step_num=step):\n    train_step()\n",
        after="import torch\n\nwith torch.profiler.record_function(\"train\"):\n"
              "    train_step()\n",
    )
    calls = frozenset(f"{PROFILER}.{name}" for name in ("Trace", "StepTrace", "trace_me",
                                                        "start_server", "trace",
                                                        "trace_detached"))
    emits = ("torch.profiler.record_function",)

    def on_call(self, node: cst.Call, site: Site) -> Outcome | None:
        if site.qualname == f"{PROFILER}.start_server":
            return self._server(node, site)
        if site.qualname in (f"{PROFILER}.trace", f"{PROFILER}.trace_detached"):
            return Remove(f"delete `{code(node)}`: it captured a trace from XLA's profiler "
                          "server, which does not exist natively; profile the steps with "
                          "torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                          "ProfilerActivity.PrivateUse1]) instead")
        keyword = "scope" if (site.qualname or "").endswith("trace_me") else "name"
        name = argument(node.args, 0, keyword)
        record = site.ref("torch.profiler.record_function")
        if has_star_args(node.args) or name is None or record is None:
            return Review(f"`{code(node)}`: label the region with "
                          "`torch.profiler.record_function(name)`")
        new = node.with_changes(func=record, args=[name.with_changes(
            keyword=None, equal=cst.MaybeSentinel.DEFAULT, comma=cst.MaybeSentinel.DEFAULT)])
        dropped = [code(a).rstrip(", ") for a in node.args if a is not name]
        note = f"; drop {', '.join(dropped)} (profiler metadata)" if dropped else ""
        return Replace(new, f"`{code(node)}` → `{code(new)}`: labels the same region in a "
                       f"torch.profiler trace{note}")

    def _server(self, node: cst.Call, site: Site) -> Outcome:
        message = (f"drop `{code(node)}`: there is no profiler server natively, so this run "
                   "can no longer be captured from outside; profile the steps with "
                   "torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                   "ProfilerActivity.PrivateUse1])")
        if site.role is not Role.EXPRESSION:
            return Remove(message)
        return Replace(cst.Name("None"), message)


RULES: tuple[type[Rule], ...] = (SampleGenerator, RateTracker, TestUtils, MetricsReport,
                                 ProfilerAnnotation, EnvironmentUtils)
