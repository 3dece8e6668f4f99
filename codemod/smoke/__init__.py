"""`neuron-migrate smoke`: runs a migrated script on the CPU against the emulated `neuron`
device (`neuron_migrate.emulator`), one process per worker, and explains what went wrong."""
