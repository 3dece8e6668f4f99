"""Not imported: this folder goes on the PYTHONPATH of verify's runs for its sitecustomize.py."""
