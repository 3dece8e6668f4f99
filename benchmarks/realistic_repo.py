"""A deterministic repository shaped like the public Neuron repositories, for `run.py
--profile realistic`.

The synthetic profile (synthetic_repo.py) has short modules with a few XLA calls each. Real
Neuron code is heavier per file: across 15 public AWS Neuron, PyTorch/XLA, Hugging Face and
sample repositories, 17% of the Python files hold XLA-era tokens, and those average 377 lines
(the others 185) and carry 29% of all lines; 41 of 229 notebooks use XLA; Dockerfiles and
requirements files pin the Neuron stack. This profile matches those proportions: XLA-era
training scripts and libraries of 300-400 lines with many flagged statements (devices, steps,
loaders, collectives, launch, environment, device strings) among ordinary model and utility
code; plain modules of 100-270 lines; notebooks with install and XLA cells; Dockerfiles and
requirements with pins. Everything here is written for the benchmark. Same seed, same tree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

XLA_SHARE = 0.17
NOTEBOOKS_PER_FILE = 229 / 5241
XLA_NOTEBOOK_SHARE = 41 / 229
CONTAINERS_PER_FILE = 110 / 5241

IMPORT_SETS = [
    ["import torch_xla.core.xla_model as xm",
     "import torch_xla.distributed.parallel_loader as pl",
     "import torch_xla.distributed.xla_multiprocessing as xmp"],
    ["import torch_xla",
     "import torch_xla.core.xla_model as xm",
     "import torch_xla.runtime as xr",
     "import torch_xla.debug.metrics as met",
     "import torch_xla.distributed.xla_backend  # noqa: F401",
     "import torch.distributed as dist"],
    ["from torch_xla.core import xla_model as xm",
     "from torch_xla.distributed.parallel_loader import MpDeviceLoader",
     "import torch_xla.utils.utils as xu"],
]

ENVIRONMENT = [
    'os.environ["XLA_USE_BF16"] = "1"',
    'os.environ.setdefault("NEURON_CC_FLAGS", "--model-type=transformer")',
    'os.environ["PJRT_DEVICE"] = "NEURON"',
    'os.environ["XLA_IR_DEBUG"] = "0"',
]

# Each block is the body of a training-side function; {n} numbers its locals.
XLA_BLOCKS = [
    """    device = xm.xla_device()
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)""",
    """    world_size = xm.xrt_world_size()
    rank = xm.get_ordinal()
    sampler{n} = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader{n} = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                           sampler=sampler{n}, drop_last=True)""",
    """    model.train()
    running{n} = 0.0
    for step, (inputs, labels) in enumerate(loader):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = F.cross_entropy(outputs, labels)
        loss.backward()
        xm.optimizer_step(optimizer)
        running{n} += loss.detach()
        if step % args.log_every == 0:
            xm.master_print(f"step {{step}} loss {{loss.item():.4f}}")
        xm.mark_step()""",
    """    for batch in loader:
        batch = {{k: v.to(device) for k, v in batch.items()}}
        loss = model(**batch).loss / args.accumulate
        loss.backward()
        if (step + 1) % args.accumulate == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            xm.mark_step()
        step += 1""",
    """    if xm.is_master_ordinal():
        os.makedirs(args.output_dir, exist_ok=True)
    xm.rendezvous("checkpoint")
    xm.save(model.state_dict(), os.path.join(args.output_dir, f"model_{{epoch}}.pt"))""",
    """    total{n} = torch.tensor(correct, device=device, dtype=torch.float32)
    total{n} = xm.all_reduce(xm.REDUCE_SUM, total{n})
    accuracy{n} = total{n}.item() / max(seen, 1)
    xm.master_print(f"accuracy {{accuracy{n}:.3f}}")""",
    """    mask{n} = torch.ones(args.batch_size, args.seq_len, device="xla")
    if mask{n}.device.type == "xla":
        mask{n} = mask{n}.to(torch.bfloat16)
    xm.wait_device_ops()""",
    """    start{n} = time.time()
    xm.mark_step()
    xm.wait_device_ops()
    elapsed{n} = time.time() - start{n}
    if xm.get_ordinal() == 0:
        print(f"throughput {{args.batch_size * args.log_every / elapsed{n}:.1f}} samples/s")""",
]

XLA_EXTRA = {
    "xr": """    if xr.world_size() > 1:
        rank{n} = xr.global_ordinal()
        print(f"rank {{rank{n}}} of {{xr.world_size()}}")""",
    "met": """    if args.debug:
        print(met.metrics_report())""",
    "dist": """    dist.init_process_group("xla", init_method="xla://")
    group{n} = dist.new_group(list(range(dist.get_world_size())))""",
    "pl": """    device_loader{n} = pl.MpDeviceLoader(loader, device)
    for inputs, labels in device_loader{n}:
        loss = F.mse_loss(model(inputs), labels)
        loss.backward()
        xm.optimizer_step(optimizer)""",
    "MpDeviceLoader": """    device_loader{n} = MpDeviceLoader(loader, device)
    for inputs, labels in device_loader{n}:
        loss = F.mse_loss(model(inputs), labels)
        loss.backward()
        xm.optimizer_step(optimizer)""",
}

PLAIN_BLOCKS = [
    """    hidden = self.dropout(F.gelu(self.fc1(x)))
    hidden = self.norm(hidden + x)
    return self.fc2(hidden)""",
    """    values = [v * scale for v in range(count) if v % 3]
    mean = sum(values) / max(len(values), 1)
    spread = sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)
    return mean, math.sqrt(spread)""",
    """    with open(path, encoding="utf-8") as handle:
        rows = [line.rstrip("\\n").split(",") for line in handle if line.strip()]
    header, *body = rows
    return [dict(zip(header, row)) for row in body]""",
    """    try:
        result = compute(a, b)
    except (ValueError, ZeroDivisionError) as error:
        logger.warning("falling back: %s", error)
        result = None
    return result""",
    """    parts = name.split(".")
    for index, part in enumerate(parts):
        if part.isdigit():
            parts[index] = "[" + part + "]"
    return ".".join(parts).replace(".[", "[")""",
    """    config = dict(defaults)
    for key, value in overrides.items():
        if key not in config:
            raise KeyError(f"unknown option {{key!r}}")
        config[key] = type(config[key])(value) if config[key] is not None else value
    return config""",
    """    scores = torch.softmax(logits / temperature, dim=-1)
    top = torch.topk(scores, k=min(k, scores.shape[-1]), dim=-1)
    return top.values, top.indices""",
]

MODEL = '''class Block{n}(nn.Module):
    """A residual feed-forward block."""

    def __init__(self, width: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)
        self.norm = nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.dropout(F.gelu(self.fc1(x)))
        return self.norm(self.fc2(hidden) + x)
'''

ARGUMENTS = '''def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="train on Trainium")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--output-dir", default="checkpoints")
    parser.add_argument("--debug", action="store_true")
    return parser.parse_args(argv)
'''

LAUNCHES = [
    '''def _mp_fn(index, args):
    torch.manual_seed(args.seed if hasattr(args, "seed") else 0)
    train(args)


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(parse_args(),))
''',
    '''def main():
    args = parse_args()
    train(args)


if __name__ == "__main__":
    main()
''',
]

HEADER = '''"""{title}."""

import argparse
import logging
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
'''


def _function(rng: random.Random, name: str, blocks: list[str], count: int, number: int) -> str:
    body = "\n".join(rng.choice(blocks).format(n=number * 10 + i) for i in range(count))
    return (f"def {name}(model, loader, optimizer, dataset, args, device=None, epoch=0, step=0,\n"
            f"        correct=0, seen=0, scale=1.0, count=0, path='', name='', compute=None,\n"
            f"        a=None, b=None, defaults=(), overrides={{}}, logits=None, k=1,\n"
            f"        temperature=1.0, x=None, self=None):\n"
            f"    \"\"\"{name.replace('_', ' ').capitalize()}.\"\"\"\n{body}\n")


def _plain_helpers(rng: random.Random, lines: int, start: int) -> list[str]:
    parts, total, number = [], 0, start
    while total < lines:
        part = _function(rng, f"helper_{number}", PLAIN_BLOCKS, rng.randint(1, 3), number) \
            if rng.random() < 0.7 else MODEL.format(n=number)
        parts.append(part)
        total += part.count("\n") + 2
        number += 1
    return parts


def xla_module(rng: random.Random, index: int) -> str:
    """A training script or library module of 300-400 lines."""
    target = rng.randint(300, 400)
    imports = rng.choice(IMPORT_SETS)
    text = HEADER.format(title=f"Training entry point {index}") + "\n".join(imports) + "\n\n"
    text += "logger = logging.getLogger(__name__)\n"
    text += "\n".join(rng.sample(ENVIRONMENT, rng.randint(1, 3))) + "\n\n\n"
    extras = [block for name, block in XLA_EXTRA.items()
              if any(line.endswith((f" as {name}", f" {name}")) for line in imports)]
    functions = [_function(rng, f"train_part_{n}", XLA_BLOCKS + extras, rng.randint(2, 4), n)
                 for n in range(rng.randint(3, 6))]
    functions.append(_function(rng, "train", XLA_BLOCKS + extras, 4, 99))
    launch = rng.choice(LAUNCHES) if any("xmp" in line for line in imports) else LAUNCHES[1]
    fixed = text + ARGUMENTS + "\n\n" + "\n\n".join(functions) + "\n\n" + launch
    helpers = _plain_helpers(rng, target - fixed.count("\n"), 0)
    middle = "\n\n".join([ARGUMENTS, *helpers, *functions])
    return text + middle + "\n\n" + launch


def plain_module(rng: random.Random, index: int) -> str:
    """Ordinary model and utility code, 100-270 lines."""
    text = HEADER.format(title=f"Utilities {index}") + "\nlogger = logging.getLogger(__name__)\n\n\n"
    return text + "\n\n".join(_plain_helpers(rng, rng.randint(80, 250), 0))


def _cell(kind: str, source: str) -> dict[str, object]:
    cell: dict[str, object] = {"cell_type": kind, "metadata": {},
                               "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def notebook(rng: random.Random, xla: bool) -> str:
    cells = [_cell("markdown", "# Fine-tuning walkthrough\n\nRun each cell in order.\n")]
    if xla:
        cells += [
            _cell("code", "%pip install torch-neuronx==2.1.2.2.3.0 neuronx-cc==2.15.141.0 "
                          "torch-xla==2.1.2 --extra-index-url "
                          "https://pip.repos.neuron.amazonaws.com\n"),
            _cell("code", "import os\nimport torch\nimport torch_xla.core.xla_model as xm\n"
                          "os.environ['XLA_USE_BF16'] = '1'\ndevice = xm.xla_device()\n"),
            _cell("code", "model = torch.nn.Linear(16, 4).to(device)\n"
                          "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                          "for step in range(10):\n"
                          "    loss = model(torch.randn(8, 16, device=device)).sum()\n"
                          "    loss.backward()\n    optimizer.step()\n    xm.mark_step()\n"
                          "    xm.master_print(step, loss.item())\n"),
            _cell("code", "xm.save(model.state_dict(), 'model.pt')\n"),
        ]
    else:
        cells += [
            _cell("code", "!pip install pandas matplotlib\n"),
            _cell("code", "import pandas as pd\nframe = pd.DataFrame({'a': range(10)})\n"
                          "frame.describe()\n"),
        ]
    cells += [_cell("markdown", f"Notes {rng.randint(0, 10**6)}.\n")]
    return json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def requirements(rng: random.Random) -> str:
    neuron = rng.choice([
        "torch-neuronx==2.1.2.2.3.0\ntorch-xla==2.1.2\nneuronx-cc==2.15.141.0\n",
        "torch-neuronx==1.13.1.1.13.1\nneuronx-cc==2.*\nneuronx_distributed>=0.8\n",
        "torch==2.1.2\ntorch_neuronx==2.1.2.*\nlibneuronxla==2.0.965\n",
    ])
    return ("--extra-index-url https://pip.repos.neuron.amazonaws.com\n" + neuron +
            "transformers==4.36.2\ndatasets>=2.18\naccelerate==0.23.0\nnumpy<2\n")


def dockerfile(rng: random.Random) -> str:
    version = rng.choice(["2.1.2.2.3.0", "1.13.1.1.13.1"])
    return (f"ARG NEURONX_VERSION={version}\n"
            "FROM public.ecr.aws/neuron/pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.2"
            "-ubuntu20.04\n"
            "ENV PJRT_DEVICE=NEURON \\\n    XLA_USE_BF16=1 \\\n    NEURON_RT_LOG_LEVEL=WARNING\n"
            "RUN pip install --no-cache-dir \\\n"
            "        --extra-index-url=https://pip.repos.neuron.amazonaws.com \\\n"
            "        torch-neuronx==${NEURONX_VERSION} torch-xla neuronx-cc==2.* && \\\n"
            "    rm -rf /root/.cache\n"
            "COPY requirements.txt /opt/app/\n"
            "RUN pip install -r /opt/app/requirements.txt\n"
            "COPY . /opt/app\nWORKDIR /opt/app\n"
            'ENTRYPOINT ["torchrun", "--nproc-per-node=32", "train_0.py"]\n')


def generate(root: Path, files: int, seed: int = 17) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {"python": 0, "xla": 0, "notebooks": 0, "xla_notebooks": 0, "requirements": 0,
              "dockerfiles": 0}
    for index in range(files):
        package = root / f"pkg{index % 40}" / f"sub{index % 6}"
        package.mkdir(parents=True, exist_ok=True)
        xla = rng.random() < XLA_SHARE
        source = xla_module(rng, index) if xla else plain_module(rng, index)
        (package / f"{'train' if xla else 'module'}_{index}.py").write_text(source)
        counts["python"] += 1
        counts["xla"] += xla
        if rng.random() < NOTEBOOKS_PER_FILE:
            xla_notebook = rng.random() < XLA_NOTEBOOK_SHARE
            (package / f"walkthrough_{index}.ipynb").write_text(notebook(rng, xla_notebook))
            counts["notebooks"] += 1
            counts["xla_notebooks"] += xla_notebook
        if rng.random() < CONTAINERS_PER_FILE and not (package / "Dockerfile").exists():
            (package / "requirements.txt").write_text(requirements(rng))
            (package / "Dockerfile").write_text(dockerfile(rng))
            counts["requirements"] += 1
            counts["dockerfiles"] += 1
    return counts
