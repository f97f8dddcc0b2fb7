"""Observations: one-off choices the user made ("play some jazz"), held apart from preferences and never recalled.
The user sees them, confirms one (it becomes a preference at once) or dismisses it (erased).

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from typing import Annotated

from fastapi import APIRouter, Path

from ...api_models import ObservationList, ObservationOut, PreferenceOut
from ...errors import NotFoundError
from ...memory import Memory
from ...models import Observation
from ...schema.display import category_labels, choice, value_label
from ..deps import Mem, Subj
from ..error_handlers import NOT_FOUND
from .preferences import preference_out

router = APIRouter(tags=["transparency"])

ObservationId = Annotated[str, Path(max_length=100)]


def observation_out(mem: Memory, o: Observation, user: str) -> ObservationOut:
    """An observation as the API shows it: the caller's user id, the category's labels, the choice worded."""
    labels = category_labels(mem.schema, o.path)
    cat, label = " > ".join(labels), labels[-1]
    return ObservationOut(id=o.id, user=user, path=o.path, category=cat, attribute=o.attribute, polarity=o.polarity,
                          label=label, display=choice(label, value_label(mem.schema, o.path, o.attribute), o.polarity), sentence=o.sentence,
                          conversation_id=o.conversation_id, created_at=o.created_at)


@router.get("/v1/users/{user}/observations", response_model=ObservationList)
def list_observations(s: Subj, mem: Mem) -> ObservationList:
    """Every one-off choice held about the user, with what they said. Not preferences: never recalled."""
    return ObservationList(user=s.user, observations=[observation_out(mem, o, s.user) for o in mem.observations(s.ns)])


@router.post("/v1/users/{user}/observations/{observation_id}/confirm", response_model=PreferenceOut,
             responses=NOT_FOUND)
def confirm_observation(observation_id: ObservationId, s: Subj, mem: Mem) -> PreferenceOut:
    """The user confirms a choice: it becomes a preference at once (answered as stored). Unknown id: 404."""
    return preference_out(mem, mem.confirm(s.ns, observation_id), s.user)


@router.delete("/v1/users/{user}/observations/{observation_id}", response_model=ObservationOut, responses=NOT_FOUND)
def dismiss_observation(observation_id: ObservationId, s: Subj, mem: Mem) -> ObservationOut:
    """The user dismisses a choice: erased (the dismissal stays audited); answers what was dismissed. Unknown id: 404."""
    held = next((o for o in mem.observations(s.ns) if o.id == observation_id), None)
    if held is None:
        raise NotFoundError(f"no observation {observation_id!r} for user {s.user!r}")
    mem.dismiss(s.ns, observation_id)
    return observation_out(mem, held, s.user)
