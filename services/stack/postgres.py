"""The cluster layout's own PostgreSQL: the read side every replica writes and every
gateway reads (`TEASPILL_PROJECTION_URL`), kept in the home.

The first start makes the cluster (`initdb`) in `<home>/postgres/data` with a password
made up for it (`<home>/postgres/password`, 0600) and the database `teaspill`; each start
runs `postgres` itself in the foreground, listening on 127.0.0.1 alone (no unix socket),
logging to `<home>/logs/postgres.log`. PostgreSQL refuses to run as root: run as root, it
runs in a user namespace of its own (`unshare --user`) where it is an ordinary user that
owns the home's files, so its data stays in the home and the home stays its user's alone.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from urllib.parse import quote

import psycopg

from services.settings import Settings
from services.stack.process import UMASK, Part, StackError, log_tail

BINARIES_ENV = "TEASPILL_POSTGRES_BIN"
DEBIAN = Path("/usr/lib/postgresql")
USER = "teaspill"
DATABASE = "teaspill"
INSIDE_UID = 1000
"""Who PostgreSQL is inside its user namespace when run as root: any uid but 0."""


def binaries() -> Path | None:
    """The folder holding `initdb` and `postgres`: $TEASPILL_POSTGRES_BIN, else the one on
    the PATH, else the newest Debian version's (`/usr/lib/postgresql/N/bin`, which is not
    on the PATH)."""
    override = os.environ.get(BINARIES_ENV)
    if override is not None:
        return Path(override) if (Path(override) / "initdb").is_file() else None
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(
        DEBIAN.glob("*/bin/initdb"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    return versions[-1].parent if versions else None


def find_postgres() -> Path:
    """`binaries()`, or a sentence saying how to get them."""
    found = binaries()
    if found is None or not (found / "postgres").is_file():
        raise StackError(
            "The cluster layout keeps its read side in PostgreSQL, and PostgreSQL is not "
            "installed: run `make install` (Debian: `apt-get install postgresql`), set "
            f"{BINARIES_ENV} to the folder holding initdb and postgres, or set "
            "TEASPILL_PROJECTION_URL to a PostgreSQL of your own."
        )
    return found


def folder(settings: Settings) -> Path:
    return settings.home / "postgres"


def url(settings: Settings, port: int, *, password: bool = True) -> str:
    """The home's PostgreSQL as a libpq URL (without the password, for showing)."""
    secret = ""
    if password:
        secret = ":" + quote(_password_file(settings).read_text().strip(), safe="")
    return f"postgresql://{USER}{secret}@127.0.0.1:{port}/{DATABASE}"


def answers(dsn: str) -> bool:
    """Whether PostgreSQL at `dsn` takes a connection and a query."""
    try:
        with psycopg.connect(dsn, connect_timeout=2) as db:
            db.execute("select 1")
    except psycopg.Error:
        return False
    return True


def _password_file(settings: Settings) -> Path:
    return folder(settings) / "password"


def _namespaced(argv: list[str]) -> list[str]:
    """`argv` as PostgreSQL will run it: as this user, or (run as root) as an ordinary
    user in a user namespace mapped onto root, who owns what root owns."""
    if os.geteuid() != 0:
        return argv
    unshare = shutil.which("unshare")
    if unshare is None:
        raise StackError(
            "PostgreSQL refuses to run as root, and util-linux's unshare, which runs it as an "
            "ordinary user in a user namespace, is not installed: install util-linux, or run "
            "teaspill as another user."
        )
    ids = [f"--map-user={INSIDE_UID}", f"--map-group={INSIDE_UID}"]
    return [unshare, "--user", *ids, *argv]


class Postgres(Part):
    """`postgres -D <home>/postgres/data` on 127.0.0.1:<port>; `initdb` first, once."""

    name = "PostgreSQL"

    def __init__(self, settings: Settings, port: int) -> None:
        super().__init__(settings, "postgres")
        self.port = port
        self.data = folder(settings) / "data"

    @property
    def url(self) -> str:
        return url(self.settings, self.port)

    def argv(self) -> list[str]:
        bin_ = find_postgres()
        if not (self.data / "PG_VERSION").is_file():
            self._initdb(bin_)
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "max_connections": "200",
        }
        settings = [arg for name, value in options.items() for arg in ("-c", f"{name}={value}")]
        return _namespaced([str(bin_ / "postgres"), "-D", str(self.data), *settings])

    def _initdb(self, bin_: Path) -> None:
        """A new cluster in the data folder (emptied first: a first start cut short may
        have left half of one), with a new password."""
        home = folder(self.settings)
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.rmtree(self.data, ignore_errors=True)
        secret = _password_file(self.settings)
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(24))
        argv = [str(bin_ / "initdb"), "-D", str(self.data), "-U", USER, "-E", "UTF8"]
        argv += ["-A", "scram-sha-256", f"--pwfile={secret}", "--no-instructions"]
        done = subprocess.run(
            _namespaced(argv), capture_output=True, text=True, umask=UMASK, check=False
        )
        if done.returncode != 0:
            raise StackError(
                f"PostgreSQL's initdb could not make the cluster in {self.data} "
                f"(exit {done.returncode}): {(done.stderr or done.stdout).strip()}"
            )

    def env(self) -> dict[str, str]:
        return {name: value for name, value in os.environ.items() if not name.startswith("PG")}

    def ports(self) -> dict[str, tuple[int, str]]:
        return {"PostgreSQL": (self.port, "TEASPILL_NODE_PORT")}

    def ready(self) -> bool:
        """It takes a connection to its first database (`postgres`)."""
        return answers(url(self.settings, self.port).rsplit("/", 1)[0] + "/postgres")

    def start(self, timeout: float = 60.0) -> None:
        """Start it, then make the database `teaspill` if it is not there yet."""
        super().start(timeout)
        admin = url(self.settings, self.port).rsplit("/", 1)[0] + "/postgres"
        try:
            with psycopg.connect(admin, autocommit=True) as db:
                made = db.execute("select 1 from pg_database where datname = %s", (DATABASE,))
                if made.fetchone() is None:
                    db.execute(f'create database "{DATABASE}"')
        except psycopg.Error as error:
            tail = log_tail(self.log_path)
            with contextlib.suppress(StackError):
                self.stop()
            raise StackError(
                f"PostgreSQL started but its database {DATABASE} could not be made: {error}; "
                f"see {self.log_path}:\n{tail}"
            ) from error

    def stop(self, timeout: float | None = None) -> None:
        """Its fast shutdown (SIGINT): sessions still open are cut, not waited for."""
        if self._process is not None:
            self._process.stop(timeout or self.stop_timeout, signal.SIGINT)
