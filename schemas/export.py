"""Publish the wire types as JSON Schema for clients in other languages.

`python -m schemas.export` rewrites the committed files; a test fails when they are stale.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from schemas.events import Event
from schemas.wake import WakeEnvelope

HERE = Path(__file__).parent
PUBLISHED: dict[str, Any] = {
    "events.schema.json": Event,
    "wake.schema.json": WakeEnvelope,
}


def render(kind: Any) -> str:
    schema = msgspec.json.schema(kind)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> None:
    for name, kind in PUBLISHED.items():
        (HERE / name).write_text(render(kind))


if __name__ == "__main__":
    main()
