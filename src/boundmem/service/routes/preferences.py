"""Transparency and control: what is stored about a user, with the sentence it came from; delete one preference,
export everything, forget the user.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from typing import Annotated, Optional

from fastapi import APIRouter, Path, Query

from ...api_models import ForgetOut, PreferenceList, PreferenceOut
from ...memory import Memory
from ...models import AuditEntry, Preference, UserExport, edited_preference_ids
from ...schema.display import category_labels, statement, value_label
from ..deps import Mem, Subj
from ..error_handlers import NOT_FOUND, about_field

router = APIRouter(tags=["transparency"])


def preference_out(mem: Memory, p: Preference, user: str, edited: bool = False) -> PreferenceOut:
    """A stored preference as the API shows it: the caller's user id, the category's labels and the value worded
    with its polarity (and the schema's label for the value), so every client shows a dislike as one; `edited`: the
    user corrected the value since the sentence was said."""
    labels = category_labels(mem.schema, p.path)
    cat, label = " > ".join(labels), labels[-1]
    shown = value_label(mem.schema, p.path, p.attribute)
    return PreferenceOut(id=p.id, user=user, path=p.path, category=cat, attribute=p.attribute, polarity=p.polarity,
                         label=label, display=statement(label, shown, p.polarity), sentence=p.sentence, edited=edited,
                         conversation_id=p.conversation_id, created_at=p.created_at, updated_at=p.updated_at)


@router.get("/v1/users/{user}/preferences", response_model=PreferenceList)
def list_preferences(s: Subj, mem: Mem,
                     category: Annotated[Optional[str], Query(max_length=300, description="Only under this main/sub/detail category.")] = None) -> PreferenceList:
    """Every stored preference, with the sentence it came from. An unknown `category`: 422 naming it."""
    with about_field("query", "category", kind="unknown_category"):
        prefs = mem.preferences(s.ns, category)
    edited = edited_preference_ids(mem.store.audit(s.ns)) if prefs else set()
    return PreferenceList(user=s.user, preferences=[preference_out(mem, p, s.user, p.id in edited) for p in prefs])


@router.delete("/v1/users/{user}/preferences/{pref_id}", response_model=PreferenceOut, responses=NOT_FOUND)
def delete_preference(pref_id: Annotated[str, Path(max_length=100)], s: Subj, mem: Mem) -> PreferenceOut:
    """Delete one preference; returns what was deleted."""
    return preference_out(mem, mem.delete(s.ns, pref_id), s.user)


@router.get("/v1/users/{user}/export", response_model=UserExport)
def export(s: Subj, mem: Mem) -> UserExport:
    """Everything held about the user: preferences (with their polarity), observations, episodes, opt-outs and the
    audit log."""
    ns = s.ns
    e = mem.export(ns)

    def scrub(d: Optional[dict]) -> Optional[dict]:
        return None if d is None else {k: (s.user if k == "user" and v == ns else v) for k, v in d.items()}

    return UserExport(user=s.user, exported_at=e.exported_at, opt_outs=e.opt_outs,
                      preferences=[p.model_copy(update={"user": s.user}) for p in e.preferences],
                      observations=[o.model_copy(update={"user": s.user}) for o in e.observations],
                      episodes=[x.model_copy(update={"user": s.user}) for x in e.episodes],
                      episode_opt_outs=e.episode_opt_outs,
                      audit=[AuditEntry(**{**a.model_dump(), "user": s.user, "before": scrub(a.before), "after": scrub(a.after)})
                             for a in e.audit], consents=e.consents)


@router.delete("/v1/users/{user}", response_model=ForgetOut, responses=NOT_FOUND)
def forget(s: Subj, mem: Mem) -> ForgetOut:
    """Erase everything stored about the user (the erasure itself stays recorded). A user the tenant does not hold
    (never seen, or forgotten already): 404, as in the library and on the CLI."""
    return ForgetOut(user=s.user, erased=mem.forget(s.ns))
