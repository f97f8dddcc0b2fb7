"""Correcting a stored preference and reading its history: the user fixes a wrong value instead of deleting it,
and sees how each preference came to be what it is.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from typing import Annotated

from fastapi import APIRouter, Path

from ...api_models import PreferenceEdit, PreferenceHistory, PreferenceOut
from ...models import AuditEntry, edited_preference_ids
from ..deps import Mem, Subj, Subject
from ..error_handlers import NOT_FOUND
from .preferences import preference_out

router = APIRouter(tags=["transparency"])
PrefId = Annotated[str, Path(max_length=100)]


@router.patch("/v1/users/{user}/preferences/{pref_id}", response_model=PreferenceOut, responses=NOT_FOUND)
def edit_preference(pref_id: PrefId, body: PreferenceEdit, s: Subj, mem: Mem) -> PreferenceOut:
    """Correct a preference's value (`attribute`) and/or `polarity`; answers it as stored. Audited "update" with the
    cause "edited by the user". A value not listed in a closed category: 422 naming the items; the same value
    held twice, or an opted-out category: 409; an unknown id: 404."""
    p = mem.update(s.ns, pref_id, attribute=body.attribute, polarity=body.polarity)
    return preference_out(mem, p, s.user, edited=p.id in edited_preference_ids(mem.history(s.ns, p.id)))


@router.get("/v1/users/{user}/preferences/{pref_id}/history", response_model=PreferenceHistory, responses=NOT_FOUND)
def preference_history(pref_id: PrefId, s: Subj, mem: Mem) -> PreferenceHistory:
    """The preference's audit entries, oldest first (also after it was deleted: then without its content)."""
    return PreferenceHistory(user=s.user, preference_id=pref_id,
                             entries=[_entry(a, s) for a in mem.history(s.ns, pref_id)])


def _entry(a: AuditEntry, s: Subject) -> AuditEntry:
    """An entry as the caller may see it: the caller's user id, never the store's namespaced one."""
    def named(d):
        return None if d is None else {k: (s.user if k == "user" and v == s.ns else v) for k, v in d.items()}

    return a.model_copy(update={"user": s.user, "before": named(a.before), "after": named(a.after)})
