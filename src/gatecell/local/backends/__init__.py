"""Offline backends of the local gateway: local stand-ins, deterministic for the same input.

``chatbot``, ``typed``, ``vision`` and ``reasoning`` are light rule-based text models. The
media renderers (``image``, ``speech``, ``video``, ``music``) import heavy libraries (Pillow,
PyAV, espeak-ng, NumPy), so the endpoints import them on first use and call them in a worker
thread, never on the event loop.
"""

__all__ = ["Refused"]


class Refused(Exception):
    """An input a stand-in will not answer; the message says why, in one line (a 400)."""
