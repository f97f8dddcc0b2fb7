"""`boundmem serve --workers N`: N processes on one port, each with its own Memory on the same store, sharing the
token secret and the revocations, stopped together."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from boundmem.cli.workers import run_workers, worker_count

KEY = "bm-test-key-0123456789abcdef0123"


def _start(tmp_path, *extra: str) -> tuple[subprocess.Popen, str]:
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY}" = "acme"\n')
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "boundmem.cli", "serve", "--db", str(tmp_path / "s.db"), "--keys",
                             str(keys), "--port", "0", "--extractor", "keyword", "--maintainer", "rules", "--embedder",
                             "hash", "--workers", "2", *extra], stdout=log, stderr=subprocess.STDOUT)
    end = time.monotonic() + 60
    while time.monotonic() < end and proc.poll() is None:
        text = (tmp_path / "serve.log").read_text()
        if "2 worker processes" in text:
            return proc, "http://127.0.0.1:" + text.split("http://127.0.0.1:")[1].split()[0]
        time.sleep(0.05)   # two processes loading their stages
    proc.kill()
    pytest.fail(f"serve --workers 2 did not start:\n{(tmp_path / 'serve.log').read_text()}")


def _children(pid: int) -> set[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return {int(x) for x in f.read().split()}


def test_workers_share_the_store_tokens_and_revocations_and_stop_together(tmp_path):
    proc, base = _start(tmp_path)
    try:
        workers = _children(proc.pid)
        assert len(workers) == 2
        h = {"Authorization": f"Bearer {KEY}"}
        r = httpx.post(f"{base}/v1/users/alice/conversations", headers=h,
                       json={"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]})
        assert r.status_code == 200, r.text
        tok = httpx.post(f"{base}/v1/users/alice/tokens", headers=h, json={}).json()["token"]
        # each request on a new connection: the kernel hands them to either worker; all see the same store and secret
        for _ in range(12):
            r = httpx.get(f"{base}/v1/users/alice/preferences", headers={"Authorization": f"Bearer {tok}"})
            assert r.status_code == 200 and [p["attribute"] for p in r.json()["preferences"]] == ["Italian"]
        assert httpx.delete(f"{base}/v1/users/alice/tokens", headers=h).status_code in (200, 204)
        for _ in range(12):   # revoked in one worker, refused by both
            assert httpx.get(f"{base}/v1/users/alice/preferences",
                             headers={"Authorization": f"Bearer {tok}"}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert not any(os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"
                   for p in workers)


def test_a_worker_that_dies_takes_the_server_down_with_its_code(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    announced: list[bool] = []

    def child(ready) -> None:
        ready()
        try:
            os.close(os.open(tmp_path / "first", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            raise SystemExit(7) from None
        signal.pause()   # the first one serves on until the supervisor stops it

    assert run_workers(2, sock, child, lambda: announced.append(True)) == 7
    sock.close()


def test_a_worker_that_fails_before_it_is_ready_is_never_announced():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    announced: list[bool] = []

    def child(ready) -> None:
        raise RuntimeError("no model")

    assert run_workers(2, sock, child, lambda: announced.append(True)) == 1
    assert announced == []
    sock.close()


def test_zero_workers_is_one_per_core():
    assert worker_count(0) == (os.cpu_count() or 1) and worker_count(3) == 3


def test_each_worker_takes_its_share_of_the_rate_limits():
    from boundmem.cli.serve import _throttle

    one, two = _throttle(20.0, None, 5.0), _throttle(20.0, 40, 5.0, workers=2)
    assert (one.tenant.rate, one.tenant.burst, one.user.rate) == (20.0, 40, 5.0)
    assert (two.tenant.rate, two.tenant.burst, two.user.rate) == (10.0, 20, 2.5)
    assert _throttle(0.0, None, 0.0, workers=4).tenant is None


def test_each_worker_listens_on_its_own_socket_on_the_shared_port():
    """On one shared socket, whichever worker wakes first accepts every waiting connection; with SO_REUSEPORT each
    worker has its own socket and the kernel spreads connections over them as they arrive."""
    from boundmem.cli.serve import _listen
    from boundmem.cli.workers import worker_socket

    shared = _listen("127.0.0.1", 0, reuse_port=True)
    address = shared.getsockname()
    own = worker_socket(shared)
    try:
        assert own is not shared and own.getsockname() == address
        assert own.proto == socket.IPPROTO_TCP   # the protocol named, as _listen's (Nagle off on what it accepts)
    finally:
        own.close()
    alone = _listen("127.0.0.1", 0)
    assert worker_socket(alone) is alone   # one worker: the socket as bound
    alone.close()
