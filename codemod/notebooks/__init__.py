"""Jupyter notebooks: their cells (IPython syntax masked) go through the Python engine as one
module, shell and `%%writefile` cells through the dependency scanner, and the JSON is
written back with everything else in it unchanged."""
