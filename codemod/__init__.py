"""neuron-migrate: move PyTorch code from the XLA-based Neuron stack to native TorchNeuron."""

__version__ = "0.1.0"
