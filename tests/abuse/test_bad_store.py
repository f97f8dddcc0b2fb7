"""A bad database file was a traceback (`DatabaseError: file is not a database`, exit 1) for
`prefs list`, `ingest`, `recall`, `audit verify` and `serve`. Each is now one `error:` line naming the file and the
cause, exit 5 (README's table: the store failed), and `serve` does not start. (Read-only files and mounts are not
tried here: the tests may run as root, for whom no permission bit holds.)"""
from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from boundmem.cli.root import app
from boundmem.store.sqlite import SQLiteStore, StoreOpenError

EXIT_STORE = 5


def _good(path) -> bytes:
    SQLiteStore(path).close()
    return path.read_bytes()


def bad_files(tmp_path) -> dict[str, object]:
    good = _good(tmp_path / "good.db")
    made = {}
    for name, data in {"not SQLite": b"this is a text file, not a database\n" * 50,
                       "truncated": good[:1000], "header only": good[:100],
                       "garbage after the header": good[:100] + b"\xff" * 4000}.items():
        p = tmp_path / (name.replace(" ", "-") + ".db")
        p.write_bytes(data)
        made[name] = p
    d = tmp_path / "a-directory.db"
    d.mkdir()
    made["a directory"] = d
    return made


COMMANDS = {
    "prefs list": lambda db, conv: ["prefs", "list", "-u", "alice", "--db", db],
    "ingest": lambda db, conv: ["ingest", conv, "-u", "alice", "--db", db, "--embedder", "hash", "--extractor",
                                "keyword", "--maintainer", "rules"],
    "recall": lambda db, conv: ["recall", "food", "-u", "alice", "--db", db, "--embedder", "hash"],
    "audit verify": lambda db, conv: ["audit", "verify", "--db", db],
}


def test_every_bad_store_file_is_one_error_line_naming_it(tmp_path, kind):
    k = kind("bad store: CLI commands on bad files")
    conv = tmp_path / "c.json"
    conv.write_text('{"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]}')
    for (fname, path), (cname, args) in ((f, c) for f in bad_files(tmp_path).items() for c in COMMANDS.items()):
        r = CliRunner().invoke(app, args(str(path), str(conv)))
        err = r.stderr if hasattr(r, "stderr") else r.output
        lines = [l for l in err.splitlines() if l.strip()]
        ok = (r.exit_code == EXIT_STORE and lines and lines[-1].startswith("error: ") and str(path) in lines[-1]
              and "Traceback" not in r.output and not isinstance(r.exception, sqlite3.Error))
        k.check(bool(ok), (fname, cname, r.exit_code, lines[-1:] if lines else r.output[-200:]))


def test_the_library_names_the_file_and_the_cause(tmp_path, kind):
    k = kind("bad store: the library's error")
    for name, path in bad_files(tmp_path).items():
        with pytest.raises(StoreOpenError) as e:
            SQLiteStore(path)
        k.check(str(path) in str(e.value) and "cannot open the store" in str(e.value), (name, str(e.value)))


def test_serve_refuses_to_start_on_a_bad_store(tmp_path, kind):
    from boundmem.cli.serve import app as serve_app

    k = kind("bad store: serve refuses to start")
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"key-tenant-a-0123456789abcdef" = "acme"\n')
    bad = bad_files(tmp_path)["not SQLite"]
    r = CliRunner().invoke(serve_app, ["--db", str(bad), "--keys", str(keys), "--port", "0", "--embedder", "hash",
                                       "--extractor", "keyword", "--maintainer", "rules"])
    k.check(r.exit_code == EXIT_STORE and "error: cannot open the store" in r.output and str(bad) in r.output,
            (r.exit_code, r.output[-300:]))


@pytest.fixture
def small_disk(tmp_path):
    """A 512 KB file system of its own (tmpfs; needs root, as CI and this project's machines have): skipped where
    it cannot be mounted."""
    import subprocess

    where = tmp_path / "small-disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("cannot mount a small file system here")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_full_disk_is_an_error_naming_it_and_the_store_stays_usable(small_disk, schema, kind):
    import subprocess

    from boundmem.embed import HashEmbedder
    from boundmem.errors import StoreError
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory

    k = kind("bad store: a full disk")
    store = SQLiteStore(small_disk / "m.db")
    mem = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    try:
        mem.add("I always go for Italian food.", user="alice")
        filler = small_disk / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k", "count=1000"], capture_output=True)
        err = None
        for i in range(200):
            try:
                mem.add(f"I love jazz track {i}. " + "so much " * 300, user="alice")
            except StoreError as e:
                err = e
                break
        k.check(err is not None and "full" in str(err) and str(small_disk) in str(err), repr(err))
        k.check(mem.preferences("alice") != [], "the store cannot be read after the full disk")
        filler.unlink()
        mem.add("I can't stand country music.", user="alice")
        k.check(any(p.attribute.lower().startswith("country") for p in mem.preferences("alice")),
                "no write after space was freed")
    finally:
        mem.close_jobs()
        store.close()


def test_a_store_on_a_read_only_mount_is_one_error_line_saying_so(small_disk, kind):
    import subprocess

    k = kind("bad store: a read-only mount")
    SQLiteStore(small_disk / "m.db").close()
    if subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], capture_output=True).returncode:
        pytest.skip("cannot remount read-only here")
    r = CliRunner().invoke(app, ["prefs", "list", "-u", "alice", "--db", str(small_disk / "m.db")])
    k.check(r.exit_code == 5, (r.exit_code, r.output))
    k.check("read-only" in r.output and str(small_disk / "m.db") in r.output and "Traceback" not in r.output, r.output)
