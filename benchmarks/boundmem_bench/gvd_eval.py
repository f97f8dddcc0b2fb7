"""One GVD probing question asked of one memory system: retrieve, answer (with the LLM, or extractively without
one) and score. Shared by the full benchmark (gvd) and its cross-validation of parameters (gvd_cv)."""
from __future__ import annotations

from datetime import date
from typing import Any

from boundmem.caim.base import DialogueMemory, RetrievalResult
from .gvd_data import GVDQuestion
from .gvd_metrics import score_answer, score_retrieval

ABSTENTION = "I don't remember that."
ANSWER_PROMPT = (
    "You are {user}'s AI companion with a long-term memory. Today is {today}.\n"
    "Memories that may be relevant:\n{memories}\n\n"
    "Answer {user}'s message below in one to three sentences, using the memories. If they do not contain the answer, "
    "say that you don't remember. If the message is a yes/no question, start with Yes or No.\n\n{user}: {question}"
)


def answer_question(llm: Any, user: str, question: str, today: date, result: RetrievalResult) -> str:
    items = result.items if result.retrieved else []
    if llm is None:
        return items[0].text if items else ABSTENTION
    mem = "\n".join(f"- [{i.timestamp.isoformat() if i.timestamp else 'undated'}] {i.text}" for i in items) or "(none)"
    prompt = ANSWER_PROMPT.format(user=user, today=today.isoformat(), memories=mem, question=question)
    return llm.complete([{"role": "user", "content": prompt}]).strip()


def _item_json(item) -> dict:
    return {"id": item.id, "text": item.text[:400], "source_turn_ids": list(item.source_turn_ids),
            "tags": list(item.tags), "timestamp": item.timestamp.isoformat() if item.timestamp else None,
            "score": round(float(item.score), 4)}


def evaluate_question(system: DialogueMemory, llm: Any, q: GVDQuestion, today: date, k: int) -> dict:
    result = system.retrieve(q.user, q.question, today, k)
    answer = answer_question(llm, q.user, q.question, today, result)
    row: dict[str, Any] = {"qid": q.qid, "user": q.user, "question": q.question, "retrieved": result.retrieved,
                           "items": [_item_json(i) for i in result.items[:k]], "answer": answer,
                           "scored": q.gold is not None}
    if q.gold is None:
        return row
    row.update(gold_evidence=list(q.gold.evidence), gold_answer=q.gold.answer, answerable=q.gold.answerable,
               polarity=q.gold.polarity)
    if q.gold.evidence:
        rs = score_retrieval(result, q.gold, k)
        row.update(hit_at=rs.hit, recall_at=rs.recall, mrr=rs.mrr, first_rank=rs.first_rank)
    correct, pol_ok = score_answer(answer, q.gold)
    row.update(correctness=correct, polarity_ok=pol_ok)
    return row
