"""What a Python file means before anything changes: names and scopes, the bindings of
XLA-era modules, and where values such as device strings flow. Read-only, on `ast`."""
