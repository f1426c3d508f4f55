"""Pictures the attachment tests send (`tests/wire/test_attachments.py`, the chat panel's)."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def png(size: tuple[int, int] = (64, 48), colour: tuple[int, int, int] = (215, 40, 40)) -> bytes:
    """A PNG of one colour (the default: the stand-in's red, 64x48)."""
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


def bomb_png() -> bytes:
    """A PNG whose header claims 30000x30000 pixels: Pillow refuses to open it (a
    decompression bomb), however small the file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 30000, 30000, 1, 0, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body
