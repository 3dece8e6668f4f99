"""NM8xx: dependencies and containers. Where a project pins or installs the XLA-era stack.

These rules document the decisions `codemod/deps` makes; the scanner reads requirement files,
pyproject.toml, setup files, Pipfiles, lockfiles, conda environments, Dockerfiles, shell
scripts and YAML, and reports under these ids. Each example is checked by the test suite
against the scanner's real output.
"""

from __future__ import annotations

from typing import ClassVar

from neuron_migrate.ruleapi import Example, Rule
from neuron_migrate.ruleapi.deps import ids

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
D_RN = f"{_DOCS}/latest/release-notes/components/torchneuron.html"
D_UPDMAN = f"{_DOCS}/v2.33.0/setup/pytorch/update-manual.html"
D_UPDDLC = f"{_DOCS}/v2.33.0/setup/pytorch/update-dlc.html"
A_NOXLA = (f"{_DOCS}/latest/about-neuron/announcements/neuron2.x/"
           "announce-no-support-pytorch-xla-training.html")
A_NXDT = (f"{_DOCS}/latest/about-neuron/announcements/neuron2.x/"
          "announce-eos-nxdt-nxd-core-training.html")
D_ABOUT = f"{_DOCS}/latest/torch/about-pytorch-neuron.html"
D_RES = f"{_DOCS}/latest/torch/reference/torchneuron-resources.html"
D_XLAENV = (f"{_DOCS}/latest/frameworks/torch/torch-neuronx/api-reference-guide/training/"
            "torch-neuron-envvars.html")
D_DIST = f"{_DOCS}/latest/torch/guides/torch-distributed.html"
D_NPC = (f"{_DOCS}/latest/frameworks/torch/torch-neuronx/api-reference-guide/training/"
         "pytorch-neuron-parallel-compile.html")

NEURON_INDEX = "--extra-index-url https://pip.repos.neuron.amazonaws.com\n"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu\n"


class DependencyRule(Rule):
    """A dependency rule: `severity` says whether the finding blocks the migration."""

    severity: ClassVar[str] = "error"


class XlaLineagePin(DependencyRule):
    id = ids.XLA_LINEAGE
    name = "xla-lineage-torch-neuronx"
    kind = ids.KINDS[id]
    summary = "a torch-neuronx pin whose torch part is 2.9 or lower is the XLA library"
    explanation = """\
What it does: rewrites `torch-neuronx` pins such as 2.9.0.2.15.32035, 2.1.2.2.3.0 or
1.13.1.1.13.0 (with or without a local label), and ranges that admit only such versions, to
`torch-neuronx==2.14.*`. Lockfiles, setup.py and Poetry tables are reported instead.

Why: one package name carries two products. Versions whose first components are a torch
release up to 2.9 are the PyTorch/XLA-based library; TorchNeuron, the native backend, starts
with torch-neuronx 2.13.3.0 and 2.14.3.0 (Neuron 2.33) and pairs with PyTorch of the same minor.

What differs: the native library has a different API; the Python rules migrate the code. Its
torch, compiler and nki pins must move with it (NM804, NM805)."""
    doc_url = D_RN
    example = Example(before="torch-neuronx==2.9.0.2.15.32035\nneuronx-cc==2.*\nnki\n",
                      after="torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
                      language="requirements")


class UnpinnedNeuronx(DependencyRule):
    id = ids.UNPINNED
    name = "unpinned-torch-neuronx"
    kind = ids.KINDS[id]
    summary = "an unpinned torch-neuronx, or a range admitting XLA versions, may install XLA"
    explanation = """\
What it does: pins a bare `torch-neuronx`, or a range such as `>=2.1` or `<2.14` that admits
both lineages, to `torch-neuronx==2.14.*`.

Why: the Neuron pip index serves both the XLA library (up to 2.9.0.2.15.32035) and
TorchNeuron; what an unpinned install resolves to depends on the index, the installed torch
and the resolver. Of the public install sites surveyed, a third carried no version at all.

What differs: nothing in the installed library once it resolves to 2.14; a constraint that
cannot be read as PEP 440 (a Poetry caret) is reported for review."""
    doc_url = D_RN
    example = Example(before="torch-neuronx\nneuronx-cc==2.*\nnki\n",
                      after="torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
                      language="requirements")


class BetaNeuronx(DependencyRule):
    id = ids.BETA
    name = "beta-torch-neuronx"
    kind = ids.KINDS[id]
    severity = "warning"
    summary = "torch-neuronx 2.10 to 2.13 are native beta builds; move to the 2.14 family"
    explanation = """\
What it does: suggests `torch-neuronx==2.14.*` (and `torch==2.14.0` beside it) in place of a
2.10-2.13 pin such as 2.13.3.0. The rewrite is an unsafe fix: applied only with
--unsafe-fixes.

Why: PyTorch 2.10-2.12 builds were private betas with unpublished version strings, and 2.13.3.0
was released alongside 2.14.3.0 in Neuron 2.33; the 2.14 family is the one AWS's install
commands and DLAMI use.

What differs: a new PyTorch minor release; run your tests after moving."""
    doc_url = D_RN
    example = Example(before="torch-neuronx==2.13.3.0\nneuronx-cc==2.*\nnki\n",
                      after="torch-neuronx==2.13.3.0\nneuronx-cc==2.*\nnki\n",
                      language="requirements")


class TorchFamily(DependencyRule):
    id = ids.TORCH_FAMILY
    name = "torch-family-mismatch"
    kind = ids.KINDS[id]
    summary = "torch pinned beside torch-neuronx must be torch==2.14.0"
    explanation = """\
What it does: rewrites a `torch` pin that excludes 2.14.0, in a group that installs
torch-neuronx, to `torch==2.14.0`. An unpinned torch is left alone.

Why: each torch-neuronx wheel is built against one PyTorch minor (2.14.3.0 against torch
2.14.0); an XLA-era `torch==2.1.2` or `torch==2.9.0` beside it cannot be resolved, or
installs a torch the backend was not built for.

What differs: a PyTorch upgrade; torchvision and torchaudio pins need the matching releases,
which this rule does not choose for you."""
    doc_url = D_RN
    example = Example(
        before="torch==2.9.0\ntorch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
        after="torch==2.14.0\ntorch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
        language="requirements")


class CompilerPackages(DependencyRule):
    id = ids.COMPILER_PACKAGES
    name = "native-compiler-packages"
    kind = ids.KINDS[id]
    summary = "TorchNeuron needs neuronx-cc==2.* and nki installed beside torch-neuronx"
    explanation = """\
What it does: adds `neuronx-cc==2.*` and `nki` after torch-neuronx where they are missing
(copying its environment marker), and widens an exact XLA-era compiler pin such as
`neuronx-cc==2.15.141.0` to `neuronx-cc==2.*`.

Why: AWS installs TorchNeuron with `torch-neuronx==2.14.* neuronx-cc==2.* nki`; torch-neuronx
imports nki when it loads, and Neuron 2.33 ships neuronx-cc 2.28.7631.0, which an old exact
compiler pin excludes.

What differs: a newer compiler; NEFFs cached by the old one are rebuilt."""
    doc_url = D_UPDMAN
    example = Example(before="torch-neuronx==2.14.*\n",
                      after="torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
                      language="requirements")


class XlaRuntimePackage(DependencyRule):
    id = ids.XLA_RUNTIME_PACKAGE
    name = "xla-runtime-package"
    kind = ids.KINDS[id]
    summary = "torch-xla and libneuronxla are removed beside torch-neuronx"
    explanation = """\
What it does: removes `torch-xla` (including Neuron's `+torchneuron` builds) and
`libneuronxla` from a group that also installs torch-neuronx; where torch-neuronx is
missing, asks for the native set instead. torch-xla in a project with no Neuron package is left
alone (a TPU or GPU project).

Why: they are PyTorch/XLA and its Neuron PJRT plug-in; TorchNeuron registers the `neuron`
device directly and does not load them, and AWS asks not to mix the two stacks in one
environment.

What differs: Neuron's manifests also list torch-xla 2.10+ for vLLM Neuron, so beside a native
torch-neuronx it is only reported; libneuronxla is also jax-neuronx's plug-in."""
    doc_url = A_NOXLA
    example = Example(
        before=f"{NEURON_INDEX}{CPU_INDEX}torch-neuronx==2.14.*\ntorch-xla==1.13.1+torchneuron7\n"
               "neuronx-cc==2.*\nnki\n",
        after=f"{NEURON_INDEX}{CPU_INDEX}torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
        language="requirements")


class NxdPackage(DependencyRule):
    id = ids.NXD_PACKAGE
    name = "nxd-package"
    kind = ids.KINDS[id]
    summary = "NeuronX Distributed and transformers-neuronx do not run on TorchNeuron"
    explanation = """\
What it does: reports `neuronx-distributed`, `neuronx-distributed-training`,
`neuronx-distributed-inference` and `transformers-neuronx` with what replaces each.

Why: these libraries are built on PyTorch/XLA. NxD training reached end of support with
PyTorch 2.9; its replacement is torch.distributed (DDP, FSDP2, DTensor, pipelining) on the
`neuron` backend, or TorchTitan Neuron for pre-training. transformers-neuronx ended in 2.26
and NxD Inference is superseded by vLLM Neuron on Trn2/Trn3.

What differs: everything the library did for you (sharding, checkpoints, launch) moves into
your code or the replacement framework; there is no mechanical rewrite."""
    doc_url = A_NXDT
    example = Example(before="neuronx-distributed==0.19.0\n",
                      after="neuronx-distributed==0.19.0\n", language="requirements")


class Inf1Package(DependencyRule):
    id = ids.INF1_PACKAGE
    name = "inf1-torch-neuron"
    kind = ids.KINDS[id]
    summary = "torch-neuron is the archived Inf1 product, not a TorchNeuron dependency"
    explanation = """\
What it does: reports `torch-neuron` (no x), the package for first-generation Inferentia
(Inf1), for review.

Why: torch-neuron is a separate, archived product whose versions look like
`1.13.1.2.x`. TorchNeuron runs on Trn2 and Trn3 only, so an Inf1 workload has no native path:
keep it in its own Inf1 environment, or move it to Trn2/Trn3 with `torch-neuronx==2.14.*`.

What differs: moving off Inf1 changes the hardware, the compiler and the API; it is a port,
not a pin change."""
    doc_url = D_ABOUT
    example = Example(before="torch-neuron==1.13.1.2.9.6.0\n",
                      after="torch-neuron==1.13.1.2.9.6.0\n", language="requirements")


class OptimumNeuron(DependencyRule):
    id = ids.OPTIMUM_NEURON
    name = "optimum-neuron"
    kind = ids.KINDS[id]
    severity = "warning"
    summary = "optimum-neuron's support for TorchNeuron is unconfirmed"
    explanation = """\
What it does: reports `optimum-neuron` (with any extras, such as `[neuronx]`) for review.

Why: optimum-neuron was built on the XLA torch-neuronx and NeuronX Distributed. AWS says
Hugging Face transformers, diffusers, PEFT and accelerate run natively on TorchNeuron with no
compatibility layer, but says nothing about optimum-neuron itself.

What differs: check optimum-neuron's release notes for TorchNeuron support before upgrading;
plain transformers may be all you need."""
    doc_url = D_RES
    example = Example(before="optimum-neuron[neuronx]==0.0.28\n",
                      after="optimum-neuron[neuronx]==0.0.28\n", language="requirements")


class CpuIndex(DependencyRule):
    id = ids.CPU_INDEX
    name = "pytorch-cpu-index"
    kind = ids.KINDS[id]
    summary = "the PyTorch CPU wheel index is needed beside the Neuron pip index"
    explanation = """\
What it does: adds `--extra-index-url https://download.pytorch.org/whl/cpu` after a Neuron
pip index option in requirements files, conda pip lists and pip command lines; reports it
where the index is configured elsewhere (pip config, Pipfile sources, uv and Poetry indexes).
Only where the install (the command, the Dockerfile stage, the file) installs TorchNeuron:
torch-neuronx (an XLA-lineage pin is moved to the native one beside this), or torch without
the Inf1 `torch-neuron`. MXNet, TensorFlow and Inf1 (`torch-neuron`, `neuron-cc`) installs
use the Neuron index for packages the CPU index has nothing for, and stay as they are (NM808).

Why: AWS's TorchNeuron install uses two extra indexes, the Neuron pip index and the PyTorch
CPU wheel index, from which torch 2.14.0 itself comes. XLA-era setups configured only the
Neuron index.

What differs: pip may now pick torch from the CPU index rather than PyPI's default CUDA
build, which is what TorchNeuron expects."""
    doc_url = D_UPDMAN
    example = Example(before=f"{NEURON_INDEX}torch-neuronx==2.14.*\nneuronx-cc==2.*\nnki\n",
                      after=f"{NEURON_INDEX}{CPU_INDEX}torch-neuronx==2.14.*\n"
                            "neuronx-cc==2.*\nnki\n",
                      language="requirements")


class XlaImage(DependencyRule):
    id = ids.XLA_IMAGE
    name = "xla-era-image"
    kind = ids.KINDS[id]
    summary = "a Neuron container tag or DLAMI virtualenv from the XLA era"
    explanation = """\
What it does: reports `FROM` lines and YAML `image:` keys naming a Neuron deep-learning
container whose tag carries PyTorch 2.9 or lower or a Neuron SDK before 2.33 (ARG defaults are
resolved, including ARGs declared before the first FROM), and DLAMI virtualenvs such as
`/opt/aws_neuronx_venv_pytorch_2_9`.

Why: those images and virtualenvs ship the XLA library; the DLAMI venv for TorchNeuron is
`/opt/aws_neuronx_venv_torch_neuronx_2_14_0`. The tag of AWS's TorchNeuron training container
is not yet confirmed, so no tag is written for you.

What differs: a new base image changes the OS (Ubuntu 24.04/26.04) and Python (3.12+)."""
    doc_url = D_UPDDLC
    example = Example(
        before="FROM public.ecr.aws/neuron/pytorch-training-neuronx:"
               "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04\n",
        after="FROM public.ecr.aws/neuron/pytorch-training-neuronx:"
              "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04\n",
        language="dockerfile")


class XlaEnvironmentVariable(DependencyRule):
    id = ids.XLA_ENV_VAR
    name = "xla-environment-variable"
    kind = ids.KINDS[id]
    severity = "warning"
    summary = "PyTorch/XLA environment variables set in a container, script or manifest"
    explanation = """\
What it does: reports `ENV`, `export`, command-prefix, `%env`, Makefile `export` and YAML
settings of PJRT_DEVICE, XLA_USE_BF16, XLA_DOWNCAST_BF16, XLA_FLAGS and other XLA_* knobs,
NEURONCORE_NUM_DEVICES, NEURON_COMPILE_CACHE_URL and the neuron_parallel_compile variables,
each with what to do instead. In a shell script, a line that only exports one of the knobs
NM601 removes from Python (`export NEURON_FUSE_SOFTMAX=1`, `export PJRT_DEVICE=NEURON`) is
removed the same way, unless the script reads the variable, the line is in a heredoc or may
be the only command of an `if`/loop body; everything else is reported (a Dockerfile ENV, a
line with other commands, a YAML manifest, XLA_USE_BF16, which changes precision).

Why: TorchNeuron reads none of them. Some carried behaviour that must move into code: the
BF16 variables become `torch.autocast(device_type="neuron")`, the device count becomes
torchrun's `--nproc-per-node`.

What differs: XLA_IR_DEBUG and XLA_HLO_DEBUG are kept (still useful for profiling), as are
NEURON_RT_* and NEURON_CC_FLAGS."""
    doc_url = D_XLAENV
    example = Example(before="ENV PJRT_DEVICE=NEURON XLA_USE_BF16=1\n",
                      after="ENV PJRT_DEVICE=NEURON XLA_USE_BF16=1\n", language="dockerfile")


class ParallelCompile(DependencyRule):
    id = ids.PARALLEL_COMPILE
    name = "neuron-parallel-compile"
    kind = ids.KINDS[id]
    summary = "neuron_parallel_compile pre-compiled XLA graphs; TorchNeuron has no such step"
    explanation = """\
What it does: reports `neuron_parallel_compile` in RUN, CMD and ENTRYPOINT instructions,
shell scripts, notebook lines and YAML commands.

Why: the tool ran a training script once to extract its XLA graphs and compile them in
parallel into the cache. TorchNeuron executes eagerly and compiles only what
`torch.compile(backend="neuron")` wraps, so there are no lazy graphs to extract.

What differs: launch the training command directly; the first steps under torch.compile
compile as they go, so time the steady state."""
    doc_url = D_NPC
    example = Example(before="neuron_parallel_compile torchrun --nproc-per-node=32 train.py\n",
                      after="neuron_parallel_compile torchrun --nproc-per-node=32 train.py\n",
                      language="shell")


class OldInstance(DependencyRule):
    id = ids.OLD_INSTANCE
    name = "inf2-trn1-target"
    kind = ids.KINDS[id]
    severity = "warning"
    summary = "Inf2 and Trn1 targets: TorchNeuron supports Trn2 and Trn3 only"
    explanation = """\
What it does: reports Inf2 and Trn1 instance types (`trn1.32xlarge`, `ml.inf2.48xlarge`) in
scripts, Makefiles, Dockerfiles and YAML, and `NEURON_PLATFORM_TARGET_OVERRIDE` set to trn1 or
inf2: where a workload may be set to run on that hardware. Not reported: a YAML list that
names instance types of several families (a Neuron device plugin's node affinity listing
inf1 to trn2, a form's choices), GitHub issue, pull-request and discussion templates, and
Hugging Face model cards (a `*model_card*` file, or YAML metadata with model-card keys such
as `library_name` and `pipeline_tag`): they list or describe hardware, they do not move a
workload onto it.

Why: TorchNeuron supports Trn2 and Trn3 only. Inf2 and Trn1 users have no native path and
stay on the XLA torch-neuronx 2.9 line, which is in maintenance.

What differs: migrating such a workload means moving it to trn2 or trn3 instances; otherwise
keep its pins on the XLA line and do not apply the dependency fixes to it."""
    doc_url = D_RN
    example = Example(before="aws ec2 run-instances --instance-type trn1.32xlarge\n",
                      after="aws ec2 run-instances --instance-type trn1.32xlarge\n",
                      language="shell")


class Lockfile(DependencyRule):
    id = ids.LOCKFILE
    name = "lockfile-regeneration"
    kind = ids.KINDS[id]
    summary = "a lockfile pins the XLA-era stack; regenerate it, never edit it"
    explanation = """\
What it does: reads Pipfile.lock, poetry.lock, uv.lock, pdm.lock and pip-compile output
(hashed requirements) and reports each XLA-era package they lock, naming the command that
regenerates the file (`pipenv lock`, `poetry lock`, `uv lock`, `pdm lock`, `pip-compile`).

Why: a lockfile records a resolution with hashes; a hand-edited pin no longer matches them.
Fix the source (Pipfile, pyproject.toml, requirements.in) and let the tool resolve again.

What differs: nothing is edited; the regenerated lock will also move transitive packages."""
    doc_url = D_UPDMAN
    example = Example(
        before='version = 1\n\n[[package]]\nname = "torch-neuronx"\nversion = "2.9.0.2.15.32035"\n',
        after='version = 1\n\n[[package]]\nname = "torch-neuronx"\nversion = "2.9.0.2.15.32035"\n',
        language="uv-lock")


class SpawningScriptLaunch(DependencyRule):
    id = ids.LAUNCH
    name = "launch-with-torchrun"
    kind = ids.KINDS[id]
    summary = "a script that spawned its own workers is launched with python: use torchrun"
    explanation = """\
What it does: finds the lines that start a script calling `xmp.spawn` or `torch_xla.launch`
(shell scripts, Dockerfile RUN/CMD/ENTRYPOINT, Kubernetes and compose `command` lists, YAML
`run:` strings, notebook `!python` lines) and rewrites `python train.py ...` or
`python3 -u train.py ...` to `torchrun --nproc-per-node=N train.py ...` when the script is
found, spawns, and gives a literal `nprocs`. An omitted or computed nprocs, `srun`/`mpirun`
launches, interpreter options torchrun cannot pass on and `xla_dist` are reported.

Why: the spawn call started N processes from one command. Migrated (NM220), the script's entry
runs once per process, as torchrun expects: started with `python` it would train on one
process without a word. AWS's distributed guide launches with torchrun.

What differs: torchrun also sets RANK, WORLD_SIZE and the rendezvous variables, and starts
each worker with `python -u`. A specific interpreter (`/opt/venv/bin/python`) is kept:
`... -m torch.distributed.run`. nprocs=1 needs nothing. The line changes only where NM220
turns the spawn call into the entry; `scan --fix` changes the line alone, so migrate the
script too (`apply`). In the example, train.py calls `xmp.spawn(_mp_fn, nprocs=8)`."""
    doc_url = D_DIST
    example = Example(before="python3 -u train.py --epochs 3\n",
                      after="torchrun --nproc-per-node=8 train.py --epochs 3\n",
                      language="shell")
    launched: ClassVar[dict[str, str]] = {"train.py": (
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\n"
        "def _mp_fn(index):\n    pass\n\n"
        "if __name__ == '__main__':\n    xmp.spawn(_mp_fn, nprocs=8)\n")}
    """The files the example's launch line starts (the test writes them beside it)."""


RULES: tuple[type[Rule], ...] = (
    XlaLineagePin, UnpinnedNeuronx, BetaNeuronx, TorchFamily, CompilerPackages,
    XlaRuntimePackage, NxdPackage, Inf1Package, OptimumNeuron, CpuIndex, XlaImage,
    XlaEnvironmentVariable, ParallelCompile, OldInstance, Lockfile, SpawningScriptLaunch,
)
