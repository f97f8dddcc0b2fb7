"""Worker processes for `serve --workers N` and `proxy --workers N`: one port, N processes serving it.

Why processes and not threads: a recall is one forward pass and a search, and much of a request around it is Python
holding the GIL (HTTP parsing, validation, the answer's JSON); threads of one process take turns on it, so one server
never used more than one core however many clients waited. Processes share nothing but the port and the store
(SQLite in WAL mode lets readers and the one writer work side by side; the job queue's leases let every worker's job
thread drain it).

Why fork and not uvicorn's own supervisor: uvicorn spawns its workers and re-imports the app by name, which the
servers here cannot offer (the app is built from the command line's options). Each child builds its own Memory after
the fork (a model session is never shared between processes), says when it is warm, and runs uvicorn on its own
socket on the port (`worker_socket`); the parent only holds the port, waits, forwards SIGTERM/SIGINT, and stops
every worker when one of them ends.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import sys
import traceback
from typing import Callable

Ready = Callable[[], None]


def worker_socket(shared: socket.socket) -> socket.socket:
    """This worker's own listening socket on the shared socket's address, where the shared one has SO_REUSEPORT: the
    kernel then hands each new connection to one of the workers' sockets as it arrives. On one shared socket,
    whichever worker wakes first accepts every connection waiting (asyncio accepts all it can at once), and one
    worker ends up with most clients while another idles. Without SO_REUSEPORT: the shared socket."""
    reuse = getattr(socket, "SO_REUSEPORT", None)
    if reuse is None or not shared.getsockopt(socket.SOL_SOCKET, reuse):
        return shared
    own = socket.socket(shared.family, shared.type, shared.proto)
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    own.setsockopt(socket.SOL_SOCKET, reuse, 1)
    own.bind(shared.getsockname())
    shared.close()   # this process's copy: the parent's keeps the port
    return own


def worker_count(requested: int) -> int:
    """`--workers 0` means one per core."""
    return requested if requested > 0 else (os.cpu_count() or 1)


def run_workers(n: int, sock: socket.socket, child: Callable[[Ready], None], announce: Callable[[], None]) -> int:
    """Fork `n` processes that each run `child(ready)` (it calls `ready()` once its models are warm, then serves on
    `sock` until told to stop); `announce()` runs in the parent once all are ready. Returns the exit code: 0 when
    stopped by a signal, else that of the first worker that ended on its own (the others are then stopped).

    One worker is started after the other is ready: workers opening a new store at the same moment would race to
    create it (SQLite refuses a second connection switching a new file to WAL mode), and loading models one at a
    time keeps the start's peak memory to one load."""
    r, w = os.pipe()
    pids: list[int] = []
    stopping: list[int] = []
    ended: dict[int, int] = {}   # worker pid -> wait status, for those that ended before all were ready

    def stop(signum, _frame) -> None:
        stopping.append(signum)
        _signal_all(pids, signal.SIGTERM)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        ready = True
        for _ in range(n):
            if stopping:
                break
            pid = os.fork()
            if pid == 0:   # the worker: never returns into the parent's code
                os.close(r)
                os._exit(_run_child(child, lambda: os.write(w, b".")))
            pids.append(pid)
            ready = _await_ready(r, pids, ended)
            if not ready:
                break
        os.close(w)
        if ready and not stopping:
            announce()
        return _supervise(pids, stopping, ended)
    finally:
        os.close(r)
        for s, h in old.items():
            signal.signal(s, h)


def _run_child(child: Callable[[Ready], None], ready: Ready) -> int:
    for s in (signal.SIGTERM, signal.SIGINT):   # uvicorn installs its own handlers when it runs
        signal.signal(s, signal.SIG_DFL)
    try:
        child(ready)
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the worker's last word goes to its stderr, the parent sees its exit code
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _await_ready(r: int, pids: list[int], ended: dict[int, int]) -> bool:
    """Until the last worker started says it is warm (True) or a worker has ended first (False, in `ended`)."""
    while True:
        readable, _, _ = select.select([r], [], [], 0.2)
        if readable and os.read(r, 1):
            return True
        for p in pids:
            pid, status = os.waitpid(p, os.WNOHANG)
            if pid:
                ended[pid] = status
        if ended:
            return False


def _supervise(pids: list[int], stopping: list[int], ended: dict[int, int]) -> int:
    """Wait for the workers; the first one that ends on its own takes the rest down with it."""
    code = None
    live = set(pids)
    pending = list(ended.items())
    while live:
        if pending:
            pid, status = pending.pop()
        else:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
        if pid not in live:
            continue
        live.discard(pid)
        if code is None and not stopping:
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 1
            _signal_all(live, signal.SIGTERM)
    return 0 if code is None else code


def _signal_all(pids, signum: int) -> None:
    for p in list(pids):
        try:
            os.kill(p, signum)
        except ProcessLookupError:
            pass
