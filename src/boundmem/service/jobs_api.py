"""Asynchronous ingestion over HTTP: `POST /v1/users/{user}/conversations?async=true` answers 202 with a job at once,
`GET /v1/users/{user}/jobs/{job_id}` (routes/jobs.py) follows it. The queue is the store's jobs table
(`boundmem.jobs`), drained by a worker thread of the server, started with the app (so jobs left by a previous process
are run) and on the first submit.
"""

import logging
import threading
from fastapi import FastAPI, status
from fastapi.responses import JSONResponse

from ..api_models import JobOut
from ..jobs import Job
from ..memory import Memory
from ..models import Conversation
from .deps import LazyMemory

log = logging.getLogger("boundmem.service")


def job_out(job: Job, user: str) -> JobOut:
    """The job as its caller sees it: `job.user` is the store's namespaced id, which an error message may name; the
    caller's own id replaces it (the tenant namespace never appears in an answer)."""
    error = job.error.replace(job.user, user) if job.error else job.error
    return JobOut(id=job.id, user=user, status=job.status, attempts=job.attempts, result=job.result, error=error,
                  created_at=job.created_at, started_at=job.started_at, finished_at=job.finished_at,
                  url=f"/v1/users/{user}/jobs/{job.id}")


def accepted(mem: Memory, user: str, ns: str, conv: Conversation) -> JSONResponse:
    """Queue the conversation (committed before answering) and answer 202 with the job and where to follow it."""
    job = mem.submit(conv, ns)
    out = job_out(job, user)
    return JSONResponse(status_code=status.HTTP_202_ACCEPTED, content=out.model_dump(mode="json"),
                        headers={"Location": out.url})


def run_worker(app: FastAPI, memory: LazyMemory) -> None:
    """Start the job worker with the app (so jobs left by an earlier process are run) and stop it at shutdown."""
    lock, running = threading.Lock(), threading.Event()

    def start_worker() -> None:
        try:
            mem = memory()
            with lock:
                if running.is_set():   # not shut down meanwhile
                    mem.jobs.start(mem.add)
        except Exception:  # noqa: BLE001 - a store that cannot be opened is reported by the requests themselves
            log.exception("could not start the job worker")

    def _start() -> None:   # in a thread: building the Memory must not hold up the server's start
        running.set()
        threading.Thread(target=start_worker, name="boundmem-jobs-start", daemon=True).start()

    def _stop() -> None:
        with lock:
            running.clear()
            mem = memory.built   # never build a Memory just to stop its worker
            if mem is not None:
                mem.stop_jobs()

    app.router.on_startup.append(_start)
    app.router.on_shutdown.append(_stop)
