"""BLAKE2, the digest of the result cache's keys and of the trees the launch search reads.

Taken from hashlib's own `_blake2` module: importing `hashlib` loads OpenSSL for the other
digests it offers, a cost a warm run would pay for nothing. An interpreter built without
`_blake2` gets hashlib's.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:
    from hashlib import blake2b

__all__ = ["blake2b"]
