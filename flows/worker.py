"""``python -m flows.worker --pool POOL [--name NAME] [--limit N]``: the worker that runs the nightly deployment.

It is Prefect's process worker (``prefect.workers.process.ProcessWorker``, what ``prefect worker start --pool POOL``
starts for a process pool): it polls the pool, runs each flow run in a subprocess and logs as Prefect logs. Only its
stop differs: SIGTERM or SIGINT (Ctrl-C) stops it within seconds, prints one line on stderr and no Prefect shutdown
messages, and exits with 128 + the signal's number (143, 130)::

    worker: stopped by SIGTERM after 42 s; flow run 'cute-fox' marked Crashed
    worker: stopped by SIGINT after 7 s; no run in flight

A run in flight loses its process with the worker (the stage it was running stops with it: flows/keeper.py) and is
marked Crashed, so it holds no concurrency slot. Prefect is imported only once the arguments are read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from egoeval.core.errors import Interrupted
from egoeval.core.stage_shell import signals_interrupt
from flows.keeper import live_processes

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun
    from prefect.workers.process import ProcessWorker

STOP_TIMEOUT_S = 2.0  # the most the worker's loops and its flow runs' processes get to stop
API_TIMEOUT_S = 1.0  # each Prefect API call made while stopping
DRAIN_TIMEOUT_S = 0.5  # the most the worker's last events, and its last logs, wait for the API
IN_FLIGHT_STATES = ("PENDING", "RUNNING", "CANCELLING")
NO_SERVER = (
    "worker: no Prefect server: start one (`prefect server start`) and point at it "
    "(`prefect config set PREFECT_API_URL=http://127.0.0.1:4200/api`)"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flows.worker",
        description="Prefect's process worker for a work pool; SIGTERM or Ctrl-C stops it with one line.",
    )
    parser.add_argument("--pool", required=True, help="the process work pool to poll (e.g. egoeval)")
    parser.add_argument("--name", help="the worker's name (default: Prefect's, ProcessWorker <uuid>)")
    parser.add_argument("--limit", type=int, help="the most flow runs at a time (default: no limit)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        with signals_interrupt():  # until the worker's event loop takes the signals over
            from prefect.settings import (
                PREFECT_API_URL,
                PREFECT_WORKER_HEARTBEAT_SECONDS,
                PREFECT_WORKER_PREFETCH_SECONDS,
            )
            from prefect.workers.process import ProcessWorker

            if not PREFECT_API_URL.value():
                print(NO_SERVER, file=sys.stderr)
                return 2
            worker = ProcessWorker(
                name=args.name,
                work_pool_name=args.pool,
                limit=args.limit,
                prefetch_seconds=PREFECT_WORKER_PREFETCH_SECONDS.value(),
                heartbeat_interval_seconds=int(PREFECT_WORKER_HEARTBEAT_SECONDS.value()),
            )
            signum, in_flight = asyncio.run(work(worker, args.pool))
            ignore_signals()  # the closed loop put back Python's: a second Ctrl-C would be a traceback
            drain_prefect()
    except Interrupted as stop:  # before the worker started: nothing can be in flight
        signum, in_flight = stop.signum, "no run in flight"
    except Exception as error:  # the worker ended by itself (e.g. a pool of another type)
        print(f"worker: stopped: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    ignore_signals()
    name = signal.Signals(signum).name
    print(f"worker: stopped by {name} after {time.monotonic() - started:.0f} s; {in_flight}", file=sys.stderr)
    return 128 + signum


async def work(worker: ProcessWorker, pool: str) -> tuple[int, str]:
    """Run ``worker`` until SIGTERM or SIGINT; stop it and its runs; the signal and what became of the runs."""
    loop = asyncio.get_running_loop()
    signalled: asyncio.Future[int] = loop.create_future()
    for signum in (signal.SIGTERM, signal.SIGINT):  # a second signal while stopping changes nothing
        loop.add_signal_handler(signum, lambda signum=signum: signalled.done() or signalled.set_result(signum))
    working = asyncio.create_task(worker.start(printer=lambda *text: print(*text, flush=True)))
    await asyncio.wait([working, signalled], return_when=asyncio.FIRST_COMPLETED)
    if not signalled.done():  # the worker ended by itself: its error
        await working
        raise RuntimeError("the worker's loops ended")
    runs = await runs_in_flight(worker, pool)
    logging.disable(logging.CRITICAL)  # Prefect's stop messages, its event queue's last warnings: the line says it
    working.cancel()  # Prefect's stop: SIGTERM to each flow-run process, then it waits for them
    if not (await asyncio.wait([working], timeout=STOP_TIMEOUT_S))[0]:
        for child in children():  # a flow-run process still there: killed, as a stopped worker's runs are
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        await asyncio.wait([working], timeout=STOP_TIMEOUT_S)
    signum = signalled.result()
    return signum, await mark_crashed(runs, f"its worker was stopped by {signal.Signals(signum).name}")


def ignore_signals() -> None:
    """SIGTERM and SIGINT ignored from here on: a second Ctrl-C does not cut the stop short."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)


def drain_prefect() -> None:
    """Send the worker's last events and logs to the API, within ``DRAIN_TIMEOUT_S`` each."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=DRAIN_TIMEOUT_S, at_exit=False)
    EventsWorker.drain_all(timeout=DRAIN_TIMEOUT_S, at_exit=False)


async def runs_in_flight(worker: ProcessWorker, pool: str) -> list[FlowRun] | None:
    """The flow runs of ``pool`` this worker has started and that have not ended (None: the API did not answer)."""
    import httpx
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        WorkPoolFilter,
        WorkPoolFilterName,
    )

    state = FlowRunFilterState(type=FlowRunFilterStateType(any_=list(IN_FLIGHT_STATES)))
    try:
        runs = await asyncio.wait_for(
            worker.client.read_flow_runs(
                flow_run_filter=FlowRunFilter(state=state),
                work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool])),
            ),
            API_TIMEOUT_S,
        )
    except (httpx.HTTPError, OSError, RuntimeError):  # TimeoutError is an OSError
        return None
    return [run for run in runs if run.labels.get("prefect.worker.name") == worker.name]


async def mark_crashed(runs: list[FlowRun] | None, why: str) -> str:
    """Mark each of ``runs`` that has not ended Crashed; say so in a few words for the worker's line."""
    if runs is None:
        return f"its runs in flight unknown (the Prefect API did not answer within {API_TIMEOUT_S:.0f} s)"
    if not runs:
        return "no run in flight"
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    told = []
    async with get_client() as client:
        for run in runs:
            try:
                now = await asyncio.wait_for(client.read_flow_run(run.id), API_TIMEOUT_S)
                if now.state is None or not now.state.is_final():
                    crashed = Crashed(message=why)
                    await asyncio.wait_for(client.set_flow_run_state(run.id, crashed, force=True), API_TIMEOUT_S)
                    told.append(f"flow run {run.name!r} marked Crashed")
                elif now.state.is_crashed():  # its own process, or the keeper, said so first
                    told.append(f"flow run {run.name!r} marked Crashed")
                else:
                    told.append(f"flow run {run.name!r} ended {now.state.name}")
            except (httpx.HTTPError, OSError, RuntimeError):  # TimeoutError is an OSError
                told.append(f"flow run {run.name!r} not marked Crashed (the Prefect API did not answer)")
    return ", ".join(told)


def children() -> list[int]:
    """This process's live child processes."""
    return [pid for pid, fields in live_processes().items() if int(fields[1]) == os.getpid()]


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # not Prefect's exit hooks: they would drain again, waiting on an API that may be gone
