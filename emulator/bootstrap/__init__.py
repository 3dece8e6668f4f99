"""Not imported: this folder goes on the workers' PYTHONPATH for its sitecustomize.py."""
