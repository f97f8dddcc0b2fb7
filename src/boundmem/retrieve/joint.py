"""Whether a request gets episodes beside its preferences: one decision for both kinds of memory.

The recall gate (`gate.py`) decides whether a request needs the user's preferences; the episodic half used to ask
CAIM's controller on its own, which lets commands it reads as tasks ("play next song", "order me chinese food")
skip the relevance cutoff and take the best five episodes, and took "remind me to ..." for a recall cue. Here the
episodic half follows the same reading of the request:

- small talk, a reminder to set ("remind me to buy milk", "set an alarm") and a command that says what it wants
  ("play Metallica", "set 22 degrees", "take me home") get no episode: the past cannot change them;
- a question about the past ("what did you suggest on Tuesday?", "do you remember ...") gets episodes as CAIM
  retrieves them: the user says the answer is in memory (a question about the user's own facts, "where is my
  order?", only what clears the cutoff);
- a request the recall gate found preferences for needs memory: its episodes come as CAIM retrieves them;
- anything else gets only the episodes that clear CAIM's relevance cutoff (near enough to count on their own).

Both kinds then share one cap (`memory.merge_recalls`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .cues import is_command, is_reminder, is_small_talk, normalise, recall_reason


@dataclass(frozen=True)
class EpisodeDecision:
    """`recall`: look at episodes at all; `cutoff`: True keeps only what clears CAIM's relevance cutoff, None leaves
    it to CAIM's own rule (`caim.controller.cutoff_applies`)."""

    recall: bool
    reason: str
    cutoff: Optional[bool] = None


def episode_decision(utterance: str, preferences_found: bool) -> EpisodeDecision:
    """The episodic half's decision for `utterance`, given whether the recall gate kept any preference for it (a
    question about the past by the request rules: a recall cue or a question about the user's own past; a date alone,
    "who won last night?", is not one)."""
    q = normalise(utterance)
    if is_small_talk(q):
        return EpisodeDecision(False, "small talk")
    if is_reminder(q):
        return EpisodeDecision(False, "sets a reminder: the past cannot change it")
    r = recall_reason(q)
    if r and r.startswith(("recall cue", "asks about the user's own past")):
        return EpisodeDecision(True, f"asks about the past ({r})")
    if is_command(q):
        return EpisodeDecision(False, "a command that says what it wants")
    if preferences_found:
        return EpisodeDecision(True, "the recall gate found the request needs memory")
    # "what's on my calendar?", "where is my order?" are about the user, not necessarily about the past
    return EpisodeDecision(True, "only episodes near enough on their own" + (f" ({r})" if r else ""), cutoff=True)
