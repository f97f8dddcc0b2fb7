"""Episodic memory in the SQL stores: dated, tagged thoughts beside the preferences, under the same rules.

Why in the preference store and not CAIM's own file: one user's memory is one thing to export, opt out of and
forget. An episode is written, revised and deleted inside the user's transaction (`SqlTx` inherits `EpisodeTx`),
every change lands in the same hash-chained audit log (ops "episode", "episode_update", "episode_delete"; deleting
erases the payloads, as for a preference), and forget removes the rows with the rest.

The bounds live here so that no caller can forget them: an episode needs at least one tag (what the operator's
ontology allowed; a thought with none is not kept), and a tag under one of the user's episodic opt-outs refuses the
write (OptedOutError). Those opt-outs are kept under the user's pseudonym beside the category opt-outs (they outlive
forget, as consent does), and opting out purges what is held under the tag. A tag is "Category/Subcategory/attr";
an opt-out names a category, a subcategory or one tag, and covers an episode when any of its tags lies under it
(the thought talks about it).
"""
from __future__ import annotations

import json
import uuid
from datetime import date
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..errors import InputError, NotFoundError
from ..models import Episode, Term
from .base import OptedOutError, blocking_rule, opt_out_prefix, stack

EPISODE_COLS = ("id, {user}, text, tags, day, term, sources, conversation_id, created_at, updated_at")
MAX_TAGS = 3
MAX_TEXT = 400   # CAIM's bound on a thought


def row_to_episode(r) -> Episode:
    return Episode(id=r[0], user=r[1], text=r[2], tags=tuple(json.loads(r[3])), day=r[4], term=r[5],
                   source_turn_ids=tuple(json.loads(r[6])), conversation_id=r[7], created_at=r[8], updated_at=r[9])


def episode_rule(opt_outs: Sequence[str], tags: Sequence[str]) -> Optional[str]:
    """The episodic opt-out covering any of these tags, if one does."""
    return next((r for r in (blocking_rule(list(opt_outs), t) for t in tags) if r), None)


def episode_tag(tag: str) -> str:
    """A tag as stored and compared ("Category/Subcategory/attr", trimmed); bad input otherwise."""
    return opt_out_prefix(str(tag)) if isinstance(tag, str) else opt_out_prefix("")


def _tags(tags: Sequence[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(episode_tag(t) for t in tags))
    if not out:
        raise InputError("an episode needs at least one tag of the operator's ontology; a thought with none is not kept")
    if len(out) > MAX_TAGS:
        raise InputError(f"an episode has at most {MAX_TAGS} tags, got {len(out)}")
    return out


def _text(text: str) -> str:
    t = " ".join(str(text).split())
    if not t:
        raise InputError("an episode's text is empty")
    if len(t) > MAX_TEXT:
        raise InputError(f"an episode's text has at most {MAX_TEXT} characters, got {len(t)}")
    return t


def public_episode(e: Episode) -> dict:
    return e.model_dump(mode="json")


def audit_category(tags: Sequence[str]) -> str:
    """What an episode's audit entries name as their category: its tags (the operator's vocabulary, never the
    user's words), so an erased entry still says what kind of memory it was."""
    return "episodic:" + "|".join(tags)


class EpisodeTx:
    """The episodic half of `SqlTx` (it provides `_q`, `_audit`, `_erase`, `_vector`, `d`, `user`, `subject`)."""

    _ep_opt: Optional[list[str]] = None

    def episode_opt_outs(self) -> list[str]:
        if self._ep_opt is None:
            self._ep_opt = [r[0] for r in self._q("SELECT prefix FROM episode_opt_outs WHERE subject=? ORDER BY prefix",
                                                  (self.subject,))]
        return list(self._ep_opt)

    def _ep_check(self, tags: Sequence[str]) -> None:
        rule = episode_rule(self.episode_opt_outs(), tags)
        if rule:
            raise OptedOutError(self.user, next(t for t in tags if blocking_rule([rule], t)), rule)

    def episodes(self, term: Optional[Term] = None) -> list[Episode]:
        cols = EPISODE_COLS.format(user=self.d.user_col)
        if term is None:
            rows = self._q(f"SELECT {cols} FROM episodes WHERE {{user}}=? {self.d.episode_order}", (self.user,))
        else:
            rows = self._q(f"SELECT {cols} FROM episodes WHERE {{user}}=? AND term=? {self.d.episode_order}",
                           (self.user, term))
        return [row_to_episode(r) for r in rows]

    def episode(self, episode_id: str) -> Episode:
        cols = EPISODE_COLS.format(user=self.d.user_col)
        r = self._q(f"SELECT {cols} FROM episodes WHERE id=? AND {{user}}=?", (episode_id, self.user)).fetchone()
        if r is None:
            raise NotFoundError(f"no episode {episode_id!r} for user {self.user!r}")
        return row_to_episode(r)

    def add_episode(self, text: str, tags: Sequence[str], day: date, embedding: np.ndarray, cause: str, *,
                    term: Term = "short", sources: Sequence[str] = (), conversation_id: Optional[str] = None) -> Episode:
        """Store one thought (audited "episode"); OptedOutError if a tag is under an episodic opt-out, InputError
        for no tag, more than three or an empty text."""
        text, tags = _text(text), _tags(tags)
        self._ep_check(tags)
        vec = self._vector(embedding)
        now = self.d.now()
        eid = uuid.uuid4().hex
        cols = EPISODE_COLS.format(user=self.d.user_col)
        self._q(f"INSERT INTO episodes({cols}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (eid, self.user, text, json.dumps(list(tags)), self.d.day(day), term,
                 json.dumps(list(dict.fromkeys(sources))), conversation_id, now, now, vec))
        e = self.episode(eid)
        self._audit("episode", eid, None, public_episode(e), cause, audit_category(tags),
                    "learned from a conversation" if conversation_id else "stored on request")
        return e

    def revise_episode(self, episode_id: str, cause: str, why: str, *, text: Optional[str] = None,
                       tags: Optional[Sequence[str]] = None, day: Optional[date] = None, term: Optional[Term] = None,
                       sources: Optional[Sequence[str]] = None, embedding: Optional[np.ndarray] = None) -> Episode:
        """Change a stored thought in place (keeps its id; audited "episode_update" with before/after): a duplicate
        folded into it, its move into long-term memory. A new text needs its new embedding."""
        before = self.episode(episode_id)
        if text is not None and _text(text) != before.text and embedding is None:
            raise InputError("a revised episode text needs its embedding")
        new_tags = before.tags if tags is None else _tags(tags)
        self._ep_check(new_tags)
        sets, params = ["updated_at=?"], [self.d.now()]
        for col, value in (("text", None if text is None else _text(text)),
                           ("tags", None if tags is None else json.dumps(list(new_tags))),
                           ("day", None if day is None else self.d.day(day)), ("term", term),
                           ("sources", None if sources is None else json.dumps(list(dict.fromkeys(sources)))),
                           ("embedding", None if embedding is None else self._vector(embedding))):
            if value is not None:
                sets.append(f"{col}=?")
                params.append(value)
        self._q(f"UPDATE episodes SET {', '.join(sets)} WHERE id=? AND {{user}}=?", (*params, episode_id, self.user))
        after = self.episode(episode_id)
        self._audit("episode_update", episode_id, public_episode(before), public_episode(after), cause,
                    audit_category(after.tags), why)
        return after

    def delete_episode(self, episode_id: str, cause: str, why: str = "deleted on request") -> Episode:
        """Delete a thought and erase it from the audit log (its entries keep metadata and content hash only)."""
        before = self.episode(episode_id)
        self._q("DELETE FROM episodes WHERE id=? AND {user}=?", (episode_id, self.user))
        self._erase("preference_id=?", (episode_id,))
        self._audit("episode_delete", episode_id, public_episode(before), None, cause, audit_category(before.tags),
                    why, keep_payload=False)
        return before

    def episode_opt_out(self, prefix: str, cause: str) -> list[Episode]:
        """Record an episodic opt-out (a category, subcategory or tag) and purge the thoughts it covers; later
        writes under it are refused. Returns what was purged."""
        prefix = opt_out_prefix(prefix)
        self._q("INSERT INTO episode_opt_outs(subject, prefix, at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (self.subject, prefix, self.d.now()))
        self._ep_opt = sorted({*self.episode_opt_outs(), prefix})
        self._audit("episode_opt_out", None, None, {"prefix": prefix}, cause, prefix, "the user opted out")
        purged = [e for e in self.episodes() if episode_rule([prefix], e.tags)]
        for e in purged:
            self.delete_episode(e.id, f"opt-out of {prefix}", why=f"purged by the opt-out of {prefix}")
        return purged

    def episode_opt_in(self, prefix: str, cause: str) -> bool:
        prefix = opt_out_prefix(prefix)
        n = self._q("DELETE FROM episode_opt_outs WHERE subject=? AND prefix=?", (self.subject, prefix)).rowcount
        if n:
            self._ep_opt = [p for p in self.episode_opt_outs() if p != prefix]
            self._audit("episode_opt_in", None, None, {"prefix": prefix}, cause, prefix, "the user opted back in")
        return bool(n)

    def forget_episodes(self) -> int:
        """Inside forget: every thought of the user goes (their audit payloads with the rest of the log's)."""
        return self._q("DELETE FROM episodes WHERE {user}=?", (self.user,)).rowcount


class EpisodeReads:
    """The episodic reads of a SQL store. The store provides `_ep_rows(sql, params)` (a read on its connection),
    `_ep_vector(stored) -> np.ndarray`, `keys` and the module's DIALECT as `_dialect`."""

    _dialect: Any

    def _ep_select(self, user: str, since: Optional[date], until: Optional[date], term: Optional[Term],
                   extra: str = "") -> list:
        d = self._dialect
        cond, params = [f"{d.user_col}=?"], [user]
        if since is not None:
            cond.append("day >= ?")
            params.append(d.day(since))
        if until is not None:
            cond.append("day <= ?")
            params.append(d.day(until))
        if term is not None:
            cond.append("term=?")
            params.append(term)
        cols = EPISODE_COLS.format(user=d.user_col)
        return self._ep_rows(d.sql(f"SELECT {cols}{extra} FROM episodes WHERE {' AND '.join(cond)} {d.episode_order}"),
                             tuple(params))

    def episodes(self, user: str, since: Optional[date] = None, until: Optional[date] = None,
                 term: Optional[Term] = None) -> list[Episode]:
        opted = self.episode_opt_outs(user)
        return [e for e in map(row_to_episode, self._ep_select(user, since, until, term))
                if not episode_rule(opted, e.tags)]

    def episode_vectors(self, user: str, since: Optional[date] = None,
                        until: Optional[date] = None) -> tuple[list[Episode], np.ndarray]:
        opted = self.episode_opt_outs(user)
        rows = [r for r in self._ep_select(user, since, until, None, ", embedding")
                if not episode_rule(opted, json.loads(r[3]))]
        return [row_to_episode(r) for r in rows], stack(user, [self._ep_vector(r[10]) for r in rows])

    def episode_opt_outs(self, user: str) -> list[str]:
        d = self._dialect
        return [r[0] for r in self._ep_rows(d.sql("SELECT prefix FROM episode_opt_outs WHERE subject=? ORDER BY prefix"),
                                            (self.keys.subject(user),))]


class EpisodeWrites:
    """Store methods that are one-operation episodic transactions; the store provides `transaction(user)`."""

    transaction: Callable[..., Any]

    def delete_episode(self, user: str, episode_id: str, cause: str) -> Episode:
        with self.transaction(user) as tx:
            return tx.delete_episode(episode_id, cause)

    def episode_opt_out(self, user: str, prefix: str, cause: str) -> list[Episode]:
        with self.transaction(user) as tx:
            return tx.episode_opt_out(prefix, cause)

    def episode_opt_in(self, user: str, prefix: str, cause: str) -> bool:
        with self.transaction(user) as tx:
            return tx.episode_opt_in(prefix, cause)
