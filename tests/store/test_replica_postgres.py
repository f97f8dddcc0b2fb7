"""README's read-replica path, run: a streaming replica on this machine serves recall while the primary ingests;
readers open it the way README says (BOUNDMEM_DB = the replica's URL); an opt-out and a forget made on the primary
reach it (recall there stops returning the data, and once replayed the erased text is in none of the replica's
table or index files); a write asked of the replica is refused by name."""
from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
pytest.importorskip("pgserver")
pytestmark = pytest.mark.postgres

from boundmem.config import Settings  # noqa: E402
from boundmem.memory import build_memory  # noqa: E402
from boundmem.store.postgres import ReadOnlyReplica  # noqa: E402


class Replicated:
    """A PostgreSQL primary (pgserver) and a streaming replica of it on this machine, from pgserver's own binaries:
    the replica is copied with pg_basebackup (`-R`: it starts as a hot standby streaming the primary's WAL) and
    started with pg_ctl in a folder of its own, on a Unix socket there. Both run as pgserver's system user when the
    tests run as root. Not under pytest's tmp (see conftest.py)."""

    def __init__(self) -> None:
        import pgserver
        from pgserver._commands import POSTGRES_BIN_PATH

        self.bin = POSTGRES_BIN_PATH
        self.root = Path(tempfile.mkdtemp(prefix="boundmem-replica-"))
        self.server = pgserver.get_server(self.root / "primary", cleanup_mode="stop")
        self.user = self.server.system_user
        self.primary_url = self.server.get_uri()
        self.standby = self.root / "standby"
        self.replica_url: Optional[str] = None

    def _run(self, exe: str, *args: str) -> None:
        subprocess.run([str(self.bin / exe), *args], check=True, capture_output=True, user=self.user, timeout=120)

    def start_replica(self) -> str:
        """Copy the primary as it is now and start the copy as its streaming replica; returns the replica's URL."""
        import psycopg

        self.standby.mkdir(mode=0o700)
        if self.user is not None:
            shutil.chown(self.standby, self.user, self.user)
        self._run("pg_basebackup", "-d", self.primary_url, "-D", str(self.standby), "-R", "-X", "stream", "-c", "fast")
        for f in self.standby.glob(".s.PGSQL.*"):   # the primary's socket lock, copied along (its socket is its folder)
            f.unlink()
        self._run("pg_ctl", "-D", str(self.standby), "-w", "-t", "60", "-l", str(self.standby / "log"),
                  "-o", f"-h '' -k {self.standby}", "start")
        socket_dir = str(self.server.get_postmaster_info().socket_dir)
        self.replica_url = self.primary_url.replace(socket_dir, str(self.standby))   # the URL, another host
        with psycopg.connect(self.replica_url) as con:
            assert con.execute("SELECT pg_is_in_recovery()").fetchone()[0], "the copy is not a standby"
        return self.replica_url

    def caught_up(self, timeout: float = 30.0) -> float:
        """Wait until the replica has replayed everything the primary has written so far; seconds it took."""
        import psycopg

        t0 = time.perf_counter()
        with psycopg.connect(self.primary_url, autocommit=True) as p:
            target = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        with psycopg.connect(self.replica_url, autocommit=True) as r:
            while not r.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()[0]:
                if time.perf_counter() - t0 > timeout:
                    raise TimeoutError(f"the replica did not replay up to {target} in {timeout:g} s")
        return time.perf_counter() - t0

    def replica_files(self) -> list[Path]:
        """The replica's table and index files (not its WAL, which the README says keeps what it held)."""
        return [p for p in (self.standby / "base").rglob("*") if p.is_file()]

    def close(self) -> None:
        if self.replica_url is not None:
            subprocess.run([str(self.bin / "pg_ctl"), "-D", str(self.standby), "-w", "-m", "fast", "stop"],
                           capture_output=True, user=self.user, timeout=60)
        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture()
def replicated():
    r = Replicated()
    try:
        yield r
    finally:
        r.close()


def _memory(url: str, monkeypatch):
    monkeypatch.setenv("BOUNDMEM_DB", url)            # how README points a recall-only server at the replica
    monkeypatch.setenv("BOUNDMEM_PG_VACUUM", "full")  # the primary's erasure rewrites the tables (README)
    return build_memory(Settings.from_env(), extractor="keyword", maintainer="rules", embedder="hash")


def _recall_while_ingesting(primary, replica, replicated, marker, said) -> tuple[list[float], list[float]]:
    """The primary ingests 12 conversations while a thread recalls on the replica without pause; each new preference
    must be recalled there once the replica has replayed up to the primary. Recall milliseconds, catch-up seconds."""
    stop, errors, served = threading.Event(), [], []

    def read():
        while not stop.is_set():
            try:
                t = time.perf_counter()
                replica.recall("where should we eat tonight", "seed", gate=False)
                served.append((time.perf_counter() - t) * 1000)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(repr(e))
                return

    reader = threading.Thread(target=read)
    reader.start()
    lags = []
    try:
        for i in range(12):
            primary.add(f"I always love Italian food, says {marker}{i}.", f"user-{i}")
            lags.append(replicated.caught_up())
            assert said(f"user-{i}") == [f"I always love Italian food, says {marker}{i}."], "not on the replica yet"
    finally:
        stop.set()
        reader.join(30)
    assert errors == [] and served
    return served, lags


def test_a_replica_serves_recall_while_the_primary_ingests_and_erasure_reaches_it(replicated, monkeypatch, capsys):
    marker = f"Zq{uuid.uuid4().hex[:10]}Mk"
    primary = _memory(replicated.primary_url, monkeypatch)
    primary.add("I always love Italian food.", "seed")        # the tables and the schema record exist before the copy
    replica = _memory(replicated.start_replica(), monkeypatch)
    assert replica.store.replica and not primary.store.replica

    def said(user: str) -> list[str]:
        return [h.preference.sentence for h in replica.recall("Italian food", user, gate=False)]

    served, lags = _recall_while_ingesting(primary, replica, replicated, marker, said)
    with psycopg.connect(replicated.primary_url) as con:
        replay_lag = con.execute("SELECT replay_lag FROM pg_stat_replication").fetchone()[0]
    with capsys.disabled():
        print(f"\nreplica: {len(served)} recalls served while the primary ingested 12 conversations, recall p50 "
              f"{statistics.median(served):.2f} ms; replay caught up {statistics.median(lags) * 1000:.1f} ms "
              f"(median), {max(lags) * 1000:.1f} ms (max) after each commit; pg_stat_replication.replay_lag "
              f"{replay_lag}")

    # an opt-out on the primary: the replica's recall stops returning the category
    primary.opt_out("user-0", "Restaurant")
    replicated.caught_up()
    assert said("user-0") == []

    # forget on the primary: nothing on the replica, in recall nor in its table and index files
    needle = f"{marker}1.".encode()   # not user-10's nor user-11's

    def held() -> list[str]:
        with psycopg.connect(replicated.primary_url, autocommit=True) as con:
            con.execute("CHECKPOINT")   # the record a replica's restartpoint needs
        replicated.caught_up()
        with psycopg.connect(replicated.replica_url, autocommit=True) as con:
            con.execute("CHECKPOINT")   # a restartpoint: the replica's replayed pages reach its files
            files = [f.name for f in replicated.replica_files() if needle in f.read_bytes()]
            return [con.execute("SELECT coalesce(pg_filenode_relation(0, %s::oid)::text, %s)", (f.split(".")[0], f))
                    .fetchone()[0] for f in files]

    assert held(), "the replica's files never held the text: the check below would prove nothing"
    assert primary.forget("user-1") == 1
    replicated.caught_up()
    assert said("user-1") == []
    assert held() == [], "the replica's files still hold the erased text"
    assert said("user-2") == [f"I always love Italian food, says {marker}2."]   # the others are still served

    # writes go to the primary
    with pytest.raises(ReadOnlyReplica, match="read-only replica"):
        replica.add("I love jazz.", "user-2")
    for m in (replica, primary):
        m.store.close()
