"""Prompts over data: ``gw.map(template, rows)``, rate-limited, resumable, with a progress bar.

`run_map` is `Gateway.map` (the engine on an event loop of its own, in a worker thread, so it
works inside a running Jupyter kernel without ``nest_asyncio``; Ctrl-C, or a kernel
interrupt, stops it and returns the rows done so far); `arun_map` is `AsyncGateway.map`, on the
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
    from gatecell.wire.transport.proxies import Proxies

__all__ = ["Batch", "BatchError", "Row", "MapOptions", "OnRow", "run_map", "arun_map"]

OnRow = Callable[[int, Row], object]
"""Called with each finished row's position in the input and its `Row`, as it finishes (see
`engine.Engine`): the Batch then keeps each row's outcome but not its reply."""


def _engine(
    client: Endpoints,
    proxies: Proxies | None,
    template: str,
    data: Any,
    options: dict[str, Any],
    on_row: OnRow | None,
) -> Any:
    from .engine import Engine
    from .options import resolve

    return Engine(client, template, data, resolve(options), proxies=proxies, on_row=on_row)


def run_map(
    client: Endpoints,
    proxies: Proxies | None,
    template: str,
    data: Any,
    *,
    progress: bool = True,
    on_row: OnRow | None = None,
    **options: Any,
) -> Batch:
    """`Gateway.map`: ``template`` over ``data`` with the endpoints of ``client`` (logged by
    its hooks, in their batch mode), through ``proxies`` (None: direct). The
    engine runs on a loop of its own in a worker thread (``on_row`` is called there); this
    thread shows the progress and takes Ctrl-C, which stops the engine and returns the
    partial `Batch`."""
    return drive(_engine(client, proxies, template, data, options, on_row), progress)


def drive(engine: Any, progress: bool, desc: str = "map", unit: str = "rows") -> Any:
    """What ``engine.run()`` gives, run on an event loop of its own in a worker thread; this
    thread shows its progress and takes Ctrl-C, which stops it (``engine.stop_threadsafe``)
    and returns (or raises) what it does then."""
    from .progress import BatchBar

    outcome: dict[str, Any] = {}
    finished = threading.Event()  # not Thread.join: a join cut by Ctrl-C can leave is_alive() wrong

    def main() -> None:
        try:
            outcome["batch"] = asyncio.run(engine.run())
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            finished.set()

    bar = BatchBar(engine, progress, desc, unit)
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


async def arun_map(
    client: Endpoints,
    proxies: Proxies | None,
    template: str,
    data: Any,
    *,
    progress: bool = True,
    on_row: OnRow | None = None,
    **options: Any,
) -> Batch:
    """`AsyncGateway.map`: `run_map` on the running loop, the progress updated beside it."""
    engine = _engine(client, proxies, template, data, options, on_row)
    return await adrive(engine, progress)


async def adrive(engine: Any, progress: bool, desc: str = "map", unit: str = "rows") -> Any:
    """`drive` on the running loop, the progress updated beside it."""
    from .progress import BatchBar

    bar = BatchBar(engine, progress, desc, unit)

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
