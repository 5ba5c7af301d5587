"""The durable response cache: SQLite in WAL mode, one committed row per successful model call.

Keyed by ``request_key`` (backend, model, protocol, messages with images by sha256, decoding); requests carry no
credentials and replies reach it with the key redacted (``egoeval.backends.openai``), so the cache holds none.
Each row keeps the reply and its meta (backend, model, the model the endpoint named as serving it, seconds). Every
``put`` commits at once: a crash, even SIGKILL, loses at most the calls in flight. Safe for many threads (one
connection each; writes take turns on a lock) and many processes (SQLite locking, with a busy timeout).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from egoeval.core.errors import InputError, TransientFailure
from egoeval.core.stage_shell import KEPT

CACHE_DIR_ENV = "EGOEVAL_CACHE_DIR"  # overrides params' cache_dir (e.g. the audit points at the original's cache)
CACHE_ONLY_ENV = "EGOEVAL_CACHE_ONLY"  # "1": answer from the cache only; a miss is an error, nothing is sent
CACHE_MISS = "not in the response cache"  # how a cache-only call says it found no answer
CACHE_FILE = "responses.sqlite"  # in the cache folder; one file for every stage that calls a model
ANSWER_META = ("served_model", "prompt_tokens", "completion_tokens")  # a reply's meta an output records beside it


def cache_dir(configured: str | os.PathLike[str]) -> Path:
    """The durable cache folder: ``$EGOEVAL_CACHE_DIR`` when set, else the configured one."""
    return Path(os.environ.get(CACHE_DIR_ENV) or configured)


def cache_file(configured: str | os.PathLike[str]) -> Path:
    """The response cache's SQLite file in :func:`cache_dir`."""
    return cache_dir(configured) / CACHE_FILE


def cache_only() -> bool:
    """True when ``$EGOEVAL_CACHE_ONLY`` is set (and not "0"): replay cached answers, call no model."""
    return os.environ.get(CACHE_ONLY_ENV, "") not in {"", "0"}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key      TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    meta     TEXT NOT NULL,
    created  REAL NOT NULL
)
"""


BUSY_TIMEOUT_S = 15.0
"""How long a call waits for another process's write lock (writes take milliseconds). Once one wait runs out, every
later use of the cache fails at once: the stage stops after one timeout, not one per worker thread."""

_stored: dict[str, int] = {}  # cache file -> answers this process stored (what an interrupted stage keeps)


def _kept() -> str:
    return "; ".join(f"{n} new model answers in {path} (never asked again)" for path, n in _stored.items() if n)


KEPT.append(_kept)


class ResponseCache:
    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._failed: Exception | None = None  # the first lasting failure: every later use raises it at once
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(
                self.path.parent,
                f"cannot create the response cache folder ({error.strerror or error}): set "
                f"egonormia.infer.cache_dir (or ${CACHE_DIR_ENV}) to a folder this user can write",
            ) from None
        with self._lock, self._named():
            connection = self._connect()
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute(_SCHEMA)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """SQLite's errors as errors that name the cache file and say what to do."""
        if self._failed is not None:
            raise self._failed
        try:
            yield
        except sqlite3.Error as error:
            self._failed = self._explained(error)
            raise self._failed from None

    def _explained(self, error: sqlite3.Error) -> Exception:
        text = str(error)
        if "locked" in text or "busy" in text:
            return TransientFailure(
                f"{self.path}: the response cache stayed locked by another process for {self._busy_timeout_s:g} s "
                f"({text}); every answer stored so far is kept"
            )
        if "disk is full" in text or "disk I/O error" in text:
            return TransientFailure(
                f"{self.path}: cannot write the response cache ({text}): free space on its disk and run again; "
                "every answer stored so far is kept"
            )
        return InputError(
            self.path,
            f"the response cache cannot be used ({type(error).__name__}: {error}); it is corrupt, read-only or "
            "not a file: fix its permissions, or move it away (the next run asks again what it lacks), or point "
            f"egonormia.infer.cache_dir (or ${CACHE_DIR_ENV}) elsewhere",
        )

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        connection.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
        connection.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable across process crashes
        self._local.connection = connection
        self._connections.append(connection)
        return connection

    def _connection(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            with self._lock:
                connection = self._connect()
        return connection

    def entry(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The stored response and its meta, or None."""
        with self._named():
            row = self._connection().execute("SELECT response, meta FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            meta = json.loads(row[1])
        except ValueError:
            meta = {}
        return row[0], meta if isinstance(meta, dict) else {}

    def get(self, key: str) -> str | None:
        found = self.entry(key)
        return None if found is None else found[0]

    def put(self, key: str, response: str, meta: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Store a successful response, committed before returning; returns the stored response and meta.

        A key already stored (e.g. by another process racing on the same request) keeps its first value,
        and that value is returned, so every user of the cache sees one answer per key.
        """
        connection = self._connection()
        with self._write_lock, self._named():  # threads queue here, not in SQLite's sleeping busy handler
            cursor = connection.execute(
                "INSERT INTO responses (key, response, meta, created) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                (key, response, json.dumps(meta, sort_keys=True), time.time()),
            )
        if cursor.rowcount == 1:
            _stored[str(self.path)] = _stored.get(str(self.path), 0) + 1
            return response, meta
        stored = self.entry(key)
        return (response, meta) if stored is None else stored

    def seed(self, answers: Iterable[tuple[str, str, dict[str, Any]]]) -> int:
        """Store ``(key, response, meta)`` answers not yet stored (a key keeps its first value); returns how many
        were new."""
        rows = [(key, response, json.dumps(meta, sort_keys=True), time.time()) for key, response, meta in answers]
        with self._write_lock, self._named():
            connection = self._connection()
            before = connection.total_changes
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO responses (key, response, meta, created) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                rows,
            )
            connection.execute("COMMIT")
            return connection.total_changes - before

    def copy_to(self, target: str | os.PathLike[str]) -> None:
        """A consistent copy of the whole cache (SQLite's online backup), e.g. for a re-derivation to read."""
        with self._named(), sqlite3.connect(target) as copy:
            self._connection().backup(copy)

    def __len__(self) -> int:
        with self._named():
            return self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
            self._local = threading.local()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
