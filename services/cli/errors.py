"""The one boundary where what a user can cause becomes a sentence: the stack is down, a
part does not answer, a setting or a spec file is wrong, Restate or the gateway refuses.
Every command runs inside `guarded`, so no such condition reaches the terminal as a
traceback.

Each sentence says what is wrong and what to run; the exit code is 2 for input the user
can fix (settings, arguments, spec files) and 1 for a stack that cannot do it. Anything
else is a bug: its traceback goes to `$TEASPILL_HOME/logs/cli.log`, and the terminal gets a
sentence saying so and where (exit code 70).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import msgspec

from schemas.address import InvalidAddressError
from services.cli.home import write_private
from services.client import ApiError
from services.evals.report import ReportError
from services.evals.suite import EvalFileError
from services.ingress import IngressError
from services.lifecycle.backup import BackupError
from services.settings import ConfigError
from services.specs import SpecError
from services.stack import StackError

STATUS_HINT = "`teaspill status` shows which part is down"
BUG = 70
"""The exit code of a failure nobody foresaw (EX_SOFTWARE)."""
BUG_LOG = Path("logs") / "cli.log"


class UsageError(ValueError):
    """Something the user typed that the command cannot take; the message is the sentence."""


class NotThereError(LookupError):
    """What the command is about does not exist (yet); the message says how to make it."""


def guarded(run: Callable[[], int]) -> int:
    """Run a command; print a known failure as `teaspill: <sentence>` and return its code."""
    try:
        return run()
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the one boundary: a bug becomes a sentence too
        sentence, code = explain(error) or _bug(error)
        print(f"teaspill: {sentence}", file=sys.stderr)
        return code


def _bug(error: Exception) -> tuple[str, int]:
    """Keep the traceback where a bug report can quote it; tell the user where."""
    path = Path(os.environ.get("TEASPILL_HOME") or ".teaspill") / BUG_LOG
    heading = f"--- {datetime.now(UTC):%Y-%m-%d %H:%M:%S} teaspill {sys.argv[1:]}\n"
    try:
        write_private(path, heading + "".join(traceback.format_exception(error)), append=True)
    except OSError:
        where = "it could not be written down"
    else:
        where = f"the details are in {path}"
    return (
        f"this command failed on something teaspill did not expect; it is a bug in teaspill, "
        f"not in what you typed ({where}). `teaspill status` shows whether the stack is well.",
        BUG,
    )


def explain(error: Exception) -> tuple[str, int] | None:
    """The sentence and exit code for a failure a user can cause; None for a bug."""
    for kind, words in _SENTENCES:
        if isinstance(error, kind):
            return words(error)
    return None


def _where(error: httpx.RequestError) -> str:
    try:
        url = error.request.url
    except RuntimeError:
        return "the stack"
    return f"{url.scheme}://{url.netloc.decode()}"


def _unreachable(error: Exception) -> tuple[str, int]:
    assert isinstance(error, httpx.RequestError)
    return (
        f"nothing answers at {_where(error)}: is the stack running? Start it with "
        f"`teaspill up --detach`; {STATUS_HINT}.",
        1,
    )


def _timeout(error: Exception) -> tuple[str, int]:
    assert isinstance(error, httpx.RequestError)
    return (
        f"{_where(error)} did not answer in time: a part of the stack is down or busy; "
        f"{STATUS_HINT}.",
        1,
    )


def _transport(error: Exception) -> tuple[str, int]:
    assert isinstance(error, httpx.RequestError)
    return (
        f"talking to {_where(error)} failed: the connection broke off or the answer was not "
        f"HTTP; {STATUS_HINT}.",
        1,
    )


def _refused(error: Exception) -> tuple[str, int]:
    assert isinstance(error, IngressError)
    message = error.message.strip().rstrip(".")
    if error.status == httpx.codes.NOT_FOUND and "service" in message.lower():
        return (
            f"Restate does not know this handler ({message}): the endpoint is not registered; "
            "`teaspill up` registers it.",
            1,
        )
    return f"refused: {message} ({error.status}).", 1


def _gateway(error: Exception) -> tuple[str, int]:
    assert isinstance(error, ApiError)
    message = error.message.strip().rstrip(".")
    if error.status == 0:
        return (
            f"{message}: is the stack running? Start it with `teaspill up --detach`; "
            f"{STATUS_HINT}.",
            1,
        )
    return f"refused: {message} ({error.status}).", 1


def _undecodable(error: Exception) -> tuple[str, int]:
    return (
        "the stack answered something this CLI cannot read: is it running another version? "
        "`teaspill down`, then `teaspill up` with this one.",
        1,
    )


def _os(error: Exception) -> tuple[str, int]:
    assert isinstance(error, OSError)
    where = f" ({error.filename})" if error.filename else ""
    return f"{error.strerror or error}{where}.", 1


_SENTENCES: tuple[tuple[type[Exception], Callable[[Exception], tuple[str, int]]], ...] = (
    (ConfigError, lambda e: (str(e), 2)),
    (BackupError, lambda e: (str(e), 1)),
    (SpecError, lambda e: (str(e), 2)),
    (UsageError, lambda e: (str(e), 2)),
    (EvalFileError, lambda e: (str(e), 2)),
    (ReportError, lambda e: (str(e), 2)),
    (NotThereError, lambda e: (str(e), 1)),
    (InvalidAddressError, lambda e: (f"{str(e).rstrip('.')}.", 2)),
    (StackError, lambda e: (str(e), 1)),
    (IngressError, _refused),
    (ApiError, _gateway),
    (httpx.ConnectError, _unreachable),
    (httpx.TimeoutException, _timeout),
    (httpx.TransportError, _transport),
    (msgspec.DecodeError, _undecodable),
    (msgspec.ValidationError, _undecodable),
    (OSError, _os),
)
