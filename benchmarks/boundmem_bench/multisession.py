"""`boundmem bench multisession`: our own multi-session recall set, generated from templates, in GVD's file format.

Why a second set: GVD is 10 gold users whose questions CAIM's rules and knobs were written against; a claim that CAIM
ranks at least as well as MemoryBank needs dialogues nobody tuned on. Each synthetic user talks with a companion on
10 consecutive days (a greeting, three or four topic turns, sometimes a goodbye); each topic turn is a template with
slots (a book and the book the AI suggested next, a dish and the ingredient the AI proposed, a trip and the sight not
to miss, ...). Questions about them are the kinds GVD asks:
- `fact`: what the user said, worded unlike the turn ("Which novel had I just completed?");
- `advice`: what the AI recommended in that turn ("What did you suggest I read next?");
- `dated`: the same topic came up on two days with different values; the question names the day ("June 5th",
  "three days ago", "last Tuesday") and only that day's turn is evidence;
- `day`: "What did we talk about in our first conversation?": any turn of that day (or its summary) is evidence.
Gold evidence is the turn the answer came from and the keywords are the slot value, so scoring is exact.

Held-out discipline: `dev` and `heldout` draw disjoint slot values, disjoint question wordings and their own users
(seeded); the `heldout` part is generated and measured, never read while changing CAIM. Both are written as
`memory_bank_en.json`, `probing_questions_en.jsonl`, `gold_en.jsonl`, so `boundmem bench gvd --data DIR` (and its
leave-users-out `--cv`) runs on either part unchanged; this command writes both and runs them.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Optional

import typer

START = date(2024, 6, 3)  # a Monday; ten days of dialogue, questions on the eleventh
DAYS = 10
PARTS = ("dev", "heldout")
_SEEDS = {"dev": 11, "heldout": 97}


def _halves(values: list[str], part: str) -> list[str]:
    """Dev takes the even positions, heldout the odd ones: no slot value is shared between the parts."""
    return values[0::2] if part == "dev" else values[1::2]


# slot values: each list is split between the parts by `_halves`
VALUES: dict[str, list] = {
    "book": ["The Name of the Wind", "Pachinko", "The Overstory", "Circe", "Educated", "The Road",
             "Station Eleven", "Klara and the Sun", "The Remains of the Day", "Beloved", "A Gentleman in Moscow",
             "The Goldfinch"],
    "scene": ["the flood scene", "the letters between the sisters", "the trial", "the final chapter in the forest",
              "the storm at sea", "the return to the village"],
    "rec_book": ["The Left Hand of Darkness", "Never Let Me Go", "The Shadow of the Wind", "Middlemarch",
                 "The Secret History", "Anna Karenina", "Cloud Atlas", "The Night Circus", "Wolf Hall", "Dune",
                 "Rebecca", "Lonesome Dove"],
    "dish": ["mushroom risotto", "lamb tagine", "shrimp pad thai", "beef bourguignon", "vegetable lasagna",
             "chicken katsu curry", "paella", "stuffed peppers", "ramen from scratch", "moussaka"],
    "relation": ["parents", "sister", "in-laws", "roommates", "grandmother", "colleagues", "brother", "neighbours"],
    "person": ["sister", "dad", "grandmother", "best friend", "brother", "mum", "partner", "uncle"],
    "ingredient": ["smoked paprika", "preserved lemon", "fresh tarragon", "a splash of fish sauce", "brown butter",
                   "toasted fennel seeds", "miso paste", "pomegranate molasses", "anchovy", "sumac"],
    # coupled slots: one tuple per draw, so a trip's city, sight and recommendation belong together
    ("city", "sight", "rec_place"): [
        ("Lisbon", "the old tram lines", "the Alfama district at sunset"),
        ("Kyoto", "the temples", "the Fushimi Inari shrine early in the morning"),
        ("Reykjavik", "the northern lights", "the Sky Lagoon"),
        ("Cape Town", "the coastline", "Boulders Beach with its penguins"),
        ("Vancouver", "the mountains", "Granville Island market"),
        ("Edinburgh", "the castle", "Arthur's Seat"),
        ("Hanoi", "the street food markets", "the Temple of Literature"),
        ("Buenos Aires", "the tango halls", "the San Telmo Sunday fair"),
        ("Marrakesh", "the souks", "the Majorelle Garden"),
        ("Tallinn", "the medieval walls", "the Kadriorg Palace park")],
    "month": ["September", "October", "November", "August", "December", "March"],
    "pet_kind": ["dog", "cat", "rabbit", "parrot", "hamster", "tortoise"],
    "pet_name": ["Biscuit", "Juniper", "Pepper", "Mochi", "Waffles", "Clementine", "Ziggy", "Hazel", "Otis",
                 "Nutmeg"],
    "symptom": ["it stopped eating", "it kept scratching one ear", "it was limping on one leg",
                "it was sneezing all night", "it ate a sock", "it had a swollen paw"],
    "work_topic": ["our quarterly sales figures", "the new onboarding process", "the migration to the cloud",
                   "customer churn", "the budget for next year", "our hiring plan"],
    "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Sunday"],
    "technique": ["the rule of three", "rehearsing out loud with a timer", "starting with a story",
                  "one idea per slide", "recording yourself once", "ending with a clear ask"],
    ("activity", "venue", "amount"): [
        ("swimming", "the community pool", "forty lengths"), ("running", "the riverside park", "my first 10k"),
        ("cycling", "the old rail trail", "sixty kilometres"), ("rock climbing", "the climbing gym", "three hard routes"),
        ("rowing", "the lake", "five kilometres"), ("hiking", "the hills behind town", "the summit and back")],
    "tip": ["an active recovery day", "interval sets", "stretching your hip flexors", "a protein snack afterwards",
            "a heart-rate zone plan", "new shoes with more cushioning"],
    "movie": ["Arrival", "Parasite", "Amelie", "Whiplash", "Spirited Away", "The Grand Budapest Hotel",
              "Moonlight", "Inception", "Roma", "Paddington 2"],
    "friend": ["Priya", "Marco", "Hannah", "Tomasz", "Aisha", "Diego", "Lena", "Kofi"],
    "rec_movie": ["Contact", "Memories of Murder", "Chungking Express", "Black Swan", "My Neighbor Totoro",
                  "Moonrise Kingdom", "Aftersun", "Tenet", "Y Tu Mama Tambien", "The Iron Giant"],
    ("instrument", "skill", "exercise"): [
        ("the cello", "bow control", "long slow bows on open strings"),
        ("the ukulele", "strumming rhythm", "strumming along with a metronome"),
        ("jazz piano", "left-hand voicings", "one voicing in all twelve keys"),
        ("the violin", "intonation", "scales against a drone"),
        ("the drums", "timing", "playing along with recordings"),
        ("classical guitar", "finger picking", "slow arpeggio drills")],
    "teacher": ["Mrs. Alvarez", "Mr. Okafor", "Ms. Lindqvist", "Mr. Brennan", "Ms. Haddad", "Mr. Sato"],
    ("mood", "reason"): [
        ("anxious", "my landlord is selling the flat"), ("exhausted", "I barely slept this week"),
        ("really proud", "I finally finished my thesis draft"), ("lonely", "my best friend moved abroad"),
        ("overwhelmed", "three deadlines landed at once"), ("excited", "I got tickets to see my favourite band"),
        ("nervous", "I have a job interview on Friday"), ("relieved", "my mother's surgery went well")],
    "gift": ["a leather journal", "a pottery class voucher", "noise-cancelling headphones", "a vintage record player",
             "a bonsai tree", "a cast iron pan"],
    "addon": ["a handwritten card", "a fountain pen", "a record by their favourite singer", "a set of pruning shears",
              "a small bag of good coffee", "a recipe book"],
    ("restaurant", "cuisine", "dish2"): [
        ("Casa Lupita", "Mexican", "mole enchiladas"), ("The Copper Pot", "British", "sticky toffee pudding"),
        ("Sakura House", "Japanese", "black cod"), ("Trattoria Nonna", "Italian", "cacio e pepe"),
        ("Blue Door Bistro", "French", "duck confit"), ("Saffron Garden", "Persian", "saffron rice with barberries"),
        ("The Oyster Shed", "seafood", "grilled oysters"), ("Golden Lotus", "Cantonese", "dim sum")],
    "club": ["chess", "book", "board game", "birdwatching", "knitting", "photography"],
}


def _draw(vals: dict, rng: random.Random) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in vals.items():
        x = rng.choice(v)
        out.update(zip(k, x) if isinstance(k, tuple) else [(k, x)])
    return out


@dataclass(frozen=True)
class Question:
    kind: str  # fact | advice
    answer_slot: str
    wordings: tuple[tuple[str, ...], tuple[str, ...]]  # (dev wordings, heldout wordings)


@dataclass(frozen=True)
class Topic:
    name: str
    query: str
    response: str
    questions: tuple[Question, ...]
    dated: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # "{when}" wordings asking for the fact slot
    dated_slot: str = ""


def _q(kind: str, slot: str, dev: tuple[str, ...], held: tuple[str, ...]) -> Question:
    return Question(kind, slot, (dev, held))


TOPICS: tuple[Topic, ...] = (
    Topic("book", "I finished reading {book} last night. Honestly {scene} really stayed with me.",
          "{book} is a wonderful read, and {scene} is one of its strongest moments. Since you liked it, I think "
          "you would enjoy {rec_book} next.",
          (_q("fact", "book", ("Which novel had I just finished reading?", "What was the title of the book I told you I finished?"),
              ("Do you remember the name of the book I'd just completed?", "I told you about a book I got through recently. Which one was it?")),
           _q("advice", "rec_book", ("Which book did you tell me to read next?", "What novel did you recommend after I finished my last book?"),
              ("You suggested a follow-up read for me once. What was it?", "What was the book recommendation you gave me?"))),
          (("What book did I tell you about {when}?",), ("Which book did I mention {when}?",)), "book"),
    Topic("cooking", "Tonight I cooked {dish} for my {relation}. It took ages but everybody asked for seconds.",
          "That sounds like a success! Next time you make {dish}, try adding {ingredient}; it brings out the flavours.",
          (_q("fact", "dish", ("What did I cook for my family?", "What meal did I prepare that everyone asked seconds of?"),
              ("Remind me, what dish did I make that took ages?", "Which recipe did I make for the people I cooked for?")),
           _q("advice", "ingredient", ("What ingredient did you suggest I add next time?", "Which extra ingredient did you recommend for my dish?"),
              ("You had a tip for improving my cooking. What should I add?", "What did you say would bring out the flavours?"))),
          (("What did I cook {when}?",), ("Which dish did I make {when}?",)), "dish"),
    Topic("trip", "I'm planning a trip to {city} in {month}. I mostly want to see {sight}.",
          "{city} in {month} is a great idea. Whatever you do, don't miss {rec_place}.",
          (_q("fact", "city", ("Where am I planning to travel?", "Which city is my upcoming trip to?"),
              ("Do you remember which destination I picked for my holiday?", "What place did I say I'm going to visit?")),
           _q("advice", "rec_place", ("Which spot did you tell me not to miss on my trip?", "What did you recommend I see while travelling?"),
              ("You gave me a must-see for my holiday. What was it?", "What attraction did you insist I visit?"))),
          (("Which city did I say I was going to {when}?",), ("What trip did I tell you about {when}?",)), "city"),
    Topic("pet", "I had to take my {pet_kind} {pet_name} to the vet today because {symptom}. I was so worried.",
          "Poor {pet_name}! I hope it is nothing serious. Keep an eye on your {pet_kind} tonight and call the vet again if "
          "anything changes.",
          (_q("fact", "pet_name", ("What's my pet called?", "What is the name of my animal?"),
              ("Do you remember my pet's name?", "How is my pet called again?")),
           _q("fact", "symptom", ("Why did I have to go to the vet?", "What was wrong with my pet?"),
              ("What made me take my animal to the clinic?", "Remind me what the problem with my pet was."))),
          (), ""),
    Topic("work", "Work was stressful today. My manager wants a presentation on {work_topic} by {weekday}.",
          "That's a tight deadline. For a presentation like that I'd suggest {technique}; it keeps people with you.",
          (_q("fact", "work_topic", ("What is my presentation about?", "What topic did my manager ask me to present?"),
              ("Remind me what subject my talk at the office is on.", "What did my boss want me to present?")),
           _q("advice", "technique", ("What technique did you recommend for my presentation?", "How did you advise me to prepare the talk?"),
              ("What was your tip for my work presentation?", "What approach did you suggest for presenting?"))),
          (), ""),
    Topic("exercise", "I went {activity} at {venue} this morning and managed {amount}. My legs are jelly now.",
          "Well done! After a session like that, try {tip} so you recover properly.",
          (_q("fact", "activity", ("What sport did I do in the morning?", "What kind of workout did I tell you about?"),
              ("Which exercise did I say left my legs like jelly?", "What activity did I do that morning?")),
           _q("advice", "tip", ("What did you suggest for my recovery?", "What was your advice after my workout?"),
              ("How did you tell me to recover from training?", "What recovery tip did you give me?"))),
          (("What exercise did I do {when}?",), ("Which sport did I tell you about {when}?",)), "activity"),
    Topic("movie", "I watched {movie} with my friend {friend} yesterday. We argued about the ending all the way home.",
          "{movie} does leave people arguing! If you two enjoyed it, you might like {rec_movie}.",
          (_q("fact", "movie", ("What film did I see with my friend?", "Which movie did we argue about?"),
              ("Do you remember the movie I watched recently?", "What was the film whose ending we debated?")),
           _q("fact", "friend", ("Who did I watch the movie with?", "Which friend was with me at the film?"),
              ("Who did I argue with about a movie ending?", "Whom did I go to the movies with?")),
           _q("advice", "rec_movie", ("What movie did you recommend to me?", "Which film did you suggest we watch next?"),
              ("You recommended a film once. Which one?", "What did you say I might like to watch?"))),
          (("Which movie did I watch {when}?",), ("What film did I tell you about {when}?",)), "movie"),
    Topic("music", "I started learning {instrument} and my teacher {teacher} says my {skill} needs work.",
          "Everyone starts there. For {skill}, try {exercise} for ten minutes a day.",
          (_q("fact", "instrument", ("What instrument am I learning?", "Which instrument did I take up?"),
              ("What am I learning to play?", "Remind me which instrument I started.")),
           _q("fact", "teacher", ("What's my music teacher's name?", "Who teaches me?"),
              ("Who is my instructor?", "Do you remember my teacher's name?")),
           _q("advice", "exercise", ("What practice routine did you suggest?", "How did you tell me to practise?"),
              ("What drill did you recommend for my playing?", "What daily exercise did you propose for my lessons?"))),
          (), ""),
    Topic("mood", "I'm feeling {mood} today, mainly because {reason}.",
          "Thank you for telling me. It makes sense to feel that way; be gentle with yourself today.",
          (_q("fact", "reason", ("Why was I feeling the way I did?", "What had been affecting my mood?"),
              ("What was behind my mood that day?", "Do you remember what was bothering or delighting me?")),),
          (("How was I feeling {when}?",), ("What mood was I in {when}?",)), "mood"),
    Topic("gift", "My {person}'s birthday is next week and I bought {gift} as a present.",
          "What a thoughtful gift! You could pair {gift} with {addon} to make it extra special.",
          (_q("fact", "gift", ("What present did I buy?", "What did I get for the birthday?"),
              ("Which gift did I choose?", "Remind me what I bought as a birthday present.")),
           _q("advice", "addon", ("What did you suggest adding to the gift?", "What did you recommend to go with the present?"),
              ("What extra did you propose for the birthday gift?", "What did you say would make my gift special?"))),
          (), ""),
    Topic("restaurant", "We had dinner at {restaurant}, a {cuisine} place downtown. The {dish2} was amazing.",
          "{restaurant} sounds lovely. {cuisine} food done well is hard to beat; I'll remember you liked the {dish2}.",
          (_q("fact", "restaurant", ("Which restaurant did we go to for dinner?", "What was the name of the place we ate at?"),
              ("Where did I have dinner?", "Do you remember the restaurant I told you about?")),
           _q("fact", "dish2", ("What dish did I love at the restaurant?", "What was amazing at dinner?"),
              ("Which course did I rave about at dinner?", "What did I order that I liked so much?"))),
          (("Where did I eat {when}?",), ("Which restaurant did I mention {when}?",)), "restaurant"),
    Topic("club", "I joined a {club} club this week! We meet every {weekday} evening at the library.",
          "That's great news! A {club} club is a nice way to meet people. Enjoy your first {weekday}.",
          (_q("fact", "club", ("What kind of club did I join?", "Which club did I become a member of?"),
              ("What group did I sign up for?", "Tell me which club I joined.")),
           _q("fact", "weekday", ("On which day does my club meet?", "When are my club meetings?"),
              ("What evening do we meet at the library?", "Which day of the week is my club?"))),
          (), ""),
)
GREETINGS = ("Hi, it's me again.", "Good morning!", "Hey, how are you today?", "Hello again, I'm back.",
             "Hi there, got a minute?")
GREETING_REPLIES = ("Hello! Good to hear from you. What's on your mind?", "Hi! I'm here. How has your day been?",
                    "Welcome back! What would you like to talk about?")
GOODBYES = ("Thanks for listening, talk tomorrow.", "That's all for today, good night!", "Okay, I have to go now. Bye!")
GOODBYE_REPLIES = ("Take care, talk soon!", "Good night! Rest well.", "Bye for now!")
DAY_Q = (("What did we talk about in our first conversation?", "What did we chat about on {day}?"),
         ("Can you summarise what we discussed the very first time we spoke?", "Remind me what we covered on {day}."))
NAMES = ("Avery", "Blake", "Camila", "Dmitri", "Elif", "Farah", "Gus", "Hiro", "Ines", "Jonah", "Kalani", "Leon",
         "Mira", "Nadia", "Oscar", "Petra", "Quinn", "Rosa", "Sami", "Tariq", "Uma", "Viktor", "Wen", "Yara")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _when(day: date, today: date, rng: random.Random) -> str:
    """A way to name `day` that `caim.dates` and a person both read as that one day."""
    ago = (today - day).days
    forms = [f"on {day:%B} {_ordinal(day.day)}", f"on the {_ordinal(day.day)} of {day:%B}"]
    if 2 <= ago <= 6:
        forms += [f"{['two', 'three', 'four', 'five', 'six'][ago - 2]} days ago", f"last {day:%A}"]
    return rng.choice(forms)


def generate(part: str, users: int = 12, seed: Optional[int] = None) -> dict[str, Any]:
    """The part's three GVD files as Python objects: {"history": ..., "questions": ..., "gold": [...]}."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, not {part!r}")
    rng = random.Random(_SEEDS[part] if seed is None else seed)
    w = 0 if part == "dev" else 1
    vals = {k: _halves(v, part) for k, v in VALUES.items()}
    today = START + timedelta(days=DAYS)
    names = _halves(list(NAMES), part)[:users] if users <= len(NAMES) // 2 else \
        [f"{n}{i}" for i, n in enumerate(_halves(list(NAMES), part) * (users // 12 + 1))][:users]
    history, questions, gold = {}, {}, []
    for name in names:
        days: dict[str, list[dict]] = {}
        qs: list[tuple[str, dict]] = []
        order = list(range(len(TOPICS)))
        rng.shuffle(order)
        dated_topics = [i for i in order if TOPICS[i].dated_slot][:2]  # these come up twice, on different days
        plan = [(i, 0) for i in order] + [(i, 1) for i in dated_topics]
        rng.shuffle(plan)
        slots_per_day: list[list[tuple[int, int]]] = [[] for _ in range(DAYS)]
        for j, (ti, rep) in enumerate(plan):  # spread evenly (1-2 topic turns a day), a topic at most once a day
            d = j % DAYS
            while any(tj == ti for tj, _ in slots_per_day[d]):
                d = (d + 1) % DAYS
            slots_per_day[d].append((ti, rep))
        seen: dict[int, list[tuple[dict, tuple[date, int]]]] = {}
        for d, todays in enumerate(slots_per_day):
            day = START + timedelta(days=d)
            turns = [{"query": rng.choice(GREETINGS), "response": rng.choice(GREETING_REPLIES)}]
            for ti, _ in todays:
                t = TOPICS[ti]
                fill = _draw(vals, rng)
                while ti in seen and fill[t.dated_slot] == seen[ti][0][0][t.dated_slot]:
                    fill = _draw(vals, rng)  # the second mention gets another value of the asked slot
                turns.append({"query": t.query.format(**fill), "response": t.response.format(**fill)})
                seen.setdefault(ti, []).append((fill, (day, len(turns) - 1)))
            if rng.random() < 0.5:
                turns.append({"query": rng.choice(GOODBYES), "response": rng.choice(GOODBYE_REPLIES)})
            days[day.isoformat()] = turns
        for ti, mentions in seen.items():
            t = TOPICS[ti]
            if len(mentions) == 1:
                fill, (day, idx) = mentions[0]
                for q in t.questions:
                    qs.append((rng.choice(q.wordings[w]), {"kind": q.kind, "evidence": [f"{day.isoformat()}#{idx}"],
                                                            "answer": fill[q.answer_slot]}))
            else:
                for fill, (day, idx) in mentions:
                    text = rng.choice(t.dated[w]).format(when=_when(day, today, rng))
                    qs.append((text, {"kind": "dated", "evidence": [f"{day.isoformat()}#{idx}"],
                                      "answer": fill[t.dated_slot]}))
        first = START.isoformat()
        qs.append((DAY_Q[w][0], {"kind": "day", "evidence": [f"{first}#{i}" for i in range(1, len(days[first]))],
                                 "answer": days[first][1]["query"]}))
        some = START + timedelta(days=rng.randrange(2, DAYS - 1))
        qs.append((DAY_Q[w][1].format(day=f"{some:%B} {_ordinal(some.day)}"),
                   {"kind": "day", "evidence": [f"{some.isoformat()}#{i}" for i in range(1, len(days[some.isoformat()]))],
                    "answer": days[some.isoformat()][1]["query"]}))
        rng.shuffle(qs)
        history[name] = {"name": name, "history": days, "meta_information": {"part": part}}
        questions[name] = [q for q, _ in qs]
        for i, (q, g) in enumerate(qs):
            ev = [e for e in g["evidence"] if _is_topic_turn(days, e)] or g["evidence"]
            kw = [[g["answer"]]] if g["kind"] != "day" else [[_key(days, e)] for e in ev][:1]
            gold.append({"user": name, "qid": f"{name}_{i}", "question": q, "evidence": ev, "answer": g["answer"],
                         "keywords": kw, "answerable": True, "note": f"KIND {g['kind']}"})
    return {"history": history, "questions": questions, "gold": gold}


def _is_topic_turn(days: dict[str, list[dict]], turn_id: str) -> bool:
    d, i = turn_id.split("#")
    q = days[d][int(i)]["query"]
    return q not in GREETINGS and q not in GOODBYES


def _key(days: dict[str, list[dict]], turn_id: str) -> str:
    d, i = turn_id.split("#")
    return " ".join(days[d][int(i)]["query"].split()[:4])


def write_part(out: Path, part: str, users: int = 12, seed: Optional[int] = None) -> Path:
    """Writes the part's GVD-format files into `out` (created) and returns it."""
    from .gvd_data import GOLD_FILE, HISTORY_FILE, QUESTIONS_FILE

    g = generate(part, users, seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / HISTORY_FILE).write_text(json.dumps(g["history"], indent=1), encoding="utf-8")
    (out / QUESTIONS_FILE).write_text("".join(json.dumps({u: qs}) + "\n" for u, qs in g["questions"].items()),
                                      encoding="utf-8")
    (out / GOLD_FILE).write_text("".join(json.dumps(r) + "\n" for r in g["gold"]), encoding="utf-8")
    return out


def register(app: typer.Typer) -> None:
    @app.command("multisession")
    def multisession(
        out: Path = typer.Option(Path("bench-out/multisession"), "--out", help="Output folder: <part>/data (the "
                                 "generated set) and <part>/ (the bench gvd report) per part."),
        parts: str = typer.Option("dev,heldout", "--parts", help="Comma-separated: dev, heldout."),
        users: int = typer.Option(12, "--users", min=5, help="Synthetic users per part."),
        systems: str = typer.Option("caim,memorybank", "--systems", help="Systems, as for bench gvd --systems."),
        cv: bool = typer.Option(True, "--cv/--no-cv", help="Leave-users-out cross-validation of CAIM's knobs."),
        embedder: str = typer.Option("minilm", "--embedder", help="As for bench gvd --embedder."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    ):
        """Our multi-session recall set (templates, dev + never-tuned heldout part): CAIM vs MemoryBank, as bench gvd."""
        from boundmem.cli.options import cli_settings
        from .gvd import run_gvd
        from .report import fmt

        names = [p.strip() for p in parts.split(",") if p.strip()]
        bad = [p for p in names if p not in PARTS]
        if bad:
            raise typer.BadParameter(f"unknown part(s) {bad}; choose from {', '.join(PARTS)}", param_hint="--parts")
        from .gvd import headline
        from .report import machine_info
        from .results import write_results

        machine, reports, figures = machine_info(), [], []
        for part in names:
            data = write_part(out / part / "data", part, users)
            res = run_gvd(data, None, out / part, [s.strip() for s in systems.split(",") if s.strip()],
                          embedder_name=embedder, show_progress=not quiet, cv=cv, cv_ablations=False,
                          settings=cli_settings())
            for s in res["summary"]:
                typer.echo(f"[{part}] {s['system']:<12} hit@5={fmt(s['hit_at'][-1])} MRR={fmt(s['mrr'])}")
            if res["cv"]:
                c, mb = res["cv"]["caim"], res["cv"]["memorybank"]
                typer.echo(f"[{part}] CV hit@5: caim {fmt(c['hit']['mean'])} ± {fmt(c['hit']['sd'])} (pooled "
                           f"{fmt(c['pooled_hit'])}), memorybank {fmt(mb['hit']['mean'])} ± {fmt(mb['hit']['sd'])}")
            typer.echo(f"[{part}] report: {res['report']}")
            reports.append(Path(res["report"]).read_text(encoding="utf-8").replace("# ", f"# {part} part: ", 1))
            figures += headline(res, 5, f"multi-session {part}", readme=part == "heldout")   # README: never-tuned part
        write_results("multisession", out, "\n\n".join(reports), figures, machine=machine)
