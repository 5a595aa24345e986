"""What an MCP tool answered, made a tool result: text as it is, the rest kept in the
artifact store by its sha256 and named in a sentence."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import mcp_types

from services.mcp.content import Kept, content_text

PNG = b"\x89PNG\r\n\x1a\n fake image bytes"


def _stored(store: Path, sha: str) -> bytes:
    return (store / sha[:2] / sha).read_bytes()


def test_an_image_and_a_binary_resource_are_kept_by_hash(tmp_path: Path) -> None:
    blob = mcp_types.BlobResourceContents(
        uri="file:///reports/q3 summary.pdf",
        blob=base64.b64encode(b"%PDF-1.7").decode(),
        mime_type="application/pdf",
    )
    answer = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="here it is"),
            mcp_types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            mcp_types.EmbeddedResource(resource=blob),
        ]
    )
    kept = Kept(tmp_path, "mcp/files/call-1")
    text = content_text(answer, kept)
    image, pdf = kept.artifacts
    assert image.sha256 == hashlib.sha256(PNG).hexdigest()
    assert _stored(tmp_path, image.sha256) == PNG
    assert image.path == "mcp/files/call-1/1-content.png"
    assert pdf.path == "mcp/files/call-1/2-q3_summary.pdf"
    assert _stored(tmp_path, pdf.sha256) == b"%PDF-1.7"
    assert text.splitlines() == [
        "here it is",
        f"[image content (image/png, {len(PNG)} bytes) kept as artifact {image.sha256} "
        f"({image.path}): only text reaches the model]",
        f"[resource file:///reports/q3 summary.pdf (application/pdf, 8 bytes) kept as artifact "
        f"{pdf.sha256} ({pdf.path}): only text reaches the model]",
    ]


def test_content_that_is_not_base64_is_named_not_kept(tmp_path: Path) -> None:
    answer = mcp_types.CallToolResult(
        content=[mcp_types.AudioContent(data="not base64!", mime_type="audio/wav")]
    )
    kept = Kept(tmp_path, "mcp/x/c")
    assert (
        content_text(answer, kept) == "[audio content (audio/wav) left out: its data is not base64]"
    )
    assert kept.artifacts == []


def test_a_text_resource_reaches_the_model_as_text(tmp_path: Path) -> None:
    text = mcp_types.TextResourceContents(uri="file:///notes.txt", text="remember the milk")
    answer = mcp_types.CallToolResult(content=[mcp_types.EmbeddedResource(resource=text)])
    kept = Kept(tmp_path, "mcp/x/c")
    assert content_text(answer, kept) == "[resource file:///notes.txt]\nremember the milk"
    assert kept.artifacts == []
