"""Every LLM prompt CAIM uses, in one place, written for this project (the paper's prompts are not public).

All prompts ask for strict JSON and are sent with JSON mode at temperature 0 by the caller's client.
Replies are parsed and validated in `caim.llmio`; anything malformed raises `CAIMLLMError` naming the step.

1. CONTROLLER (memory controller): input = recent short-term turns + the new user message;
   output `{"retrieve": true|false}`. True when a good answer needs facts about this user from earlier
   sessions (their past statements, preferences, events, or what the assistant recommended before).
2. TAGS (retrieval tag selection): input = ontology listing (one "tag: description" per line) + the message;
   output `{"tags": ["Category/Sub/attr", ...]}`, at most 3, only listed tags.
3. RELEVANCE (relevance filter): input = the message + numbered candidate thoughts `[id] (date) text`;
   output `{"relevant": ["id", ...]}`, possibly empty, most relevant first.
4. THINK (post-thinking, extension): input = ontology listing + session date + the session's turns, each
   prefixed with its id; output `{"thoughts": [{"text": ..., "tags": [...], "sources": ["<turn id>", ...]}]}`.
   Thoughts are single third-person sentences ("User ...", "AI recommended ... to user"), never quotes.
5. MERGE (post-thinking, review): input = one new thought + similar stored thoughts with ids;
   output `{"action": "new"|"duplicate"|"contradiction", "target": id|null, "text": merged text|null}`.
"""
from __future__ import annotations

CONTROLLER_SYSTEM = """You are the memory controller of a personal AI companion.
Decide whether answering the user's new message well requires information from LONG-TERM memory of earlier
conversations with this user (things the user said on previous days, their preferences, habits, people,
events, problems, or what the assistant recommended or advised before).
Answer false when general knowledge plus the current conversation is enough (greetings, small talk,
general questions, requests that do not depend on this user's history).
Reply with JSON only: {"retrieve": true} or {"retrieve": false}."""

CONTROLLER_USER = """Current conversation (most recent last):
{stm}

New user message: {query}"""

TAGS_SYSTEM = """You file memories of a personal AI companion under a fixed list of tags.
Choose at most 3 tags from the list below that best describe which memories would answer the user's message.
Use only tags exactly as listed. Prefer specific tags; if the user asks what the assistant recommended or
advised, choose Recommendations/... tags.
Tags:
{ontology}
Reply with JSON only: {{"tags": ["Category/Subcategory/attribute", ...]}}"""

TAGS_USER = "User message: {query}"

RELEVANCE_SYSTEM = """You check which stored memories about a user help answer their message.
Return the ids of the memories that are relevant to the message, most relevant first. Return an empty list
if none of them is relevant. Never invent ids.
Reply with JSON only: {"relevant": ["id", ...]}"""

RELEVANCE_USER = """User message (said on {today}): {query}

Memories:
{candidates}"""

THINK_SYSTEM = """You turn one day's conversation between a user and their AI companion into long-term memory.
Write short inductive thoughts: each ONE concise third-person sentence that generalises or records a fact worth
remembering about the user (preferences, experiences, plans, feelings, problems, people) or something the AI
recommended or advised ("AI recommended X to user"). Keep names, titles, places, numbers and dates.
Never copy sentences from the dialogue; never quote; skip greetings and small talk. Usually 1 thought per
substantive turn, at most {max_thoughts}.
For each thought give at most 3 tags from this list (exactly as written) and the ids of the turns it comes from.
Tags:
{ontology}
Reply with JSON only: {{"thoughts": [{{"text": "...", "tags": ["..."], "sources": ["<turn id>"]}}]}}"""

THINK_USER = """Session date: {day}
Turns:
{turns}"""

MERGE_SYSTEM = """You maintain a user's long-term memory of short thoughts.
Compare the NEW thought with the STORED ones.
- "duplicate": it says the same thing as one stored thought (target = that id); give "text", one sentence
  combining both without losing details.
- "contradiction": it contradicts one stored thought, e.g. the user changed their mind (target = that id);
  the newer thought wins.
- "new": otherwise (target null, text null).
Reply with JSON only: {"action": "new"|"duplicate"|"contradiction", "target": "<id>"|null, "text": "..."|null}"""

MERGE_USER = """NEW thought ({day}): {text}

STORED thoughts:
{stored}"""
