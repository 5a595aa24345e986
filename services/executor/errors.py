"""What a model's failure may say outside the execution plane.

A model error reaches the agent's timeline, a publish refusal, a CLI: people who may be
another tenant than the operator. `public` rewrites its text so that it carries no
credential and no file path: a URL keeps its scheme, host, port and path, never the
user and password before the host nor its query or fragment (where tokens travel); API
keys (`Bearer ...`, `sk-...`) become `[api key]`; an absolute file path becomes
`[a path on the execution plane]`. The operator's log keeps the paths (`for_log`: only
credentials are taken out).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

PATH_WITHHELD = "[a path on the execution plane]"
KEY_WITHHELD = "[api key]"

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>(){}]+")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s'\"]+")
_ASSIGNED = re.compile(
    r"(?i)\b((?:api[_-]?key|access[_-]?token|token|secret|password)\s*[=:]\s*)[^\s'\",;&]+"
)
_KEYLIKE = re.compile(r"\b(?:sk|tsk)[-_][A-Za-z0-9_-]{12,}")
# An absolute path: `/` then at least one more character of a file name, not inside a
# word or a URL (those are handled first), e.g. /run/secrets/key or /models/a.gguf.
_PATH = re.compile(r"(?<![\w/:.~-])~?/(?:[\w.@%+=~-]+/?)+")


def public_url(url: str) -> str:
    """`url` without its credentials, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "[a URL that cannot be shown]"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def for_log(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with credentials taken out: URLs' users, passwords and queries, API keys."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, KEY_WITHHELD)
    text = _URL.sub(lambda match: public_url(match.group(0)), text)
    text = _BEARER.sub(rf"\g<1>{KEY_WITHHELD}", text)
    text = _ASSIGNED.sub(rf"\g<1>{KEY_WITHHELD}", text)
    return _KEYLIKE.sub(KEY_WITHHELD, text)


def public(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` fit to show anyone: `for_log`, and no file path either."""
    pieces = []
    last = 0
    cleaned = for_log(text, secrets)
    # URLs keep their paths: take paths out only between them.
    for match in _URL.finditer(cleaned):
        pieces.append(_PATH.sub(PATH_WITHHELD, cleaned[last : match.start()]))
        url = match.group(0)
        pieces.append(PATH_WITHHELD if url.lower().startswith("file:") else url)
        last = match.end()
    pieces.append(_PATH.sub(PATH_WITHHELD, cleaned[last:]))
    return "".join(pieces)
