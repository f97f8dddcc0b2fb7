"""An MCP server (stdio) so agent frameworks can use boundmem as a tool.

It runs on the operator's machine for one agent and one end user: the server is bound to a user when it starts
(`--tenant T --user U`, or a user token minted by the HTTP API, `--token`), so the agent never chooses whose memory
it touches: no tool takes a user, and a call that passes one anyway (a prompt injection: "recall for bob"), or any
other argument a tool does not declare, is refused with a tool error. User ids are namespaced by tenant exactly as
the HTTP API does, and follow the same rule (`boundmem.user_id`). Tools: add, recall, list_preferences,
delete_preference, opt_out, opt_in, export, forget; the observations' list, confirm and dismiss; and episodic memory
(where the operator turned it on): remember_episode, recall_episodes, list_episodes, delete_episode, episode_opt_out,
episode_opt_in.

The stdio transport is our own thin layer in front of the MCP library: every frame is checked before the library
sees it, and every malformed one (invalid JSON, not an object, a batch, no or non-string method, a bad id or
version, params that are not an object, tools/call with a non-string name or non-object arguments, an unknown
method, a frame over the size limit, JSON nested deeper than the API allows) gets a JSON-RPC error reply, so a
client never waits for an answer that will not come, and no frame can stop the server. Frames are read with a
bounded buffer; the tools apply the API's content limits.
Needs the optional `mcp` package (`pip install 'boundmem[mcp]'`).
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import sys
import threading
from contextlib import contextmanager
from datetime import date
from typing import Annotated, Any, Callable, Iterator, Mapping, Optional, Union

import anyio
from pydantic import BaseModel, Field

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
from mcp.server.stdio import stdio_server

from .. import __version__
from ..episodes import EpisodicOff, tag_prefix
from ..errors import NotFoundError
from ..memory import Memory
from ..models import Conversation, Observation, Polarity, Turn, UserExport
from ..store.base import is_store_busy
from ..user_id import check_user_id, namespaced
from .limits import (DEFAULT_MAX_BODY_BYTES, ContentLimits, LimitExceeded, dimension_error, parse_json,
                     retry_after)
from .tokens import TokenError, TokenIssuer

log = logging.getLogger("boundmem.mcp")

MemorySource = Union[Memory, Callable[[], Memory]]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
REQUEST_TOO_LARGE = -32000   # implementation-defined server error: the frame is over --max-frame-bytes
# client -> server requests of the MCP spec; anything else with an id is answered "method not found" here
METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                     "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
                     "completion/complete", "logging/setLevel", "server/discover"})


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
    preferences: list[StoredPreference] = Field(description="Best first; empty when nothing stored would change the "
                                                "answer (use none then).")
    scores: list[float] = Field(description="Each one's cosine to the utterance.")
    why: list[str] = Field(default_factory=list, description="With the gate on: why each one passed.")


class AddResult(BaseModel):
    stored: list[StoredPreference] = Field(description="Preferences inserted or updated by this conversation.")
    unchanged: int = Field(description="Candidates that matched what was already stored.")
    blocked: int = Field(description="Candidates dropped because the user opted out of their category.")
    observed: list[HeldObservation] = Field(default_factory=list, description="One-off choices kept as observations.")
    promoted: list[StoredPreference] = Field(default_factory=list, description="Preferences made from a choice "
                                             "repeated in enough conversations (also in `stored`).")
    episodes: int = Field(0, description="Episodes written or revised (where episodic memory is on).")


class PreferenceListing(BaseModel):
    preferences: list[StoredPreference]


class OptOutResult(BaseModel):
    category: str = Field(description="The category as the schema names it (main, main/sub or main/sub/detail).")
    purged: list[StoredPreference] = Field(description="What was held there and is now erased.")


class OptInResult(BaseModel):
    category: str
    opted_in: bool = Field(description="False if the user had not opted out of it.")


class ForgetResult(BaseModel):
    erased: int = Field(description="Preferences erased; the erasure itself stays recorded, without content.")


Category = Annotated[str, Field(max_length=200, description="A main, sub or detail category: its key, name or "
                                                             "path (e.g. 'Restaurant' or 'poi/restaurant').")]


class ObservationListing(BaseModel):
    observations: list[HeldObservation]


class HeldEpisode(BaseModel):
    """An episodic memory: a dated thought drawn from a conversation, under ontology tags."""

    id: str
    text: str
    tags: list[str]
    day: date
    term: str = Field(description="short (its day's session is open) or long (reviewed into long-term memory).")
    source_turn_ids: list[str] = Field(default_factory=list, description="The turns it came from.")


class EpisodeListing(BaseModel):
    episodes: list[HeldEpisode]


class EpisodeRecallResult(BaseModel):
    retrieved: bool = Field(description="False when memory is not needed for this utterance (nothing to use).")
    reason: str
    episodes: list[HeldEpisode]
    scores: list[float]
    why: list[str] = Field(default_factory=list, description="Why each episode ranked.")


class RememberResult(BaseModel):
    stored: list[HeldEpisode] = Field(description="Episodes written or revised.")
    dropped: int = Field(description="Thoughts under no tag the operator allows: not kept.")
    blocked: int = Field(description="Thoughts under a tag the user opted out of: not kept.")


class EpisodeOptOutResult(BaseModel):
    tag: str
    purged: list[HeldEpisode]


class EpisodeOptInResult(BaseModel):
    tag: str
    opted_in: bool


Tag = Annotated[str, Field(max_length=300, description="A category, Category/Subcategory or tag of the episodic "
                                                       "ontology (e.g. 'Recommendations/Places').")]


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

    def store_id(self) -> str:
        """The store id of the bound user (while its token, if it has one, is still valid)."""
        if self._token is not None:
            self._issuer.verify(self._token)   # type: ignore[union-attr]
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
        except EpisodicOff as e:   # said without the tenant (the agent never sees the namespace)
            raise ToolError("episodic memory is not enabled for this memory server's tenant") from e
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


class _Bound:
    """What every tool of one server shares: the memory (built on the first call), the bound user, the limits."""

    def __init__(self, memory: MemorySource, binding: Binding, limits: ContentLimits):
        self.binding, self.limits = binding, limits
        self._source = memory
        self._lock = threading.Lock()
        self._memory: Optional[Memory] = None

    def mem(self) -> Memory:
        with self._lock:
            if self._memory is None:
                self._memory = self._source if isinstance(self._source, Memory) else self._source()
            return self._memory

    def who(self) -> str:
        try:
            return self.binding.store_id()
        except TokenError as e:
            raise ToolError(f"the user token of this server is no longer valid: {e}") from e


def _sp(p) -> StoredPreference:
    return StoredPreference(id=p.id, category=str(p.path), attribute=p.attribute, polarity=p.polarity,
                            sentence=p.sentence)


def _ho(o: Observation) -> HeldObservation:
    return HeldObservation(id=o.id, category=str(o.path), attribute=o.attribute, polarity=o.polarity,
                           sentence=o.sentence, conversation_id=o.conversation_id)


def _he(e) -> HeldEpisode:
    return HeldEpisode(id=e.id, text=e.text, tags=list(e.tags), day=e.day, term=e.term,
                       source_turn_ids=list(e.source_turn_ids))


def _new_server() -> "_Server":
    instructions = ("Long-term memory of the current user's preferences, bounded to the categories the user agreed "
                    "to. Call `add` with what the user said after a conversation, and `recall` with the user's latest "
                    "utterance before answering. When the user asks, `opt_out` stops remembering a category (and "
                    "erases it), `opt_in` lifts that, `export` shows everything held, `forget` erases it all. "
                    "`list_observations` shows one-off choices the user made; confirm or dismiss one only when the user "
                    "asks. The server serves one user: no tool takes a user id.")
    try:
        server = _Server("boundmem", version=__version__, instructions=instructions)
    except TypeError:   # mcp 1.x: no version argument; its low-level server has the field
        server = _Server("boundmem", instructions=instructions)
        getattr(server, "_mcp_server").version = __version__
    return server


def build_server(memory: MemorySource, binding: Binding, limits: Optional[ContentLimits] = None) -> "_Server":
    """One user's MCP server: every tool acts for `binding`'s user only (no tool takes a user id)."""
    ctx = _Bound(memory, binding, limits or ContentLimits())
    server = _new_server()
    tools = [*_preference_tools(server, ctx), *_observation_tools(server, ctx), *_consent_tools(server, ctx),
             *_episode_tools(server, ctx)]
    # what each tool accepts: anything else in a call is refused on the wire (see check_frame)
    server.boundmem_arguments = {f.__name__: frozenset(inspect.signature(f).parameters)   # type: ignore[attr-defined]
                                 for f in tools}
    return server


def _preference_tools(server: "_Server", ctx: _Bound) -> list[Callable[..., Any]]:
    """add, recall, list and delete preferences."""

    @server.tool()
    @_refusals
    def add(user_messages: list[str], conversation_id: Annotated[Optional[str], Field(max_length=200)] = None) -> AddResult:
        """Remember the preferences the user expressed in these messages (the user's own words, in order)."""
        ns = ctx.who()
        if not user_messages or not all(m.strip() for m in user_messages):
            raise ValueError("user_messages must be a non-empty list of non-empty strings")
        ctx.limits.check_turns(user_messages)
        m = ctx.mem()
        conv = Conversation(id=conversation_id or "mcp", turns=tuple(Turn(role="user", text=t) for t in user_messages))
        r = m.add(conv, ns)
        return AddResult(stored=[_sp(p) for p in r.stored], unchanged=sum(d.action == "pass" for d in r.decisions),
                         blocked=len(r.blocked), observed=[_ho(o) for o in r.observed],
                         promoted=[_sp(p) for p in r.promoted], episodes=len(r.episodes.stored) if r.episodes else 0)

    @server.tool()
    @_refusals
    def recall(utterance: str, k: int = 5, gate: bool = True, min_score: Optional[float] = None) -> RecallResult:
        """The stored preferences that would change the answer to what the user just said, at most k (k <= 0:
        one subcategory's); usually none. gate=false, or a min_score (cosine): raw top-k."""
        ns = ctx.who()
        if not utterance.strip():
            raise ValueError("utterance must not be empty")
        ctx.limits.check_utterance(utterance)
        hits = ctx.mem().recall(utterance, ns, k=None if k <= 0 else min(k, 100), gate=gate, min_score=min_score)
        return RecallResult(preferences=[_sp(h.preference) for h in hits], scores=[round(h.score, 4) for h in hits],
                            why=[h.why for h in hits])

    @server.tool()
    @_refusals
    def list_preferences() -> PreferenceListing:
        """Everything stored about the user, with the sentence each preference came from."""
        return PreferenceListing(preferences=[_sp(p) for p in ctx.mem().preferences(ctx.who())])

    @server.tool()
    @_refusals
    def delete_preference(preference_id: Annotated[str, Field(max_length=100)]) -> StoredPreference:
        """Delete one stored preference (when the user asks to forget it)."""
        ns = ctx.who()
        with _unknown("preference", preference_id):
            return _sp(ctx.mem().delete(ns, preference_id))

    return [add, recall, list_preferences, delete_preference]


def _observation_tools(server: "_Server", ctx: _Bound) -> list[Callable[..., Any]]:
    """One-off choices: list, confirm (a preference at once), dismiss (erased)."""

    @server.tool()
    @_refusals
    def list_observations() -> ObservationListing:
        """One-off choices the user made (not preferences, never recalled), with what they said: ask the user
        whether to remember one (`confirm_observation`) or drop it (`dismiss_observation`)."""
        return ObservationListing(observations=[_ho(o) for o in ctx.mem().observations(ctx.who())])

    @server.tool()
    @_refusals
    def confirm_observation(observation_id: Annotated[str, Field(max_length=100)]) -> StoredPreference:
        """The user wants this choice remembered: it becomes a preference at once."""
        ns = ctx.who()
        with _unknown("observation", observation_id):
            return _sp(ctx.mem().confirm(ns, observation_id))

    @server.tool()
    @_refusals
    def dismiss_observation(observation_id: Annotated[str, Field(max_length=100)]) -> HeldObservation:
        """The user does not want this choice kept: it is erased. Answers what was dismissed."""
        ns = ctx.who()
        m = ctx.mem()
        held = next((o for o in m.observations(ns) if o.id == observation_id), None)
        if held is None:
            raise ToolError(f"no observation {observation_id!r} for this user")
        m.dismiss(ns, observation_id)
        return _ho(held)

    return [list_observations, confirm_observation, dismiss_observation]


def _consent_tools(server: "_Server", ctx: _Bound) -> list[Callable[..., Any]]:
    """Opt-outs and opt-ins, export, forget: the user's control over what is held."""

    @server.tool()
    @_refusals
    def opt_out(category: Category) -> OptOutResult:
        """Stop remembering a category the user no longer wants remembered; what is held there is erased."""
        ns, m = ctx.who(), ctx.mem()
        prefix = m.schema.resolve_prefix(category)
        return OptOutResult(category=prefix, purged=[_sp(p) for p in m.opt_out(ns, prefix)])

    @server.tool()
    @_refusals
    def opt_in(category: Category) -> OptInResult:
        """Remember a category again that the user opted out of (only when the user asks)."""
        ns, m = ctx.who(), ctx.mem()
        prefix = m.schema.resolve_prefix(category)
        return OptInResult(category=prefix, opted_in=m.opt_in(ns, prefix))

    @server.tool()
    @_refusals
    def export() -> UserExport:
        """Everything held about the user: preferences, opt-outs with their consent records, the audit log."""
        ns = ctx.who()
        return UserExport.model_validate(_renamed(ctx.mem().export(ns).model_dump(mode="json"), ns, ctx.binding.user))

    @server.tool()
    @_refusals
    def forget() -> ForgetResult:
        """Erase everything held about the user (only when the user asks to be forgotten); opt-outs stay."""
        return ForgetResult(erased=ctx.mem().forget(ctx.who()))

    return [opt_out, opt_in, export, forget]


def _episode_tools(server: "_Server", ctx: _Bound) -> list[Callable[..., Any]]:
    """Episodic memory (where the operator turned it on): remember, recall, list, delete, opt out/in."""

    @server.tool()
    @_refusals
    def remember_episode(turns: Annotated[list[Turn], Field(min_length=1, max_length=1000)],
                         day: Optional[date] = None, end_session: bool = False) -> RememberResult:
        """Remember what happened in a conversation (the user's and your turns, in order) as dated episodes, e.g.
        what you recommended (where the operator turned episodic memory on)."""
        ns = ctx.who()
        ctx.limits.check_turns(t.text for t in turns)
        r = ctx.mem().remember_episode(Conversation(id="mcp", turns=tuple(turns)), ns, day=day, end_session=end_session)
        return RememberResult(stored=[_he(e) for e in r.stored], dropped=r.dropped, blocked=r.blocked)

    @server.tool()
    @_refusals
    def recall_episodes(utterance: str, k: int = 5, since: Optional[date] = None,
                        until: Optional[date] = None, gate: bool = True) -> EpisodeRecallResult:
        """What happened before that helps with what the user just said ("what was that restaurant you suggested on
        Tuesday?"), best first; nothing when memory is not needed."""
        ns = ctx.who()
        if not utterance.strip():
            raise ValueError("utterance must not be empty")
        ctx.limits.check_utterance(utterance)
        r = ctx.mem().episodic_memory.search(utterance, ns, max(1, min(k, 100)), since, until, gate=gate)
        return EpisodeRecallResult(retrieved=r.retrieved, reason=r.reason, episodes=[_he(h.episode) for h in r.hits],
                                   scores=[h.score for h in r.hits], why=[h.why for h in r.hits])

    @server.tool()
    @_refusals
    def list_episodes() -> EpisodeListing:
        """Every episode held about the user, oldest day first."""
        return EpisodeListing(episodes=[_he(e) for e in ctx.mem().episodes(ctx.who())])

    @server.tool()
    @_refusals
    def delete_episode(episode_id: Annotated[str, Field(max_length=100)]) -> HeldEpisode:
        """Delete one episode (when the user asks to forget it)."""
        ns = ctx.who()
        with _unknown("episode", episode_id):
            return _he(ctx.mem().delete_episode(ns, episode_id))

    @server.tool()
    @_refusals
    def episode_opt_out(tag: Tag) -> EpisodeOptOutResult:
        """Stop keeping episodes about a topic the user no longer wants remembered; those held are erased."""
        ns, m = ctx.who(), ctx.mem()
        return EpisodeOptOutResult(tag=_tag(m, tag), purged=[_he(e) for e in m.episode_opt_out(ns, tag)])

    @server.tool()
    @_refusals
    def episode_opt_in(tag: Tag) -> EpisodeOptInResult:
        """Keep episodes about a topic again (only when the user asks)."""
        ns, m = ctx.who(), ctx.mem()
        return EpisodeOptInResult(tag=_tag(m, tag), opted_in=m.episode_opt_in(ns, tag))

    return [remember_episode, recall_episodes, list_episodes, delete_episode, episode_opt_out, episode_opt_in]


def _tag(m: Memory, tag: str) -> str:
    return tag_prefix(m.episodic_memory.ontology, tag)


def _renamed(obj: Any, ns: str, user: str) -> Any:
    """`obj` with every string that is the store's namespaced id put back as the user's own id (an agent and its
    user never see the tenant namespace)."""
    if isinstance(obj, dict):
        return {k: _renamed(v, ns, user) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_renamed(v, ns, user) for v in obj]
    return user if obj == ns else obj


# --- the stdio transport ---------------------------------------------------------------------------
def _error(id_: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def _valid_id(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


def _tool_refusal(id_: Any, message: str) -> dict:
    """A tools/call answered as a failed tool call (the agent's model reads why), not as a protocol error."""
    return {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": message}], "isError": True}}


def check_frame(line: bytes, arguments: Optional[Mapping[str, frozenset[str]]] = None
                ) -> tuple[Optional[dict], Optional[dict]]:
    """(frame to pass on, None) or (None, error reply or None). A reply is None for a malformed notification:
    JSON-RPC never answers notifications, and a frame without an id has nothing to be answered to. `arguments`:
    the argument names each tool accepts; a tools/call with any other is refused (a tool error naming it).
    Never raises: a frame this cannot check is answered with an internal error."""
    try:
        return _check_frame(line, arguments)
    except Exception as e:  # noqa: BLE001 - no frame may stop the server
        log.exception("could not check a frame")
        return None, _error(None, INTERNAL_ERROR, f"internal error: the frame could not be read ({type(e).__name__})")


def _check_frame(line: bytes, arguments: Optional[Mapping[str, frozenset[str]]]) -> tuple[Optional[dict], Optional[dict]]:
    try:
        msg = parse_json(line)
    except LimitExceeded as e:
        return None, _error(None, PARSE_ERROR, f"parse error: {e}")
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
        args = params.get("arguments", {})
        if not isinstance(args, dict):
            return None, _error(id_, INVALID_PARAMS, "invalid params: tools/call 'arguments' must be an object")
        known = (arguments or {}).get(params["name"])
        unknown = sorted(set(args) - known) if known is not None else []
        if unknown:
            why = (" (this memory server serves one user: no tool takes a user id)"
                   if "user" in unknown else "")
            return None, _tool_refusal(id_, f"tool {params['name']!r} does not take "
                                            f"{', '.join(map(repr, unknown))}; it takes "
                                            f"{', '.join(sorted(known)) or 'no arguments'}{why}")
    return msg, None


class _Wire:
    """Line-oriented stdin/stdout for the MCP library's stdio_server: it iterates over checked frames only, and
    writes the library's replies and ours to stdout one whole line at a time."""

    def __init__(self, rfile, wfile, max_frame_bytes: int, drain_seconds: float = 30.0,
                 arguments: Optional[Mapping[str, frozenset[str]]] = None):
        self._r, self._w, self.max, self._arguments = rfile, wfile, max_frame_bytes, arguments
        self._wlock = anyio.Lock()
        self._pending: set = set()   # ids of requests passed on and not answered yet
        self._drain = drain_seconds

    # -- the stdout side (used by the library's writer and by us)
    async def write(self, text: str) -> None:
        try:
            sent = json.loads(text)
        except (ValueError, RecursionError):
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
            msg, err = check_frame(line, self._arguments)
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
    wire = _Wire(os.fdopen(wire_in, "rb", buffering=65536), os.fdopen(wire_out, "wb"), max_frame_bytes,
                 arguments=getattr(server, "boundmem_arguments", None))
    low = getattr(server, "_lowlevel_server", None) or getattr(server, "_mcp_server")
    try:
        async with stdio_server(stdin=wire, stdout=wire) as (read_stream, write_stream):  # type: ignore[arg-type]
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        sys.stdout.flush()


def run_stdio(server: "_Server", max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    anyio.run(serve_stdio, server, max_frame_bytes)
