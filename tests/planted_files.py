"""Something other than a regular file planted at a path, for the tests of the guarded
paths (locks, output targets)."""
import os
import socket

#: The kinds :func:`plant` makes, as ``zoforge.files.kind_of`` names them (after "a ").
KINDS = ("FIFO", "folder", "symbolic link", "socket")


def plant(path, kind: str, link_target):
    """Make a ``kind`` at ``path`` (a link points at ``link_target``); returns what must
    stay open while it is used (the socket's server), else None."""
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symbolic link":
        os.symlink(link_target, path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        return server
    else:
        raise ValueError(kind)
    return None
