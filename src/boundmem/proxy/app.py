"""An OpenAI-compatible memory proxy: `POST /v1/chat/completions` (streaming and not) in front of any
OpenAI-compatible model server.

For each request:

1. *Who*: the bearer credential is a tenant API key or a user token, resolved and rate-limited exactly as by
   `boundmem serve` (`service.deps.authenticate`: the same keys file, token secret, per-tenant, per-user-token and
   per-address limits). The user is the token's user, else the request's `user` field or the `X-Boundmem-User`
   header (one user-id rule, `user_id.py`); a user token naming another user is refused (403). The body is bounded
   as the API's is (size, JSON depth), and so are the user's messages (the API's content limits: turns, characters
   per turn and in all), since the last one is recalled on and learnt from: a longer message is refused (413), never
   cut, so no stored sentence is longer than a turn may be.
2. *Recall*: the user's stored preferences that would change the answer to the last user message (the recall gate,
   `retrieve/gate.py`; opt-outs excluded) are added to the system message (a new one at the start if the request has
   none), as data only: a fixed preamble and a fenced block of escaped JSON lines (`retrieve/format.py`: no stored
   word can end the block, break a line or pass as a chat-template token or a role); most messages ("navigate to the airport", "call Anna") get none, and then nothing is added
   (`X-Boundmem-Recall: none`). A failing recall (busy store, ...) is
   logged and the request goes on without memory: the memory never breaks a reply.
   Where episodic memory is on for the tenant (BOUNDMEM_EPISODIC_TENANTS), CAIM's controller decides whether the
   message needs memory at all; only then are the episodes that help ("the restaurant you suggested on Tuesday")
   added too, dated, and the exchanges it learns from (step 4) are post-thought into episodes.
3. *Forward*: the request goes to the upstream with the upstream's own key (`--upstream-key`, never the caller's)
   and without the `user` field (the end user's id is not the model vendor's business) unless `forward_user`;
   the answer (or the stream, chunk by chunk) goes back unchanged, with `X-Boundmem-Recall-Ms`,
   `X-Boundmem-Recall` (none, or how many memories went into the prompt), `X-Boundmem-Recalled` (preferences),
   `X-Boundmem-Episodes` and `X-Boundmem-Episodic` (off, declined or retrieved) headers. `/v1/models` and `/v1/models/{id}` are passed through.
4. *Learn*: after a successful reply, the exchange (the last user message and the reply) is queued as an ingestion
   job (`boundmem.jobs`: durable, applied in order per user by the proxy's worker, opt-outs respected); a failure
   there is logged, never sent to the client.

Errors of the proxy itself use OpenAI's error shape (`{"error": {"message", "type", "code"}}`), also for a limit
(413 with the limit's name as `code`, 400 `max_json_depth`, 429 `rate_limit_exceeded` with Retry-After) and for
anything unexpected (500), so SDK clients raise their usual exceptions.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from urllib.parse import quote
from typing import Any, AsyncIterator, Mapping, Optional, Union

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from ..errors import BoundmemError
from ..memory import Memory, merge_recalls
from ..models import Conversation, EpisodeHit, EpisodeRecall, MemoryRecall, RecallHit, Turn
from ..retrieve.format import DEFAULT as DEFAULT_FORMAT, EPISODES_PREAMBLE, PREAMBLE, MemoryFormat
from ..service.deps import LazyMemory, MemorySource
from ..service.auth import KeyRing
from ..service.deps import LazyMemory, MemorySource, Principal, Service, Unauthorized, authenticate, client_address
from ..service.jobs_api import run_worker
from ..service.limits import (DEFAULT_MAX_BODY_BYTES, DEFAULT_RATE_LIMIT, BodySizeLimit, ContentLimits, LimitExceeded,
                              RateLimited, parse_json, throttle)
from ..service.tokens import TokenIssuer
from ..user_id import InvalidUserId, check_user_id, namespaced

log = logging.getLogger("boundmem.proxy")
USER_HEADER = "x-boundmem-user"
MEMORY_HEADER = PREAMBLE              # the default wording before the data block (an operator may give another)
EPISODES_HEADER = EPISODES_PREAMBLE


class ProxyError(BoundmemError):
    """An answer of the proxy in OpenAI's error shape; it carries its own status (auth, input, size), so it sits
    at the root rather than under one cause."""

    def __init__(self, status: int, message: str, code: str, type_: str = "invalid_request_error"):
        self.status, self.message, self.code, self.type = status, message, code, type_
        super().__init__(message)

    def response(self, headers: Optional[dict] = None) -> JSONResponse:
        return JSONResponse(status_code=self.status, content=self.body(), headers=headers)

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "code": self.code}}

    @classmethod
    def of_limit(cls, exc: LimitExceeded) -> "ProxyError":
        return cls(exc.status, str(exc), exc.name)


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def memory_block(mem: Memory, hits: list[RecallHit], fmt: MemoryFormat = DEFAULT_FORMAT) -> str:
    """The recalled preferences as the system message carries them: data, never instructions (retrieve/format.py)."""
    return fmt.preferences(mem.schema, hits)


def episodes_block(hits: list[EpisodeHit], fmt: MemoryFormat = DEFAULT_FORMAT) -> str:
    """The episodic hits as the system message carries them: dated, data (retrieve/format.py)."""
    return fmt.episodes(hits)


def with_memory(messages: list, block: str) -> list:
    """The messages with `block` added to the system message (or a new system message first)."""
    out = list(messages)
    if out and isinstance(out[0], dict) and out[0].get("role") in ("system", "developer"):
        first = dict(out[0])
        c = first.get("content")
        if isinstance(c, list):
            first["content"] = [*c, {"type": "text", "text": block}]
        else:
            first["content"] = f"{c or ''}\n\n{block}".lstrip()
        out[0] = first
    else:
        out.insert(0, {"role": "system", "content": block})
    return out


def recall_header(got: MemoryRecall) -> str:
    """`X-Boundmem-Recall`: "none" when nothing went into the prompt (nothing stored would help), else how many
    memories (preferences and episodes) did."""
    return str(got.count) if got.count else "none"


def episodes_headers(r: Optional[EpisodeRecall]) -> dict[str, str]:
    """`X-Boundmem-Episodes`: how many episodes went into the prompt; `X-Boundmem-Episodic`: off (not on for the
    tenant), declined (the controller found no need for memory) or retrieved."""
    state = "off" if r is None else "retrieved" if r.retrieved else "declined"
    return {"X-Boundmem-Episodes": str(len(r.hits) if r else 0), "X-Boundmem-Episodic": state}


class _StreamText:
    """Collects the assistant's text from server-sent events while they pass through unchanged."""

    def __init__(self) -> None:
        self.buf, self.parts, self.complete = b"", [], False

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.complete = True
                continue
            try:
                ev = json.loads(data)
                delta = (ev.get("choices") or [{}])[0].get("delta") or {}
            except (ValueError, AttributeError, IndexError, TypeError, RecursionError):   # an upstream's garbage
                continue
            if isinstance(delta.get("content"), str):
                self.parts.append(delta["content"])

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Proxy:
    """One proxy app's state and steps: the credentials and limits of the service's pipeline (`Service`), the
    upstream client, recall before the request and learning after the reply."""

    def __init__(self, svc: Service, upstream: str, upstream_key: Optional[str], timeout: float,
                 transport: Optional[httpx.AsyncBaseTransport], k: int, gate: bool, min_score: Optional[float],
                 forward_user: bool, fmt: MemoryFormat = DEFAULT_FORMAT):
        self.svc, self.get_memory, self.fmt = svc, svc.memory, fmt
        self.base = upstream.rstrip("/")
        self.upstream_key, self.timeout, self.transport = upstream_key, timeout, transport
        self.k, self.gate, self.min_score, self.forward_user = k, gate, min_score, forward_user
        self.state: dict[str, Any] = {}

    def client(self) -> httpx.AsyncClient:
        if "client" not in self.state:
            headers = {"Accept-Encoding": "identity"}   # chunks pass through as they come, uncompressed
            if self.upstream_key:
                headers["Authorization"] = f"Bearer {self.upstream_key}"
            self.state["client"] = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=10.0),
                                                     headers=headers, transport=self.transport)
        return self.state["client"]

    async def close(self) -> None:
        if "client" in self.state:
            await self.state.pop("client").aclose()

    def credential(self, request: Request) -> Principal:
        auth = request.headers.get("authorization", "")
        cred = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        try:
            return authenticate(self.svc, cred, client_address(request))
        except Unauthorized as e:
            raise ProxyError(401, str(e), "invalid_api_key") from e

    def who(self, request: Request, body: dict, caller: Principal) -> tuple[str, str]:
        """(user, namespaced store id) of the request, or ProxyError."""
        named = body.get("user") or request.headers.get(USER_HEADER)
        if caller.user is not None:
            if named is not None and named != caller.user:
                raise ProxyError(403, "this user token is for another user", "forbidden", "permission_error")
            return caller.user, namespaced(caller.tenant, caller.user)
        if not named:
            raise ProxyError(400, "name the user: the request's 'user' field or the X-Boundmem-User header",
                             "missing_user")
        try:
            check_user_id(str(named))
        except (InvalidUserId, ValueError) as e:
            raise ProxyError(400, str(e), "invalid_user") from e
        return str(named), namespaced(caller.tenant, str(named))

    def learn(self, ns: str, user_text: str, reply: str, conv_id: str) -> None:
        """Queue the exchange for ingestion (after the reply; never raises)."""
        if not user_text.strip():
            return
        try:
            turns = [Turn(role="user", text=user_text)]
            if reply.strip():   # context for the user's words (no preference is read from it), bounded like a
                # turn; where episodic memory is on, its gist ("AI recommended ...") becomes an episode
                turns.append(Turn(role="assistant", text=reply[:self.svc.limits.max_turn_chars]))
            self.get_memory().submit(Conversation(id=conv_id, turns=tuple(turns)), ns)
        except Exception:  # noqa: BLE001 - learning must never break or delay a reply
            log.exception("could not queue the exchange for ingestion")

    async def learn_now(self, ns: str, user_text: str, reply: str, conv_id: str) -> None:
        self.learn(ns, user_text, reply, conv_id)

    def recall(self, ns: str, text: str) -> list[RecallHit]:
        try:
            return (self.get_memory().recall(text, ns, k=self.k, gate=self.gate, min_score=self.min_score)
                    if text.strip() else [])
        except Exception:  # noqa: BLE001 - no memory rather than no answer
            log.exception("recall failed; forwarding without memory")
            return []

    def recall_episodes(self, ns: str, text: str, preferences_found: bool) -> Optional[EpisodeRecall]:
        """Episodes by the same reading of the request as the preferences (`Memory.joint_episodes`), for a tenant
        that has episodic memory on (None otherwise)."""
        try:
            mem = self.get_memory()
            return (mem.joint_episodes(text, ns, self.k, preferences_found, gate=self.gate)
                    if text.strip() else None)
        except Exception:  # noqa: BLE001 - no memory rather than no answer
            log.exception("episodic recall failed; forwarding without episodes")
            return None

    async def read_request(self, request: Request) -> tuple[dict, str, str]:
        """The request's body (checked), the store id of its user and what the user said last."""
        caller = self.credential(request)
        raw = await request.body()   # at most max_body_bytes, no deeper than max_json_depth (BodySizeLimit)
        try:
            body = parse_json(raw or b"null")
        except ValueError as e:
            raise ProxyError(400, f"the body is not JSON: {e}", "invalid_json") from e
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise ProxyError(400, "the body must be a JSON object with a 'messages' list", "invalid_request")
        _, ns = self.who(request, body, caller)
        said = [message_text(m.get("content")) for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
        self.svc.limits.check_turns(said)   # the user's words are what memory reads: the API's limits (413)
        if not self.forward_user:
            body.pop("user", None)
        return body, ns, said[-1] if said else ""

    async def with_recalled(self, body: dict, ns: str, last_user: str) -> dict[str, str]:
        """Put what memory holds for the request into its messages; the headers that say what was put."""
        t0 = time.perf_counter()
        # one reading of the request decides both kinds (retrieve/joint.py); together at most k
        # (memory.merge_recalls). On the event loop: as in the
        # API's recall route, two thread-pool hops cost more on a busy machine than the recall they carry
        mem = await self.get_memory.get()
        prefs = self.recall(ns, last_user)
        got = merge_recalls(prefs, self.recall_episodes(ns, last_user, bool(prefs)), self.k)
        hits, episodic = got.preferences, got.episodes
        if hits:
            body["messages"] = with_memory(body["messages"], memory_block(mem, hits, self.fmt))
        if episodic is not None and episodic.hits:   # only when the controller said memory is needed
            body["messages"] = with_memory(body["messages"], episodes_block(episodic.hits, self.fmt))
        recall_ms = (time.perf_counter() - t0) * 1000
        return {"X-Boundmem-Recall-Ms": f"{recall_ms:.2f}", "X-Boundmem-Recall": recall_header(got),
                "X-Boundmem-Recalled": str(len(hits)), **episodes_headers(episodic)}

    async def send(self, body: dict) -> httpx.Response:
        """The request on to the upstream (streamed if it asks to be); an unreachable upstream is a 502."""
        url = f"{self.base}/chat/completions"
        try:
            if body.get("stream"):
                return await self.client().send(self.client().build_request("POST", url, json=body), stream=True)
            return await self.client().post(url, json=body)
        except httpx.HTTPError as e:
            log.warning("upstream %s failed: %s: %s", self.base, type(e).__name__, e)
            raise ProxyError(502, f"the upstream model server failed ({type(e).__name__})", "upstream_unavailable",
                             "api_error") from e

    async def chat(self, request: Request) -> Response:
        body, ns, last_user = await self.read_request(request)
        extra = await self.with_recalled(body, ns, last_user)
        conv_id = f"proxy-{uuid.uuid4().hex[:16]}"
        r = await self.send(body)
        ctype = r.headers.get("content-type", "application/json")
        if not body.get("stream") or r.status_code != 200:
            content = await r.aread()
            await r.aclose()
            task = None
            if r.status_code == 200:
                try:
                    reply = message_text(json.loads(content)["choices"][0]["message"].get("content"))
                except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
                    reply = ""
                # after the response is sent: the reply never waits for the queue. On the loop (queueing is one
                # committed insert, ~0.1 ms): a sync task would hop to the thread pool, whose wake-ups then compete
                # with the next request
                task = BackgroundTask(self.learn_now, ns, last_user, reply, conv_id)
            return Response(content=content, status_code=r.status_code, media_type=ctype, headers=extra,
                            background=task)
        return StreamingResponse(self.relay(r, ns, last_user, conv_id), status_code=200, media_type=ctype,
                                 headers=extra)

    async def relay(self, r: httpx.Response, ns: str, last_user: str, conv_id: str) -> AsyncIterator[bytes]:
        seen = _StreamText()
        try:
            async for chunk in r.aiter_bytes():   # decoded: the client gets no Content-Encoding from us
                seen.feed(chunk)
                yield chunk
        finally:
            await r.aclose()
        if seen.complete:   # only a finished stream is learnt from
            self.learn(ns, last_user, seen.text, conv_id)

    async def models_of(self, request: Request, path: str) -> Response:
        self.credential(request)   # any tenant key or user token may list the models; no user is needed
        try:
            r = await self.client().get(f"{self.base}/{path}")
        except httpx.HTTPError as e:
            raise ProxyError(502, f"the upstream model server failed ({type(e).__name__})", "upstream_unavailable",
                             "api_error") from e
        return Response(content=r.content, status_code=r.status_code,
                        media_type=r.headers.get("content-type", "application/json"))


def _error_handlers(app: FastAPI) -> None:
    """Every error the proxy answers is OpenAI-shaped, so an SDK reads it as an error, not a reply."""

    @app.exception_handler(ProxyError)
    async def _proxy_error(request: Request, exc: ProxyError):
        return exc.response()

    @app.exception_handler(LimitExceeded)
    async def _limit(request: Request, exc: LimitExceeded):
        return ProxyError.of_limit(exc).response()

    @app.exception_handler(RateLimited)
    async def _rate(request: Request, exc: RateLimited):
        return ProxyError(429, str(exc), "rate_limit_exceeded", "requests").response(
            headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):   # logged by Starlette; never a plain-text 500
        return ProxyError(500, "internal error", "internal_error", "api_error").response()


def create_proxy(memory: MemorySource, keys: Union[KeyRing, Mapping[str, str]], upstream: str,
                 upstream_key: Optional[str] = None, tokens: Optional[TokenIssuer] = None, k: int = 5,
                 timeout: float = 120.0, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, rate_limit: Any = DEFAULT_RATE_LIMIT,
                 limits: Optional[ContentLimits] = None, forward_user: bool = False,
                 transport: Optional[httpx.AsyncBaseTransport] = None, gate: bool = True,
                 min_score: Optional[float] = None, memory_format: MemoryFormat = DEFAULT_FORMAT) -> FastAPI:
    """The proxy app. `upstream`: the model server's OpenAI base URL (e.g. http://127.0.0.1:11434/v1).
    `max_body_bytes`, `rate_limit` and `limits` mean what they mean for `service.app.create_app` (the same
    defaults); `forward_user` sends the request's `user` field on to the upstream (default: removed).
    `k` caps what one request gets (preferences and episodes together); `gate=False` injects raw top-k
    preferences (and episodes without CAIM's controller), `min_score` raw top-k of at least that cosine.
    `memory_format`: the operator's wording around the memory's data block (retrieve/format.py)."""
    svc = Service(ring=keys if isinstance(keys, KeyRing) else KeyRing(keys), tokens=tokens or TokenIssuer(),
                  throttle=throttle(rate_limit), limits=limits or ContentLimits(), memory=LazyMemory(memory))
    proxy = _Proxy(svc, upstream, upstream_key, timeout, transport, k, gate, min_score, forward_user, memory_format)
    app = FastAPI(title="boundmem proxy", version="1", docs_url=None, redoc_url=None)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes, render=lambda e: ProxyError.of_limit(e).body())
    app.router.on_shutdown.append(proxy.close)
    run_worker(app, svc.memory)
    _error_handlers(app)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await proxy.chat(request)

    @app.get("/v1/models")
    async def models(request: Request):
        return await proxy.models_of(request, "models")

    @app.get("/v1/models/{model:path}")
    async def model(request: Request, model: str):
        return await proxy.models_of(request, f"models/{quote(model, safe='/')}")

    @app.get("/healthz", include_in_schema=False)
    async def healthz():
        return {"ok": True}

    return app
