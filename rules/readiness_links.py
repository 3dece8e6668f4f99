"""The Neuron documentation pages the readiness rules (NM9xx) link to."""

from __future__ import annotations

D_RN = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html"
D_APIREF = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html"
D_MEMGL = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/"
           "guidelines-memory-management.html")
D_CREF = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/"
          "reference-torch-compile.html")
D_COPT = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/"
          "how-to-optimize-with-torch-compile.html")
D_BP = ("https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/"
        "best-practices-pytorch-neuron.html")
