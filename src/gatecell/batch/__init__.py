"""Prompts over data: ``gw.map(template, rows)``, rate-limited, resumable, with a progress bar.

`run` is `Gateway.map` (the engine on an event loop of its own, in a worker thread, so it
works inside a running Jupyter kernel without ``nest_asyncio``; Ctrl-C, or a kernel
interrupt, stops it and returns the rows done so far); `arun` is `AsyncGateway.map`, on the
caller's loop. The engine is `engine.Engine`; the rows and the template, `rows`; the rate
limits, `pacing`; the result, `result.Batch`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .options import MapOptions
from .result import Batch, BatchError, Row

if TYPE_CHECKING:
    from gatecell.wire.endpoints import Endpoints
    from gatecell.wire.proxies import Proxies

__all__ = ["Batch", "BatchError", "Row", "MapOptions", "OnRow", "run", "arun"]

OnRow = Callable[[int, Row], object]
"""Called with each finished row's position in the input and its `Row`, as it finishes (see
`engine.Engine`): the Batch then keeps each row's outcome but not its reply."""


def _engine(
    client: Endpoints[Any, Any, Any, Any, Any, Any, Any, Any],
    gateway: str,
    proxies: Proxies | None,
    template: str,
    data: Any,
    options: dict[str, Any],
    on_row: OnRow | None,
) -> Any:
    from gatecell.store import default_store

    from .engine import Engine
    from .options import resolve

    return Engine(
        client,
        gateway,
        template,
        data,
        resolve(options),
        store=default_store(),
        proxies=proxies,
        on_row=on_row,
    )


def run(
    client: Endpoints[Any, Any, Any, Any, Any, Any, Any, Any],
    gateway: str,
    proxies: Proxies | None,
    template: str,
    data: Any,
    *,
    progress: bool = True,
    on_row: OnRow | None = None,
    **options: Any,
) -> Batch:
    """`Gateway.map`: ``template`` over ``data`` with the endpoints of ``client``, logged as
    sent to ``gateway`` (the log's name for it), through ``proxies`` (None: direct). The
    engine runs on a loop of its own in a worker thread (``on_row`` is called there); this
    thread shows the progress and takes Ctrl-C, which stops the engine and returns the
    partial `Batch`."""
    return drive(_engine(client, gateway, proxies, template, data, options, on_row), progress)


def drive(engine: Any, progress: bool, desc: str = "map", unit: str = "row") -> Any:
    """What ``engine.run()`` gives, run on an event loop of its own in a worker thread; this
    thread shows its progress and takes Ctrl-C, which stops it (``engine.stop_threadsafe``)
    and returns (or raises) what it does then."""
    from .progress import Progress

    outcome: dict[str, Any] = {}
    finished = threading.Event()  # not Thread.join: a join cut by Ctrl-C can leave is_alive() wrong

    def main() -> None:
        try:
            outcome["batch"] = asyncio.run(engine.run())
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            finished.set()

    bar = Progress(engine, progress, desc, unit)
    threading.Thread(target=main, name="gatecell-map", daemon=True).start()
    try:
        while not finished.wait(bar.interval):
            bar.update()
    except KeyboardInterrupt:
        engine.stop_threadsafe()
        while not finished.is_set():
            try:
                finished.wait()
            except KeyboardInterrupt:  # a second Ctrl-C while the engine stops: it is stopping
                pass
    finally:
        bar.close()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["batch"]


async def arun(
    client: Endpoints[Any, Any, Any, Any, Any, Any, Any, Any],
    gateway: str,
    proxies: Proxies | None,
    template: str,
    data: Any,
    *,
    progress: bool = True,
    on_row: OnRow | None = None,
    **options: Any,
) -> Batch:
    """`AsyncGateway.map`: `run` on the running loop, the progress updated beside it."""
    engine = _engine(client, gateway, proxies, template, data, options, on_row)
    return await adrive(engine, progress)


async def adrive(engine: Any, progress: bool, desc: str = "map", unit: str = "row") -> Any:
    """`drive` on the running loop, the progress updated beside it."""
    from .progress import Progress

    bar = Progress(engine, progress, desc, unit)

    async def show() -> None:
        while True:
            await asyncio.sleep(bar.interval)
            bar.update()

    shower = asyncio.ensure_future(show())
    try:
        return await engine.run()
    finally:
        shower.cancel()
        bar.close()
