"""What a replaced file keeps of the one it replaces: owner, group, every mode bit and its
extended attributes.

The order matters. Changing the owner clears the setuid and setgid bits (and a file
capability), so the owner is set first, the extended attributes next (an access ACL is one,
and setting it rewrites the group bits) and the mode last, from the original's own bits.
"""

from __future__ import annotations

import errno
import os
import stat

_NOT_COPIED = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.EACCES, errno.ENODATA,
               errno.E2BIG, errno.ERANGE)
"""A file system without extended attributes, or a name this process may not set (`trusted.*`
and most `security.*` for a user who is not root): that attribute is left out, as `cp -a`
leaves it out, rather than the migrated file not written."""


def keep_attributes(fd: int, source: str, before: os.stat_result) -> None:
    """Give the new file (open as `fd`) the owner, extended attributes and mode of the file at
    `source`, whose status was `before`."""
    _keep_owner(fd, before)
    _copy_extended_attributes(source, fd)
    os.fchmod(fd, stat.S_IMODE(before.st_mode))


def _keep_owner(fd: int, before: os.stat_result) -> None:
    """A process that may not (not root, not the owner) leaves the owner and group as they
    are, as editors do; so does one in a user namespace where the owner has no id
    (EINVAL), as in a rootless container."""
    if hasattr(os, "fchown"):
        try:
            os.fchown(fd, before.st_uid, before.st_gid)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.EACCES, errno.EINVAL):
                raise


def _copy_extended_attributes(source: str, fd: int) -> None:
    """Where the platform has them; each attribute that cannot be copied is left out."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError as error:
        if error.errno in _NOT_COPIED:
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(source, name))
        except OSError as error:
            if error.errno not in _NOT_COPIED:
                raise
