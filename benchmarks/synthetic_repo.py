"""A deterministic synthetic repository shaped like the ones neuron-migrate meets.

About 15% of the Python files are XLA-era training and utility modules using the patterns
public XLA-era repositories use (canonical and other aliases, symbol imports, mark_step
loops, device strings, collectives, loaders); the rest is ordinary PyTorch and utility code.
Notebooks, requirements files and Dockerfiles are mixed in. Same seed, same tree.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

XLA_IMPORTS = [
    "import torch_xla.core.xla_model as xm",
    "from torch_xla.core import xla_model as xm",
    "import torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr",
]
XLA_BODY = [
    "    device = xm.xla_device()\n    model = model.to(device)",
    "    for step, batch in enumerate(loader):\n        loss = model(batch.to(device)).sum()\n"
    "        loss.backward()\n        xm.optimizer_step(optimizer)\n        xm.mark_step()",
    "    if xm.is_master_ordinal():\n        xm.master_print(f'step {step}')",
    "    total = xm.all_reduce(xm.REDUCE_SUM, loss)\n    xm.rendezvous('sync')",
    "    rank = xm.get_ordinal()\n    world = xm.xrt_world_size()",
    "    x = torch.zeros(4, device='xla')\n    if x.device.type == 'xla':\n        xm.mark_step()",
    "    xm.wait_device_ops()\n    xm.save(model.state_dict(), 'ckpt.pt')",
]
PLAIN_BODY = [
    "    hidden = torch.relu(self.fc1(x))\n    return self.fc2(hidden)",
    "    values = [v * 2 for v in range(n) if v % 3]\n    return sum(values) / max(len(values), 1)",
    "    with open(path) as handle:\n        rows = [line.split(',') for line in handle]\n"
    "    return {r[0]: r[1:] for r in rows if r}",
    "    try:\n        result = compute(a, b)\n    except ValueError as error:\n"
    "        raise RuntimeError(str(error)) from error\n    return result",
    "    for epoch in range(epochs):\n        for batch in loader:\n"
    "            optimizer.zero_grad()\n            model(batch).sum().backward()\n"
    "            optimizer.step()",
]


def _functions(rng: random.Random, bodies: list[str], count: int, prefix: str) -> str:
    parts = []
    for index in range(count):
        body = "\n".join(rng.choice(bodies) for _ in range(rng.randint(2, 4)))
        parts.append(f"def {prefix}_{index}(model, loader, optimizer, path, a, b, n, x, "
                     f"epochs, compute, self=None):\n    \"\"\"Helper {index}.\"\"\"\n{body}\n")
    return "\n\n".join(parts)


def python_file(rng: random.Random, xla: bool) -> str:
    header = "import os\nimport torch\nimport torch.nn as nn\n"
    if xla:
        header += rng.choice(XLA_IMPORTS) + "\n"
        body = _functions(rng, XLA_BODY + PLAIN_BODY, rng.randint(6, 12), "xla_step")
    else:
        body = _functions(rng, PLAIN_BODY, rng.randint(6, 12), "util")
    return f'"""Module {rng.randint(0, 10**6)}."""\n{header}\n\n{body}'


def notebook(rng: random.Random) -> str:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": ["!pip install torch-neuronx neuronx-cc\n"]},
             {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": ["import torch_xla.core.xla_model as xm\n", "device = xm.xla_device()\n"]},
             {"cell_type": "markdown", "metadata": {}, "source": ["Train for a while.\n"]}]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1) + "\n"


def generate(root: Path, files: int, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {"python": 0, "xla": 0, "notebooks": 0, "requirements": 0, "dockerfiles": 0}
    for index in range(files):
        package = root / f"pkg{index % 50}" / f"sub{index % 7}"
        package.mkdir(parents=True, exist_ok=True)
        xla = rng.random() < 0.15
        (package / f"module_{index}.py").write_text(python_file(rng, xla))
        counts["python"] += 1
        counts["xla"] += xla
        if index % 100 == 0:
            (package / f"explore_{index}.ipynb").write_text(notebook(rng))
            counts["notebooks"] += 1
        if index % 250 == 0:
            (package / "requirements.txt").write_text(
                "torch-neuronx==2.9.0.2.15.32035\nneuronx-cc==2.*\nnumpy\n")
            (package / "Dockerfile").write_text(
                "ARG VERSION=2.9.0.2.15.32035\nFROM ubuntu:24.04\n"
                "RUN pip install torch-neuronx==${VERSION} neuronx-cc\n")
            counts["requirements"] += 1
            counts["dockerfiles"] += 1
    return counts
