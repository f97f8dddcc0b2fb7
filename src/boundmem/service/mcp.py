"""An MCP server (stdio) so agent frameworks can use boundmem as a tool.

It runs on the operator's machine for one agent and one end user: the server is bound to a user when it starts
(`--tenant T --user U`, or a user token minted by the HTTP API, `--token`), so the agent never chooses whose memory
it touches. A tool call that names another user (a prompt injection: "recall for bob") is refused. User ids are
namespaced by tenant exactly as the HTTP API does, and follow the same rule (`boundmem.user_id`).

The stdio transport is our own thin layer in front of the MCP library: every frame is checked before the library
sees it, and every malformed one (invalid JSON, not an object, a batch, no or non-string method, a bad id or
version, params that are not an object, tools/call with a non-string name or non-object arguments, an unknown
method, a frame over the size limit) gets a JSON-RPC error reply, so a client never waits for an answer that will
not come. Frames are read with a bounded buffer; the tools apply the API's content limits.
Needs the optional `mcp` package (`pip install 'boundmem[mcp]'`).
"""
from __future__ import annotations

import functools
import json
import os
import sys
import threading
from contextlib import contextmanager
from typing import Annotated, Any, Callable, Iterator, Optional, Union

import anyio
from pydantic import BaseModel, Field

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
from mcp.server.stdio import stdio_server

from ..errors import NotFoundError
from ..memory import Memory
from ..models import Conversation, Observation, Polarity, Turn
from ..store.base import is_store_busy
from ..user_id import check_user_id, namespaced
from .limits import (DEFAULT_MAX_BODY_BYTES, ContentLimits, LimitExceeded, dimension_error,
                     retry_after)
from .tokens import TokenError, TokenIssuer

MemorySource = Union[Memory, Callable[[], Memory]]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
REQUEST_TOO_LARGE = -32000   # implementation-defined server error: the frame is over --max-frame-bytes
# client -> server requests of the MCP spec; anything else with an id is answered "method not found" here
METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                     "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
                     "completion/complete", "logging/setLevel", "server/discover"})


User = Annotated[Optional[str], Field(description="Leave out: this server serves one user. If given, it must be that user.")]


class StoredPreference(BaseModel):
    id: str
    category: str
    attribute: str = Field(description="The value, never negated: `polarity` says whether the user wants it.")
    polarity: Polarity = Field("like", description="like, dislike (avoid it) or indifferent (the user does not mind).")
    sentence: str = Field(description="What the user said that this was taken from.")


class HeldObservation(BaseModel):
    """A one-off choice the user made: not a preference (never recalled) until repeated or confirmed."""

    id: str
    category: str
    attribute: str
    polarity: Polarity = "like"
    sentence: str = Field(description="What the user said.")
    conversation_id: Optional[str] = None


class RecallResult(BaseModel):
    preferences: list[StoredPreference]
    scores: list[float]


class AddResult(BaseModel):
    stored: list[StoredPreference] = Field(description="Preferences inserted or updated by this conversation.")
    unchanged: int = Field(description="Candidates that matched what was already stored.")
    blocked: int = Field(description="Candidates dropped because the user opted out of their category.")
    observed: list[HeldObservation] = Field(default_factory=list, description="One-off choices kept as observations.")
    promoted: list[StoredPreference] = Field(default_factory=list, description="Preferences made from a choice "
                                             "repeated in enough conversations (also in `stored`).")


class PreferenceListing(BaseModel):
    preferences: list[StoredPreference]


class ObservationListing(BaseModel):
    observations: list[HeldObservation]


class Binding:
    """The one user an MCP server acts for: fixed (tenant, user), or a user token checked at every call (so an
    expired or revoked token stops working while the server runs)."""

    def __init__(self, tenant: Optional[str] = None, user: Optional[str] = None, token: Optional[str] = None,
                 issuer: Optional[TokenIssuer] = None):
        if token is not None:
            if issuer is None:
                raise ValueError("a user token needs the server secret that signed it (--token-secret-file)")
            tok = issuer.verify(token)   # refuse to start with a bad token
            self.tenant, self.user = tok.tenant, tok.user
        elif tenant is not None and user is not None:
            self.tenant, self.user = tenant, check_user_id(user)
            namespaced(tenant, user)
        else:
            raise ValueError("an MCP server must be bound to one user (--user) or to a user token (--token)")
        self._token, self._issuer = token, issuer

    def store_id(self, asked: Optional[str] = None) -> str:
        """The store id of the bound user; `asked` (a user id the agent passed) must be that user."""
        if self._token is not None:
            self._issuer.verify(self._token)   # type: ignore[union-attr]
        if asked is not None:
            check_user_id(asked)
            if asked != self.user:
                raise ValueError(f"this memory server is bound to one user; user {asked!r} is refused")
        return namespaced(self.tenant, self.user)


def _refusals(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A refusal (a bad or foreign user id, a limit, an invalid argument, a busy store) reaches the agent as a tool
    error with its reason; the MCP library would otherwise hide the reason of any other exception."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except (ValueError, LimitExceeded) as e:
            raise ToolError(str(e)) from e
        except Exception as e:
            if is_store_busy(e):
                raise ToolError(f"the store is busy with another writer; nothing was changed, retry in "
                                f"{retry_after(e)} s") from e
            msg = dimension_error(e)
            if msg:
                raise ToolError(msg) from e
            raise
    return wrapper


@contextmanager
def _unknown(kind: str, ident: str) -> Iterator[None]:
    """An id this user does not hold, said without the store's namespaced user id."""
    try:
        yield
    except NotFoundError as e:
        raise ToolError(f"no {kind} {ident!r} for this user") from e


def build_server(memory: MemorySource, binding: Binding, limits: Optional[ContentLimits] = None) -> "_Server":
    limits = limits or ContentLimits()
    lock = threading.Lock()
    held: list[Memory] = []

    def mem() -> Memory:
        with lock:
            if not held:
                held.append(memory if isinstance(memory, Memory) else memory())
            return held[0]

    def who(user: Optional[str]) -> str:
        try:
            return binding.store_id(user)
        except TokenError as e:
            raise ToolError(f"the user token of this server is no longer valid: {e}") from e

    def sp(p) -> StoredPreference:
        return StoredPreference(id=p.id, category=str(p.path), attribute=p.attribute, polarity=p.polarity,
                                sentence=p.sentence)

    def ho(o: Observation) -> HeldObservation:
        return HeldObservation(id=o.id, category=str(o.path), attribute=o.attribute, polarity=o.polarity,
                               sentence=o.sentence, conversation_id=o.conversation_id)

    server = _Server("boundmem", instructions=(
        "Long-term memory of the current user's preferences, bounded to the categories the user agreed to. Call "
        "`add` with what the user said after a conversation, and `recall` with the user's latest utterance before "
        "answering. `list_observations` shows one-off choices the user made; confirm or dismiss one only when the user "
        "asks. The server serves one user; you do not need to pass a user id."))

    @server.tool()
    @_refusals
    def add(user_messages: list[str], conversation_id: Annotated[Optional[str], Field(max_length=200)] = None,
            user: User = None) -> AddResult:
        """Remember the preferences the user expressed in these messages (the user's own words, in order)."""
        ns = who(user)
        if not user_messages or not all(m.strip() for m in user_messages):
            raise ValueError("user_messages must be a non-empty list of non-empty strings")
        limits.check_turns(user_messages)
        m = mem()
        conv = Conversation(id=conversation_id or "mcp", turns=tuple(Turn(role="user", text=t) for t in user_messages))
        r = m.add(conv, ns)
        return AddResult(stored=[sp(p) for p in r.stored], unchanged=sum(d.action == "pass" for d in r.decisions),
                         blocked=len(r.blocked), observed=[ho(o) for o in r.observed],
                         promoted=[sp(p) for p in r.promoted])

    @server.tool()
    @_refusals
    def recall(utterance: str, k: int = 5, user: User = None) -> RecallResult:
        """The stored preferences most relevant to what the user just said (k <= 0: dynamic, one subcategory)."""
        ns = who(user)
        if not utterance.strip():
            raise ValueError("utterance must not be empty")
        limits.check_utterance(utterance)
        hits = mem().recall(utterance, ns, k=None if k <= 0 else min(k, 100))
        return RecallResult(preferences=[sp(h.preference) for h in hits], scores=[round(h.score, 4) for h in hits])

    @server.tool()
    @_refusals
    def list_preferences(user: User = None) -> PreferenceListing:
        """Everything stored about the user, with the sentence each preference came from."""
        return PreferenceListing(preferences=[sp(p) for p in mem().preferences(who(user))])

    @server.tool()
    @_refusals
    def delete_preference(preference_id: Annotated[str, Field(max_length=100)], user: User = None) -> StoredPreference:
        """Delete one stored preference (when the user asks to forget it)."""
        ns = who(user)
        with _unknown("preference", preference_id):
            return sp(mem().delete(ns, preference_id))

    @server.tool()
    @_refusals
    def list_observations(user: User = None) -> ObservationListing:
        """One-off choices the user made (not preferences, never recalled), with what they said: ask the user
        whether to remember one (`confirm_observation`) or drop it (`dismiss_observation`)."""
        return ObservationListing(observations=[ho(o) for o in mem().observations(who(user))])

    @server.tool()
    @_refusals
    def confirm_observation(observation_id: Annotated[str, Field(max_length=100)],
                            user: User = None) -> StoredPreference:
        """The user wants this choice remembered: it becomes a preference at once."""
        ns = who(user)
        with _unknown("observation", observation_id):
            return sp(mem().confirm(ns, observation_id))

    @server.tool()
    @_refusals
    def dismiss_observation(observation_id: Annotated[str, Field(max_length=100)],
                            user: User = None) -> HeldObservation:
        """The user does not want this choice kept: it is erased. Answers what was dismissed."""
        ns = who(user)
        m = mem()
        held = next((o for o in m.observations(ns) if o.id == observation_id), None)
        if held is None:
            raise ToolError(f"no observation {observation_id!r} for this user")
        m.dismiss(ns, observation_id)
        return ho(held)

    return server


# --- the stdio transport ---------------------------------------------------------------------------
def _error(id_: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _valid_id(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def check_frame(line: bytes) -> tuple[Optional[dict], Optional[dict]]:
    """(frame to pass on, None) or (None, error reply or None). A reply is None for a malformed notification:
    JSON-RPC never answers notifications, and a frame without an id has nothing to be answered to."""
    try:
        msg = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return None, _error(None, PARSE_ERROR, f"parse error: not valid JSON ({e})")
    if isinstance(msg, list):
        return None, _error(None, INVALID_REQUEST, "invalid request: batches are not supported (MCP 2025-06-18), "
                                                   "send one message per line")
    if not isinstance(msg, dict):
        return None, _error(None, INVALID_REQUEST, f"invalid request: a message must be a JSON object, not {type(msg).__name__}")
    has_id = "id" in msg
    id_ = msg.get("id") if has_id and _valid_id(msg.get("id")) else None
    if msg.get("jsonrpc") != "2.0":
        return None, _error(id_, INVALID_REQUEST, "invalid request: 'jsonrpc' must be \"2.0\"")
    if has_id and not _valid_id(msg["id"]):
        return None, _error(None, INVALID_REQUEST, "invalid request: 'id' must be a string or an integer")
    if "method" not in msg:
        if has_id and ("result" in msg) != ("error" in msg):
            return msg, None   # a client's answer to a server request
        return None, _error(id_, INVALID_REQUEST, "invalid request: no 'method'")
    method = msg["method"]
    if not isinstance(method, str):
        return None, _error(id_, INVALID_REQUEST, "invalid request: 'method' must be a string")
    params = msg.get("params", {})
    if not has_id:
        if not method.startswith("notifications/"):
            return None, _error(None, INVALID_REQUEST, f"invalid request: {method!r} needs an 'id' (only "
                                                       "notifications/* go without one)")
        # a notification: pass it on if well-formed; never answered, so a malformed one is dropped
        return (msg, None) if isinstance(params, dict) else (None, None)
    if method not in METHODS:
        return None, _error(id_, METHOD_NOT_FOUND, f"method not found: {method!r}")
    if not isinstance(params, dict):
        return None, _error(id_, INVALID_PARAMS, "invalid params: 'params' must be an object")
    if method == "tools/call":
        if not isinstance(params.get("name"), str):
            return None, _error(id_, INVALID_PARAMS, "invalid params: tools/call needs a string 'name'")
        if not isinstance(params.get("arguments", {}), dict):
            return None, _error(id_, INVALID_PARAMS, "invalid params: tools/call 'arguments' must be an object")
    return msg, None


class _Wire:
    """Line-oriented stdin/stdout for the MCP library's stdio_server: it iterates over checked frames only, and
    writes the library's replies and ours to stdout one whole line at a time."""

    def __init__(self, rfile, wfile, max_frame_bytes: int, drain_seconds: float = 30.0):
        self._r, self._w, self.max = rfile, wfile, max_frame_bytes
        self._wlock = anyio.Lock()
        self._pending: set = set()   # ids of requests passed on and not answered yet
        self._drain = drain_seconds

    # -- the stdout side (used by the library's writer and by us)
    async def write(self, text: str) -> None:
        try:
            sent = json.loads(text)
        except ValueError:
            sent = None
        if isinstance(sent, dict) and ("result" in sent or "error" in sent):
            self._pending.discard(json.dumps(sent.get("id")))
        async with self._wlock:
            await anyio.to_thread.run_sync(self._write_sync, text)

    def _write_sync(self, text: str) -> None:
        self._w.write(text.encode("utf-8"))
        self._w.flush()

    async def flush(self) -> None:
        return None

    async def reply(self, obj: dict) -> None:
        await self.write(json.dumps(obj, separators=(",", ":")) + "\n")

    # -- the stdin side
    def _read_frame(self) -> Optional[tuple[bytes, bool]]:
        """The next line, at most max+1 bytes of it; (line, too_long). None at EOF. A longer line is read on to
        its end in bounded pieces and dropped."""
        line = self._r.readline(self.max + 1)
        if not line:
            return None
        if len(line) > self.max and not line.endswith(b"\n"):
            while True:
                rest = self._r.readline(65536)
                if not rest or rest.endswith(b"\n"):
                    break
            return b"", True
        return line, len(line.rstrip(b"\r\n")) > self.max

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        while True:
            got = await anyio.to_thread.run_sync(self._read_frame)
            if got is None:
                # the client closed its side: answer what it already asked (the library would cancel it), then stop
                with anyio.move_on_after(self._drain):
                    while self._pending:
                        await anyio.sleep(0.02)
                raise StopAsyncIteration
            line, too_long = got
            if too_long:
                await self.reply(_error(None, REQUEST_TOO_LARGE, f"request too large: a frame may be at most "
                                                                 f"{self.max} bytes (limit max_frame_bytes)"))
                continue
            if not line.strip():
                continue
            msg, err = check_frame(line)
            if err is not None:
                await self.reply(err)
            if msg is not None:
                if "method" in msg and "id" in msg:
                    self._pending.add(json.dumps(msg["id"]))
                return json.dumps(msg)


async def serve_stdio(server: "_Server", max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Serve on this process's stdin/stdout. While serving, fd 0 reads /dev/null and fd 1 goes to stderr, so
    nothing a library prints can corrupt the wire."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    wire = _Wire(os.fdopen(wire_in, "rb", buffering=65536), os.fdopen(wire_out, "wb"), max_frame_bytes)
    low = getattr(server, "_lowlevel_server", None) or getattr(server, "_mcp_server")
    try:
        async with stdio_server(stdin=wire, stdout=wire) as (read_stream, write_stream):  # type: ignore[arg-type]
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        sys.stdout.flush()


def run_stdio(server: "_Server", max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    anyio.run(serve_stdio, server, max_frame_bytes)
