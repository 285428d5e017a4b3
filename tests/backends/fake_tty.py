"""Run a command on a pseudo-terminal made here, and type `y` at the first y/N question it shows.

What any program emceepee runs (a backend, or a shell the model reaches through one) can do to
pass for a person at a terminal: `emceepee answer` must still not take its `y` for an approval.
Its output is copied to stdout; its exit status is this script's.
"""

from __future__ import annotations

import os
import pty
import sys


def main() -> int:
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(sys.argv[1], sys.argv[1:])
    seen, typed = b"", False
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not data:
            break
        seen += data
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        if not typed and b"[y/N]" in seen:
            os.write(fd, b"y\n")
            typed = True
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
