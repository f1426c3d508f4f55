"""Offline video generation: a short H.264 MP4 drawn from the prompt, the stand-in for a video model.

Every frame is the image backend's picture for the prompt at a moving phase (one loop per clip),
so the clip and the still agree. H.264 in yuv420p inside MP4 plays in every browser. The muxer's
`faststart` puts the index first so playback starts before the download ends; it rewrites the
file in place, which an in-memory output cannot do, hence the temporary file. Encoding is
single-threaded and the muxer stamps no creation time, so the same arguments give the same bytes.
"""

from __future__ import annotations

import os
import tempfile
import threading

from . import image
from ._stop import check

__all__ = ["MIME", "render"]

MIME = "video/mp4"
MAX_SIDE = 1280
MAX_SECONDS = 20.0


def render(
    prompt: str,
    seconds: float = 2.0,
    width: int = 320,
    height: int = 240,
    fps: int = 12,
    *,
    stop: threading.Event | None = None,
) -> bytes:
    """MP4 bytes: `seconds` of `fps` frames of `width` x `height` (even sides, 64..1280).

    Setting `stop` makes it raise `Stopped` before the next frame."""
    image.check_size(width, height, what="video", high=MAX_SIDE)
    if width % 2 or height % 2:
        raise ValueError(f"video width and height must be even (H.264 4:2:0), got {width}x{height}")
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"video seconds must be above 0 and at most {MAX_SECONDS:g}, got {seconds!r}")
    if not isinstance(fps, int) or not 1 <= fps <= 60:
        raise ValueError(f"video fps must be an integer from 1 to 60, got {fps!r}")

    frames = max(1, round(seconds * fps))
    with tempfile.TemporaryDirectory(prefix="gatecell-video-") as folder:
        path = os.path.join(folder, "clip.mp4")
        _encode(path, prompt, frames, width, height, fps, stop)
        with open(path, "rb") as f:
            return f.read()


def _encode(
    path: str, prompt: str, frames: int, width: int, height: int, fps: int, stop: threading.Event | None
) -> None:
    import av

    with av.open(path, mode="w", format="mp4", options={"movflags": "+faststart"}) as container:
        options = {"preset": "veryfast", "crf": "26"}
        stream = container.add_stream("libx264", rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.thread_count = 1
        for index in range(frames):
            check(stop)
            picture = image.draw(prompt, width, height, phase=index / frames)
            frame = av.VideoFrame.from_image(picture).reformat(format="yuv420p")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
