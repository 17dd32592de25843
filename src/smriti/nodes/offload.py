"""Run a function in a child Python process, so this process's threads keep the GIL.

Why: igraph's Leiden (like leidenalg) runs in C without releasing the GIL; at 100k engrams a
clustering held it for seconds, and every recall of the server waited that long. The child is
``python -m smriti.nodes.offload``: the function (by its qualified name) and its arguments go
in as one pickle on stdin, the result comes back as one on stdout, and the calling thread
waits without the GIL. Not a fork (forking a threaded server is unsafe) and not a
multiprocessing pool (its children import the caller's ``__main__``, which a script without an
``if __name__ == "__main__"`` guard cannot allow). Starting the child costs ~0.3 s.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any


def run_in_subprocess[T](function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a child process; ``function`` must be importable by name and the
    arguments and result picklable.

    Raises:
        RuntimeError: the child failed (the end of its stderr is in the message).
        OSError: the child could not be started.
    """
    command = [sys.executable, "-m", "smriti.nodes.offload"]
    payload = pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL)
    done = subprocess.run(command, input=payload, capture_output=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(
            f"{function.__name__} failed in a subprocess (exit {done.returncode}): {' / '.join(tail)}"
        )
    result: T = pickle.loads(done.stdout)
    return result


def _main() -> None:
    """The child's side: (function, args) on stdin, the pickled result on stdout."""
    function, args = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(pickle.dumps(function(*args), protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _main()
