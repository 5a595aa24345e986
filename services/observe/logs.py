"""The log lines of every teaspill process, in one format, with the ids of the span that was
current when a line was written.

`setup()` is called once by each process's app (the gateway's, and the endpoint's, which
serves the control plane, the execution plane or both). From then on every log record made
in the process carries `trace_id` and `span_id` (hex, as a trace store shows them; empty
outside a span), and the lines go to stderr, which `teaspill up` writes to
`$TEASPILL_HOME/logs/<part>.log`:

    2026-12-02 13:40:01,123 ERROR services.tools.registry trace_id=4bf9… span_id=00f0… The tool …

A line written outside a span has no ids. teaspill's own loggers (`services.*`,
`teaspill.*`) log from INFO up, every other library from WARNING up; a logger with a
handler of its own (hypercorn's) keeps writing its lines itself, once.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

from services.observe.tracing import trace_ids

FORMAT = "%(asctime)s %(levelname)s %(name)s%(trace_ids)s %(message)s"
OWN_LOGGERS = ("services", "teaspill")
"""The loggers of teaspill's own modules, which log from INFO up."""


class _Stderr(logging.StreamHandler[TextIO]):
    """stderr as it is when a line is written (a test runner swaps it), not as it was."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _: TextIO) -> None:
        pass


class _Once(logging.Filter):
    """Leaves out a record that a handler below the root writes already."""

    def filter(self, record: logging.LogRecord) -> bool:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None and logger.parent is not None:
            if logger.handlers:
                return False
            logger = logger.parent if logger.propagate else None
        return True


def _with_ids(make: Any) -> Any:
    def made(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = make(*args, **kwargs)
        ids = trace_ids()
        record.trace_id, record.span_id = ids or ("", "")
        record.trace_ids = f" trace_id={ids[0]} span_id={ids[1]}" if ids else ""
        return record

    made.with_trace_ids = True  # type: ignore[attr-defined]
    return made


def setup() -> None:
    """Give every record the current span's ids and write the lines to stderr. Once per
    process: a second call changes nothing."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "with_trace_ids", False):
        return
    logging.setLogRecordFactory(_with_ids(factory))
    handler = _Stderr()
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_Once())
    logging.getLogger().addHandler(handler)
    for name in OWN_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
