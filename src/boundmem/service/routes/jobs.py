"""Following an ingestion job queued with `POST .../conversations?async=true`.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from typing import Annotated

from fastapi import APIRouter, Path

from ...api_models import JobOut
from ..deps import Mem, Subj
from ..error_handlers import NOT_FOUND
from ..jobs_api import job_out

router = APIRouter(tags=["memory"])


@router.get("/v1/users/{user}/jobs/{job_id}", response_model=JobOut, responses=NOT_FOUND)
def get_job(job_id: Annotated[str, Path(max_length=64)], s: Subj, mem: Mem) -> JobOut:
    """An ingestion job queued with `POST .../conversations?async=true`: pending, running, done (with what was
    done where, never the user's words) or failed (with the error)."""
    return job_out(mem.job(job_id, s.ns), s.user)
