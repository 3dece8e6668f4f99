"""A persistent per-file result cache, so that re-checking a tree where almost nothing changed
costs little more than reading it (pre-commit and CI run `check` over and over).

An entry holds what migrating one file produced (`FileResult`), under a key made of
everything that result is computed from: the file's path and bytes, the tool's own source
(any change to the package is a miss), the Python and LibCST versions, the folder the run is
in, the file's effective options (per-file configuration, per-file-ignores, selection,
target, `--from`, helpers module) and what the run asks for (diff, apply, scan, audit).
Results that read other files as well (`neuron_migrate.files.outside`) are never kept.

- `store`: the directory, its entries (written atomically, read defensively), its size bound;
- `key`: the key of a file's entry;
- `codec`: a result to JSON and back (JSON rather than pickle: a cache restored from CI
  must not be able to run code);
- `location`: where the cache lives and whether it is on.
"""
