"""What the ready line needs besides the socket: the data dir claimed (its lock held, its database
file looked at) and the tokenizer described.

Cheap on purpose: SQLAlchemy, SQLModel and the services on the stores load right after the ready
line (:mod:`main.stores`), while the event loop already answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from main.config import Config
from main.lock import DataDirLock
from services.store.precheck import check_sqlite
from services.tokenizer import Tokenizer, resolve_tokenizer


@dataclass
class Startup:
    """The data dir's lock, held until :meth:`close`, and the server's tokenizer (built on first
    count)."""

    lock: DataDirLock
    tokenizer: Tokenizer

    def close(self) -> None:
        self.lock.release()  # idempotent


def begin(config: Config) -> Startup:
    """Claim the data dir (blocking; run off the event loop). Refuses, before the ready line, a data
    dir another server holds and a database file the store could not open (not a database, or a
    newer build's). A database at another URL is first reached when the stores open."""
    # The writer's text lives here: keep it private to the user.
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    try:
        if config.database_file is not None:
            check_sqlite(config.database_file)
        tokenizer = resolve_tokenizer(config.tokenizer_encoding, deferred=True)
    except BaseException:
        lock.release()
        raise
    return Startup(lock=lock, tokenizer=tokenizer)
