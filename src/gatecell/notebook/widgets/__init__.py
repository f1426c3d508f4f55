"""ipywidgets panels over the client: chat, comparison, image, speech and media jobs.

Each panel is a widget of its own (display it, or reach its controls as attributes), and
`dashboard()` puts them all in tabs. Requests run in background threads, so the kernel
stays free while a reply streams or a job polls. Nothing here loads until a notebook asks
for a panel: `import gatecell` and `%load_ext gatecell` do not import this package.
"""

from __future__ import annotations

from .chat import ChatPanel
from .compare import ComparePanel
from .dashboard import Dashboard, dashboard
from .image import ImagePanel
from .media import JobView, MediaPanel
from .speech import SpeechPanel

__all__ = [
    "ChatPanel",
    "ComparePanel",
    "Dashboard",
    "ImagePanel",
    "JobView",
    "MediaPanel",
    "SpeechPanel",
    "dashboard",
]
