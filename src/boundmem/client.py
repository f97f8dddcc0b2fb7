"""`boundmem.Client` and `boundmem.AsyncClient`: the HTTP API from Python (httpx), with the server's own models.

    from boundmem import Client
    with Client("http://127.0.0.1:8000", api_key="a-long-secret-key-for-acme") as c:
        c.add("alice", {"id": "c1", "turns": [{"role": "user", "text": "I always go for Italian food."}]})
        job = c.add("alice", conversation, wait=False)      # 202: queued; c.wait_job("alice", job.id)
        c.recall("alice", "Where should we eat?", k=3).hits

Answers are the pydantic models the server itself uses (`boundmem.api_models`, `boundmem.models`). Errors are the
library's own exception types (the `boundmem.errors` tree), so code written against `Memory` catches the same things
over HTTP: bad input is an `InputError`, a missing preference or job a `NotFoundError`, a busy store `StoreBusy`
(with `retry_after`), another embedder's store `EmbeddingDimensionError`, a failed extraction or LLM endpoint an
`UpstreamError` (`ExtractionError`); each is also an `ApiError` carrying the HTTP status, the server's `code` and
`message`, and the limit that was hit, if any.
"""
from __future__ import annotations

import asyncio
import time
from datetime import date
from typing import Any, Optional
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from .api_models import (EpisodeList, EpisodeOptInOut, EpisodeOptOutList, EpisodeOptOutOut, EpisodeRecallOut, ForgetOut,
                         IngestOut, JobOut, ObservationList, ObservationOut, OptInOut, OptOutList, OptOutOut,
                         PreferenceHistory, PreferenceList, PreferenceOut, RecallOut, RevokeOut, TokenOut, WhoAmIOut)
from .errors import BoundmemError, ConflictError, InputError, LimitError, NotFoundError
from .extract.base import ExtractionError
from .messages import ConversationInput, to_conversation
from .models import Episode, EpisodeResult, UserExport
from .schema.model import Schema
from .store.base import EmbeddingDimensionError, StoreBusy
from .user_id import accepts_user_id

__all__ = ["Client", "AsyncClient", "ApiError", "AuthError", "InvalidRequest", "LimitExceeded", "RateLimited",
           "NotFound", "Busy", "DimensionMismatch", "ExtractionFailed", "Conflict"]


class ApiError(BoundmemError):
    """An error answer of the API: `status`, `code` (machine-readable), `message`, `limit` ({name, value} or None)."""

    def __init__(self, status: int, code: str, message: str, body: Any = None, retry_after: Optional[float] = None):
        Exception.__init__(self, f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body
        self.limit = body.get("limit") if isinstance(body, dict) else None
        self.retry_after = retry_after


class AuthError(ApiError, PermissionError):
    """401 (missing or invalid key or token) or 403 (a user token acting on another user, or a tenant-only call)."""


class InvalidRequest(ApiError, InputError):
    """400 or 422: the request was malformed (the message names the field)."""


class LimitExceeded(ApiError, LimitError):
    """413: over a content limit (`limit` names it)."""


class RateLimited(ApiError, LimitError):
    """429: the tenant is over its rate limit; `retry_after` seconds."""


class NotFound(ApiError, NotFoundError):
    """404: no such user, preference, job or category."""


class Conflict(ApiError, ConflictError):
    """409 of another kind than an embedding dimension mismatch."""


class DimensionMismatch(ApiError, EmbeddingDimensionError):
    """409 embedding_dimension_mismatch: the user's memory was filled by another embedder."""


class Busy(ApiError, StoreBusy):
    """503: the store is busy with another writer; nothing was changed, retry after `retry_after` seconds."""


class ExtractionFailed(ApiError, ExtractionError):
    """502: extraction (or its LLM endpoint) failed; nothing was stored."""


def _error(r: httpx.Response) -> ApiError:
    try:
        body = r.json()
    except ValueError:
        body = {"code": f"http_{r.status_code}", "message": r.text[:500]}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    code, msg = str(body.get("code") or f"http_{r.status_code}"), str(body.get("message") or body.get("detail") or "")
    ra = r.headers.get("retry-after")
    retry = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
    s = r.status_code
    if s == 409:
        cls = DimensionMismatch if code == "embedding_dimension_mismatch" else Conflict
    else:
        cls = {401: AuthError, 403: AuthError, 400: InvalidRequest, 422: InvalidRequest, 413: LimitExceeded,
               429: RateLimited, 404: NotFound, 503: Busy, 502: ExtractionFailed}.get(s, ApiError)
    err = cls(s, code, msg, body, retry)
    if isinstance(err, DimensionMismatch):
        err.stored = err.got = None
    return err


def _u(user: str) -> str:
    return quote(user, safe="")


def _recall_body(utterance: str, k: Optional[int], gate: bool, min_score: Optional[float]) -> dict:
    body: dict = {"utterance": utterance, "k": k, "gate": gate}
    if min_score is not None:
        body["min_score"] = min_score
    return body


def _conversation(c: ConversationInput, conversation_id: Optional[str]) -> dict:
    """Read here by the server's own rule (`messages.py`), so a wrong shape is an InputError before any request."""
    return to_conversation(c, conversation_id).model_dump(mode="json", exclude_none=True)


@accepts_user_id
class _Ops:
    """Every API call, written once: `_call` returns the parsed answer (Client) or a coroutine of it (AsyncClient)."""

    def _call(self, method: str, path: str, model: Any, **kw):  # pragma: no cover - implemented by the clients
        raise NotImplementedError

    def add(self, user: str, conversation: ConversationInput, wait: bool = True, *,
            conversation_id: Optional[str] = None):
        """Learn from a conversation (what `Memory.add` accepts: a Conversation, `[{role, content}]` messages or a
        string): `IngestOut` when `wait`, else `JobOut` at once (202; applied by the server's worker in order per
        user: follow it with `job` / `wait_job`)."""
        body = _conversation(conversation, conversation_id)
        if wait:
            return self._call("POST", f"/v1/users/{_u(user)}/conversations", IngestOut, json=body)
        return self._call("POST", f"/v1/users/{_u(user)}/conversations", JobOut, json=body, params={"async": "true"})

    def job(self, user: str, job_id: str):
        return self._call("GET", f"/v1/users/{_u(user)}/jobs/{_u(job_id)}", JobOut)

    def recall(self, user: str, utterance: str, k: Optional[int] = 5, *, gate: bool = True,
               min_score: Optional[float] = None):
        """The preferences that would change the answer (the server's recall gate; often none); `gate=False` or
        `min_score`: raw cosine top-k."""
        return self._call("POST", f"/v1/users/{_u(user)}/recall", RecallOut,
                          json=_recall_body(utterance, k, gate, min_score))

    def preferences(self, user: str, category: Optional[str] = None):
        params = {"category": category} if category else None
        return self._call("GET", f"/v1/users/{_u(user)}/preferences", PreferenceList, params=params)

    def delete(self, user: str, preference_id: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}/preferences/{_u(preference_id)}", PreferenceOut)

    def update(self, user: str, preference_id: str, attribute: Optional[str] = None, polarity: Optional[str] = None):
        """Correct a preference's value and/or polarity (`Memory.update`); answers it as stored."""
        body = {k: v for k, v in (("attribute", attribute), ("polarity", polarity)) if v is not None}
        return self._call("PATCH", f"/v1/users/{_u(user)}/preferences/{_u(preference_id)}", PreferenceOut, json=body)

    def history(self, user: str, preference_id: str):
        """A preference's audit entries, oldest first (`Memory.history`)."""
        return self._call("GET", f"/v1/users/{_u(user)}/preferences/{_u(preference_id)}/history", PreferenceHistory)

    def observations(self, user: str):
        """The user's one-off choices (not preferences: never recalled), each with what they said."""
        return self._call("GET", f"/v1/users/{_u(user)}/observations", ObservationList)

    def confirm(self, user: str, observation_id: str):
        """Make an observation a preference at once; answers the preference (`NotFound` for an unknown id)."""
        return self._call("POST", f"/v1/users/{_u(user)}/observations/{_u(observation_id)}/confirm", PreferenceOut)

    def dismiss(self, user: str, observation_id: str):
        """Erase an observation; answers what was dismissed (`NotFound` for an unknown id)."""
        return self._call("DELETE", f"/v1/users/{_u(user)}/observations/{_u(observation_id)}", ObservationOut)

    def export(self, user: str):
        return self._call("GET", f"/v1/users/{_u(user)}/export", UserExport)

    def forget(self, user: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}", ForgetOut)

    def opt_outs(self, user: str):
        return self._call("GET", f"/v1/users/{_u(user)}/opt-outs", OptOutList)

    def opt_out(self, user: str, category: str):
        return self._call("PUT", f"/v1/users/{_u(user)}/opt-outs/{quote(category, safe='/')}", OptOutOut)

    def opt_in(self, user: str, category: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}/opt-outs/{quote(category, safe='/')}", OptInOut)

    # --- episodic memory (where the tenant has it on; listing, deleting and opting out always work) -------------
    def episodes(self, user: str, since: Optional[date] = None, until: Optional[date] = None,
                 term: Optional[str] = None):
        params = {k: str(v) for k, v in (("since", since), ("until", until), ("term", term)) if v is not None}
        return self._call("GET", f"/v1/users/{_u(user)}/episodes", EpisodeList, params=params or None)

    def remember_episode(self, user: str, conversation: ConversationInput, day: Optional[date] = None,
                         end_session: bool = False, *, conversation_id: Optional[str] = None):
        """Post-think a conversation into episodes only (`Memory.remember_episode`); `Conflict` (409 episodic_off)
        where episodic memory is off for the tenant."""
        body = {**_conversation(conversation, conversation_id), "end_session": end_session}
        if day is not None:
            body["at"] = f"{day.isoformat()}T12:00:00Z"
        return self._call("POST", f"/v1/users/{_u(user)}/episodes", EpisodeResult, json=body)

    def end_episode_session(self, user: str):
        return self._call("POST", f"/v1/users/{_u(user)}/episodes/end-session", EpisodeResult)

    def recall_episodes(self, user: str, utterance: str, k: int = 5, since: Optional[date] = None,
                        until: Optional[date] = None, today: Optional[date] = None, gate: bool = True):
        """The episodes that help answer `utterance` (`retrieved`, `reason`, `hits`)."""
        body = {"utterance": utterance, "k": k, "gate": gate,
                **{k_: v.isoformat() for k_, v in (("since", since), ("until", until), ("today", today)) if v}}
        return self._call("POST", f"/v1/users/{_u(user)}/episodes/recall", EpisodeRecallOut, json=body)

    def delete_episode(self, user: str, episode_id: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}/episodes/{_u(episode_id)}", Episode)

    def episode_opt_outs(self, user: str):
        return self._call("GET", f"/v1/users/{_u(user)}/episode-opt-outs", EpisodeOptOutList)

    def episode_opt_out(self, user: str, tag: str):
        return self._call("PUT", f"/v1/users/{_u(user)}/episode-opt-outs/{quote(tag, safe='/')}", EpisodeOptOutOut)

    def episode_opt_in(self, user: str, tag: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}/episode-opt-outs/{quote(tag, safe='/')}", EpisodeOptInOut)

    def mint_token(self, user: str, ttl_seconds: Optional[int] = None):
        body = {"ttl_seconds": ttl_seconds} if ttl_seconds else None
        return self._call("POST", f"/v1/users/{_u(user)}/tokens", TokenOut, json=body)

    def revoke_tokens(self, user: str):
        return self._call("DELETE", f"/v1/users/{_u(user)}/tokens", RevokeOut)

    def whoami(self):
        return self._call("GET", "/v1/whoami", WhoAmIOut)

    def schema(self, user: Optional[str] = None):
        """The operator's schema, or (with `user`) the categories that user agreed to."""
        return self._call("GET", f"/v1/users/{_u(user)}/schema" if user else "/v1/schema", Schema)

    # mem0's names for the same calls
    search = recall
    get_all = preferences
    delete_all = forget


def _parse(r: httpx.Response, model: Any):
    if r.status_code >= 400:
        raise _error(r)
    return model.model_validate(r.json()) if isinstance(model, type) and issubclass(model, BaseModel) else r.json()


def _headers(api_key: str) -> dict:
    return {"Authorization": f"Bearer {api_key}", "User-Agent": "boundmem-client"}


@accepts_user_id
class Client(_Ops):
    """Synchronous client. `api_key`: a tenant key or a user token. `http_client`: an httpx.Client to use instead of
    one of its own (e.g. with a transport of your own, or FastAPI's TestClient)."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0,
                 http_client: Optional[httpx.Client] = None):
        self._own = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._base, self._headers = base_url.rstrip("/"), _headers(api_key)

    def _call(self, method: str, path: str, model: Any, **kw):
        return _parse(self._http.request(method, self._base + path, headers=self._headers, **kw), model)

    def wait_job(self, user: str, job_id: str, timeout: Optional[float] = 30.0, poll: float = 0.05) -> JobOut:
        """Poll until the job is done or failed (TimeoutError after `timeout`; `None`: as long as it takes)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            j = self.job(user, job_id)
            if j.status in ("done", "failed"):
                return j
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {job_id} still {j.status} after {timeout:g} s")
            time.sleep(poll)

    def close(self) -> None:
        if self._own:
            self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@accepts_user_id
class AsyncClient(_Ops):
    """The same calls, awaited: `await client.recall("alice", "...")`."""

    def __init__(self, base_url: str, api_key: str, timeout: float = 30.0,
                 http_client: Optional[httpx.AsyncClient] = None):
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._base, self._headers = base_url.rstrip("/"), _headers(api_key)

    async def _call(self, method: str, path: str, model: Any, **kw):
        return _parse(await self._http.request(method, self._base + path, headers=self._headers, **kw), model)

    async def wait_job(self, user: str, job_id: str, timeout: Optional[float] = 30.0, poll: float = 0.05) -> JobOut:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            j = await self.job(user, job_id)
            if j.status in ("done", "failed"):
                return j
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {job_id} still {j.status} after {timeout:g} s")
            await asyncio.sleep(poll)

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
