"""torch_xla names no rule rewrites, next to ones a rule does: the first are reported from
the `ast`, and the imports they name must stay."""
import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
from torch_xla.core.xla_model import xla_device
from torch_xla.experimental import pjrt as unknown_api

report = met.metrics_report()
internal = torch_xla._XLAC._xla_get_default_device(), xm.get_xla_supported_devices()
kept = xm
unmapped = unknown_api.some_helper(4)
count = xr.global_runtime_device_count()
device = xla_device()
tensor = torch.ones(2).to(device)
xm.mark_step()


def helper(module=xm):
    if met.counter_value("CachedCompile") > 0:
        return module
    return [met.metric_data(name) for name in met.metric_names()]
