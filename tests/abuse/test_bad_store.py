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
