"""What an MCP tool answered, as a tool result: text for the model, and what is not text
kept in the artifact store by its sha256.

Text content and text resources reach the model as they are (capped like every tool
result). An image, an audio clip or a binary resource is decoded and kept in the store
(`services.workspace.artifacts`), and the model reads a short sentence naming it by its
hash; the turn's timeline records it as an `artifact_written`, which the gateway serves.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import mcp_types
import msgspec

from schemas.harness import Artifact
from services.workspace.artifacts import store_bytes

LEFT_OUT = "only text reaches the model"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class Kept:
    """The artifact store and where in it one call's binary content is named."""

    store: Path | None
    where: str
    """`mcp/SERVER/tTURN-rROUND-CALL`: the path prefix of the call's artifacts."""
    artifacts: list[Artifact] = field(default_factory=list)

    def keep(self, data: str, kind: str, mime: str, name: str = "") -> str:
        """The sentence the model reads for one base64 block."""
        if self.store is None:
            return f"[{kind} ({mime}) left out: {LEFT_OUT}]"
        try:
            content = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return f"[{kind} ({mime}) left out: its data is not base64]"
        extension = mimetypes.guess_extension(mime or "") or ".bin"
        base = UNSAFE.sub("_", posixpath.basename(name))[:64] if name else ""
        relative = f"{self.where}/{len(self.artifacts) + 1}-{base or 'content'}"
        relative += "" if base and "." in base else extension
        artifact = store_bytes(self.store, content, relative)
        self.artifacts.append(artifact)
        return (
            f"[{kind} ({mime}, {artifact.size} bytes) kept as artifact {artifact.sha256} "
            f"({artifact.path}): {LEFT_OUT}]"
        )


def content_text(answer: mcp_types.CallToolResult, kept: Kept | None = None) -> str:
    """Text content as it is; what is not text kept by `kept` (if given) and named in a
    short sentence."""
    keeping = kept if kept is not None else Kept(None, "")
    parts = [_block_text(block, keeping) for block in answer.content]
    if not parts and answer.structured_content is not None:
        parts.append(msgspec.json.encode(answer.structured_content, order="sorted").decode())
    return "\n".join(parts)


def _block_text(block: mcp_types.ContentBlock, kept: Kept) -> str:
    match block:
        case mcp_types.TextContent(text=text):
            return text
        case (
            mcp_types.ImageContent(data=data, mime_type=mime)
            | mcp_types.AudioContent(data=data, mime_type=mime)
        ):
            return kept.keep(data, f"{block.type} content", mime)
        case mcp_types.EmbeddedResource(
            resource=mcp_types.TextResourceContents(uri=uri, text=text)
        ):
            return f"[resource {uri}]\n{text}"
        case mcp_types.EmbeddedResource(
            resource=mcp_types.BlobResourceContents(uri=uri, blob=blob, mime_type=mime)
        ):
            return kept.keep(blob, f"resource {uri}", mime or "binary", name=str(uri))
        case mcp_types.EmbeddedResource(resource=resource):
            return f"[resource {resource.uri} (binary) left out: {LEFT_OUT}]"
        case _:  # the one kind left: a link to a resource
            return f"[link to resource {block.name}: {block.uri}]"
