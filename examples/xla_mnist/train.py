"""A small MNIST-style data-parallel training script, written for the XLA-era Neuron stack.

This is the "before" side of a migration: it uses torch_xla the way Trainium training
scripts did before TorchNeuron. The data is synthetic (no download): noisy copies of ten
fixed 28x28 templates, so the loss falls within a few steps.

Run it (on the old stack) with:  python train.py --epochs 1
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_backend  # registers the "xla" process-group backend
import torch_xla.distributed.xla_multiprocessing as xmp
from torch.utils.data import DataLoader, Dataset, DistributedSampler

os.environ["PJRT_DEVICE"] = "NEURON"


class SyntheticDigits(Dataset):
    """Ten fixed random templates ("digits"); each image is one of them plus noise."""

    def __init__(self, size: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        templates = torch.randn(10, 1, 28, 28, generator=generator)
        self.labels = torch.randint(0, 10, (size,), generator=generator)
        noise = torch.randn(size, 1, 28, 28, generator=generator)
        self.images = templates[self.labels] + 2.0 * noise

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], self.labels[index]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.fc1 = nn.Linear(8 * 14 * 14, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def train(index: int, args: argparse.Namespace) -> None:
    dist.init_process_group("xla", init_method="xla://")
    device = xm.xla_device()
    torch.manual_seed(1)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    dataset = SyntheticDigits(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=xm.xrt_world_size(),
                                 rank=xm.get_ordinal(), shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    device_loader = pl.MpDeviceLoader(loader, device)

    for epoch in range(args.epochs):
        model.train()
        for step, (images, labels) in enumerate(device_loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            xm.optimizer_step(optimizer)  # all-reduces the gradients, then steps
            if step % args.log_every == 0:
                xm.master_print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        xm.mark_step()

    xm.rendezvous("training done")
    xm.save(model.state_dict(), args.checkpoint)  # written once per host
    if xm.is_master_ordinal():
        xm.master_print(f"saved {args.checkpoint}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--log-every", type=int, default=8)
    parser.add_argument("--checkpoint", default="mnist.pt")
    args = parser.parse_args()
    xmp.spawn(train, args=(args,))


if __name__ == "__main__":
    main()
