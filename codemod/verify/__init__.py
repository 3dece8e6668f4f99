"""`neuron-migrate verify`: the migrated script computes what the original computed."""
