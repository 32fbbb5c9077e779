"""Where a cleaned drop is written: never over its input, under a temporary name until it is complete.

A killed run leaves its temporary file behind; the next run into the folder knows it by its name (host and
process) and removes it once that process is gone.
"""

import contextlib
import os
import re
import socket


class OutputIsInput(ValueError):
    """The output path names the input file: cleaning never writes over its input."""


def check_output(source, destination):
    """Raise OutputIsInput when writing `destination` would write over `source`: the same path once links
    are resolved, or the same file by device and inode (a hard link, a second mount)."""
    source, destination = os.fspath(source), os.fspath(destination)
    same = os.path.realpath(source) == os.path.realpath(destination)
    if not same:
        try:
            same = os.path.samefile(source, destination)
        except OSError:  # no output yet (or no input: the reader says so)
            same = False
    if same:
        raise OutputIsInput(f"the output {destination} is the input file {source}; cleaning never writes over "
                            "its input: give another output path")


#: A temporary output: `.NAME.smolclean-HOST-PID.tmp` beside the output NAME, so a later run into the folder
#: knows it for ours and can tell whether the run that writes it is still alive.
_TEMPORARY = re.compile(r"\.(.+)\.smolclean-(.+)-(\d+)\.tmp")


def _host():
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def temporary_path(destination):
    """Where an output is written until it is complete: beside it, named for this host and process."""
    folder, name = os.path.split(os.fspath(destination))
    return os.path.join(folder, f".{name}.smolclean-{_host()}-{os.getpid()}.tmp")


def remove_stale_temporaries(folder):
    """Delete the temporary outputs that killed runs left in `folder`: ours by their name, written on this host
    by a process that is gone (a live run's file, or another host's, is left alone). Returns the paths removed."""
    removed = []
    if os.name != "posix":  # whether a process lives is asked with a signal 0, which Windows lacks
        return removed
    host, folder = _host(), folder or "."
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            match = _TEMPORARY.fullmatch(name)
            if match and match[2] == host and not _alive(int(match[3])):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
                    removed.append(os.path.join(folder, name))
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def sync_to_disk(path):
    """Have the system write a file (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
