"""Request sets for the recall gate (its trainer and `bench recall`), written for boundmem, not taken from GVD or
PrefEval: requests no stored preference should shape, requests one should shape (with the categories whose
preferences are the right memory), users who hold preferences, and SLURP's real spoken commands as a pool of
unrelated requests.

Every set has a held-out part that the trainer never reads: 30 % of the users (in-car users are CarMem's training
users, lines 51-100; smart-home users are generated here), 30 % of each request family's templates (so a held-out
request is worded by a template the model never saw), and 30 % of the SLURP commands (a fixed-seed random split).
Requests are generated as templates x slot fillers x paraphrase frames, for variety.

A second held-out part (`held_out_2`) was written after the first one's explicit settings had been looked at while
tuning: explicit commands that name what they want ("set fan speed to three", "dim the bedroom to 20 percent",
"play Bohemian Rhapsody") in car, smart-home and TV/media wording, with slot fillers of their own, asked by the
held-out users; nothing is tuned on it. Visible explicit commands of other wording (`EXPLICIT_VISIBLE`) are the
trainer's.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Optional, Sequence

Part = Literal["visible", "held_out", "held_out_2"]
Kind = Literal["unrelated", "related", "slurp"]
HELD_OUT = 0.3
SEED = 20


def part_of(key: str, share: float = HELD_OUT, seed: int = SEED) -> Part:
    """A fixed split by a key's hash: the same key is always on the same side."""
    h = int(hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "held_out" if h < share else "visible"


@dataclass(frozen=True)
class Request:
    text: str
    kind: Kind
    family: str
    part: Part
    domain: str = "any"            # incar, smarthome or any: which users it is asked by
    targets: tuple[str, ...] = ()  # related: category prefixes whose preferences are the right memory
    template: str = ""             # the template it was generated from (requests of one template share a fold)


@dataclass(frozen=True)
class PrefSpec:
    path: str          # main/sub/detail keys
    attribute: str
    sentence: str
    polarity: str = "like"


@dataclass(frozen=True)
class UserSpec:
    user: str
    domain: str
    part: Part
    prefs: tuple[PrefSpec, ...] = field(default_factory=tuple)

    def holds(self, targets: Sequence[str]) -> bool:
        return any(p.path == t or p.path.startswith(t + "/") for p in self.prefs for t in targets)


def _expand(templates: Iterable[str], slots: dict[str, Sequence[str]], per_template: int, rng: random.Random) -> list[str]:
    out = []
    for t in templates:
        names = [n for n in slots if "{" + n + "}" in t]
        combos = list(itertools.product(*(slots[n] for n in names))) if names else [()]
        rng.shuffle(combos)
        for c in combos[:per_template]:
            out.append(t.format(**dict(zip(names, c))))
    return out


_FRAMES = ("{}", "{}", "hey, {}", "please {}", "can you {}?", "could you {} please?", "{} please", "ok, {}")
_VERBS = frozenset("""find play put call ring dial text read send reply turn open close lock navigate take show add cancel
set remind wake start switch run pause skip mute give convert explain tell sing spell suggest book pick get plan make
adjust change light prepare recommend look hang delete fold redial""".split())


def _framed(texts: Sequence[str], rng: random.Random) -> list[str]:
    """Imperatives in one of a few spoken frames ("hey, ...", "can you ...?")."""
    out = []
    for t in texts:
        f = rng.choice(_FRAMES) if t.split()[0] in _VERBS and not t.endswith("?") else "{}"
        s = f.format(t)
        out.append(s[0].upper() + s[1:])
    return out


_SLOTS = {
    "person": ["Anna", "my mom", "dad", "Mark", "the office", "my wife", "Dr. Patel", "Jonas", "my sister", "Leo"],
    "city": ["Berlin", "Munich", "Paris", "Boston", "Seattle", "Vienna", "Denver", "Lyon", "Austin", "Madrid"],
    "place": ["the airport", "Main Street 12", "the central station", "221 Baker Street", "my office", "the Hilton",
              "Oak Avenue 5", "the hospital", "grandma's house", "the stadium"],
    "when": ["tomorrow", "this afternoon", "tonight", "on Saturday", "next week", "right now", "this weekend"],
    "time": ["7 am", "six thirty", "noon", "8:15", "five o'clock", "ten pm"],
    "thing": ["milk", "the dry cleaning", "to call the bank", "the dentist appointment", "my passport", "the keys"],
    "room": ["kitchen", "living room", "bedroom", "hallway", "bathroom", "garage"],
    "dish": ["lasagna", "pancakes", "a risotto", "chili", "banana bread"],
    "team": ["the Lakers", "Bayern", "the Yankees", "Arsenal", "the Bears"],
    "topic": ["black holes", "the Roman empire", "photosynthesis", "how vaccines work", "the French revolution"],
    "song": ["Hey Jude", "Bohemian Rhapsody", "Yesterday", "Let It Be", "Thunderstruck"],
    "genre": ["jazz", "rock", "classical music", "pop", "country", "hip hop", "reggae"],
    "artist": ["Adele", "Coldplay", "Miles Davis", "the Rolling Stones", "Beyonce", "Bach"],
    "color": ["blue", "red", "warm white", "green", "purple", "daylight"],
    "degrees": ["20", "21", "22", "eighteen", "twenty three"],
    "station": ["BBC Radio 4", "KEXP", "Jazz FM", "the news station", "101.5"],
}

# requests no lasting preference should shape (in-car, smart-home, general), by family
UNRELATED: dict[str, list[str]] = {
    "weather": ["what's the weather {when}", "will it rain {when}?", "how cold will it be in {city} {when}?",
                "Do I need an umbrella {when}?", "what's the forecast for {city}", "is it going to snow {when}?",
                "How windy is it outside?", "tell me the temperature outside"],
    "calls": ["call {person}", "ring {person} on speaker", "dial {person}", "hang up the call",
              "Who called me earlier?", "put {person} on hold", "redial the last number"],
    "messages": ["text {person} that I'm running late", "read my last message", "send {person} a message saying I'm on my way",
                 "Do I have any new emails?", "reply to {person} with ok", "read me the text from {person}"],
    "car_controls": ["turn on the wipers", "open the sunroof", "close all the windows", "turn on the headlights",
                     "lock the doors", "What's my tire pressure?", "How much range do I have left?",
                     "turn on the hazard lights", "fold the mirrors in", "open the trunk", "switch off the engine",
                     "How many miles until the next service?", "is the oil level ok?", "turn the wipers to fast"],
    "navigation_named": ["navigate to {place}", "take me to {place}", "directions to {place}",
                         "How far is it to {city}?", "What's our arrival time?", "cancel the route",
                         "show me the map", "how long until we get to {place}?", "add {place} as a stop"],
    "jokes_chat": ["tell me a joke", "tell me something funny", "What's the meaning of life?", "Are you a robot?",
                   "sing me a song", "What's your name?", "do you like cats?", "tell me a riddle"],
    "closing": ["Thanks, that's all.", "That's it for now, thank you.", "Never mind.", "Cancel that.",
                "Okay, got it.", "No, that's fine.", "Stop.", "Thank you so much!", "Perfect, thanks."],
    "facts": ["What's the capital of {city}?", "how tall is the Eiffel tower?", "who won the game last night?",
              "What's the score of {team}?", "explain {topic}", "how many ounces in a pound?",
              "what's 15 percent of 80?", "who wrote Hamlet?", "when does the sun set {when}?", "spell necessary"],
    "time_reminders": ["what time is it?", "set an alarm for {time}", "remind me to pick up {thing} {when}",
                       "wake me up at {time}", "set a timer for ten minutes", "what's on my calendar {when}?",
                       "delete my alarm", "What day is it today?", "add {thing} to my shopping list"],
    "home_controls": ["turn off the lights in the {room}", "lock the front door", "is the garage door closed?",
                      "start the vacuum", "turn off the TV", "close the blinds in the {room}",
                      "is the back door locked?", "turn on the coffee machine", "run the dishwasher",
                      "switch the oven off", "open the garage"],
    "media_explicit": ["play {song}", "pause the music", "next song", "turn the volume down", "skip this track",
                       "what song is this?", "stop the podcast", "play {song} by the Beatles", "louder please",
                       "mute the speaker"],
    "shopping_admin": ["order more paper towels", "track my package", "what's my bank balance?", "pay the electricity bill",
                       "how much did I spend this month?", "add eggs to the shopping list", "is my order shipped?"],
    "car_status": ["check the battery level", "how much fuel is left?", "is the parking brake on?", "what's the outside temperature?",
                   "How fast am I going?", "show me the speed limit", "Is there a speed camera ahead?"],
    "explicit_settings": ["play some {genre}", "put on {artist}", "set the lights to {color}", "dim the lights in the {room}",
                          "turn the heating to {degrees} degrees", "tune in to {station}", "play {genre} in the {room}",
                          "make the lights {color}", "brighten the lights", "set the temperature to {degrees}",
                          "I want to listen to {artist}", "switch the radio to {station}", "lower the lights a bit"],
    "cooking_info": ["how long do I boil an egg?", "give me a recipe for {dish}", "how many grams in a cup of flour?",
                     "what temperature do I bake {dish} at?", "convert 350 Fahrenheit to Celsius"],
}

# requests a stored preference should shape, with the categories that hold the right memory
RELATED_INCAR: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "dinner": (("points_of_interest/restaurant",), [
        "find me a place for dinner", "I'm hungry", "where should we eat tonight?", "suggest somewhere for lunch",
        "Any good restaurants around here?", "book us a table somewhere nice", "we need a quick bite on the way",
        "I could eat something, any ideas?", "find a restaurant I'd like near {place}", "Where can we grab food?",
        "pick a place for our lunch break", "What's a good spot to eat near {city}?", "recommend a restaurant",
        "we should stop for dinner somewhere", "Where do you think we should have lunch?", "I'm starving, find food",
        "get us a dinner reservation", "let's eat out tonight, choose a place", "find us somewhere for brunch",
        "I fancy a meal out", "where's a good place for a family dinner?"]),
    "fuel": (("points_of_interest/gas_station",), [
        "I need to refuel", "find a gas station", "we're running low on fuel", "Where should I fill up the tank?",
        "get me to a petrol station", "the tank is almost empty", "find somewhere to get gas on the way",
        "Which gas station should we stop at?", "time to fill up, find a station",
        "we need petrol before {city}", "look for fuel on the highway"]),
    "charging": (("points_of_interest/charging_station_in_public",), [
        "find a charging station", "the battery is getting low", "where can I charge the car?",
        "we need to charge soon", "find a charger on our way to {city}", "Is there somewhere to recharge nearby?",
        "plan a charging stop", "I need to top up the battery", "find somewhere to plug in the car",
        "will we need to charge before {city}? find a charger"]),
    "groceries": (("points_of_interest/grocery_shopping",), [
        "where can I pick up groceries?", "I need to buy food for the week", "find a place to do the shopping",
        "we're out of vegetables, where should I go?", "take me grocery shopping", "Suggest a store for groceries", "I need to get some fresh produce", "stop somewhere for groceries on the way home",
        "where do I buy food for the weekend?", "we need to do the weekly shop"]),
    "route": (("navigation_and_routing/routing", "navigation_and_routing/traffic_and_conditions"), [
        "what's the best route to {place}?", "plan my route to {city}", "find the best way to {place}",
        "Which way should we take to {city}?", "get me a good route home", "plan the drive to {city} for tomorrow",
        "how should we drive to {place}?", "plan a good route to {city} for me",
        "get me to {place} the way I like to drive", "route me to {city}, my usual way", "work out the route to {place}",
        "Which road should I take to {city}?"]),
    "parking": (("navigation_and_routing/parking",), [
        "find parking near {place}", "where can I park at the mall?", "I need a parking spot",
        "find me somewhere to park", "Where should I leave the car?", "look for parking close to {place}",
        "any parking around here?", "we'll need to park near {place}", "get me a parking garage near {place}",
        "Where can I leave the car near {place}?"]),
    "cabin_climate": (("vehicle_settings_and_comfort/climate_control",), [
        "It's a bit chilly in here.", "I'm cold", "it's too warm in here", "make the cabin comfortable",
        "set the climate the way I like it", "I'm freezing", "It's stuffy in here.", "adjust the climate for me",
        "My back is cold.", "I'm a bit warm", "can you make it warmer in here?", "the air is too strong",
        "It's hot in the car.", "set up the cabin for the morning drive", "get the heating right for me", "I'm shivering", "it's boiling in here", "the cabin is too cold for me"]),
    "cabin_light": (("vehicle_settings_and_comfort/lighting_and_ambience",), [
        "set the mood lighting", "the cabin lights are too harsh", "make the lighting nicer",
        "adjust the interior lights for me", "change the ambience in here", "It's too bright in here.", "the lighting in the car feels off", "change the interior light to something I like",
        "make the car lights cosy", "the light in here is annoying, change it"]),
    "music": (("entertainment_and_media/music",), [
        "put on some music", "play something I like", "I want to listen to some music", "play some tunes",
        "Can we have some music?", "play me a song", "music please", "put on something good to listen to",
        "start some music for the drive", "play something for the drive", "I'm bored, some music?",
        "queue up some songs", "let's have a song I love"]),
    "listen": (("entertainment_and_media/radio_and_podcasts",), [
        "play a podcast", "put the radio on", "find me a podcast for the trip", "play my kind of podcast",
        "turn on a radio station I'd like", "something to listen to on the way, a show maybe",
        "Any podcast you'd recommend?", "put on a show for the ride", "find me a radio channel",
        "something to listen to while I drive", "play an episode of something I like"]),
}

RELATED_HOME: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "home_climate": (("comfort/climate",), [
        "It's a bit chilly in here.", "I'm cold", "it's too warm in the {room}", "make the house comfortable",
        "set the heating the way I like it", "get the {room} to a nice temperature", "It's freezing in here.",
        "prepare the house for the night", "I'm going to bed, set up the heating", "I'm a bit warm",
        "it's cold in the {room}", "warm the house up for when I get home", "the heating feels wrong",
        "I'm shivering", "it's stuffy in the {room}", "get the house ready for the night", "can you make it cosier in here?",
        "it's boiling in here"]),
    "home_light": (("comfort/lighting",), [
        "set the lights for the evening", "make the {room} cosy", "light the {room} the way I like",
        "it's too dark in here", "set up the lights for reading", "the lights feel wrong, fix them",
        "get the lighting right for dinner", "set the mood in the {room}", "the {room} is too bright",
        "make the lights nice for the evening", "change the lights to how I like them", "light the house up for guests",
        "I'm going to read in the {room}, fix the lights", "the {room} feels gloomy"]),
    "home_music": (("entertainment/music",), [
        "put on some music", "play something I like", "some background music please", "play music in the {room}",
        "I want to listen to something", "play some tunes for the party", "Can we have some music?", "play me a song",
        "music for cooking please", "put on something to relax to", "start a playlist I'd enjoy",
        "I'm bored, play something", "what should we listen to tonight?", "some music while I cook?", "shuffle my kind of music"]),
}

# explicit commands that say what they want, so no stored preference should shape them. EXPLICIT_VISIBLE is
# trained on; EXPLICIT_FRESH is the second held-out part (written before any tuning on it; its own slot fillers)
_SLOTS_VISIBLE = {
    "level": ["2", "three", "one", "four", "maximum"],
    "freq": ["93.1", "104.3 FM", "88.5"],
    "pct": ["40", "seventy", "10", "a hundred"],
    "album": ["Abbey Road", "Thriller", "Rumours"],
    "show": ["The Office", "Stranger Things", "the news"],
    "channel": ["5", "twelve", "CNN", "channel 4"],
}
EXPLICIT_VISIBLE: dict[str, list[str]] = {
    "explicit_values": ["set the blower to level {level}", "tune the radio to {freq}", "make the {room} {pct} percent bright",
                        "heat my seat to level {level}", "play the album {album}", "put on {song}",
                        "switch the TV to {channel}", "set the ambient lighting to {color}", "crank the heat up to {degrees}",
                        "change the station to {station}", "I'd like to hear {song} by {artist}",
                        "set the {room} to {degrees} degrees", "put {show} on the TV", "play {genre} on the speaker",
                        "lights at {pct} percent in the {room}", "fan to {level}", "I want {color} lights",
                        "play {artist} in the car", "set the cabin to {degrees} degrees", "play the next episode of {show}"],
}
_SLOTS_FRESH = {
    "f_speed": ["three", "two", "5", "the highest setting"],
    "f_freq": ["101.5", "97.9", "FM 89.3"],
    "f_room": ["bedroom", "study", "dining room", "nursery"],
    "f_pct": ["20", "thirty", "fifty", "60"],
    "f_song": ["Bohemian Rhapsody", "Imagine", "Wonderwall", "Billie Jean", "Hotel California"],
    "f_artist": ["Queen", "Taylor Swift", "Bob Dylan", "Daft Punk"],
    "f_temp": ["19", "twenty two", "68", "seventy"],
    "f_color": ["amber", "cool white", "pink", "orange"],
    "f_show": ["Friends", "Breaking Bad", "the football", "The Crown"],
    "f_channel": ["7", "BBC One", "ESPN", "channel nine"],
    "f_genre": ["blues", "techno", "folk", "opera"],
}
EXPLICIT_FRESH: dict[str, list[str]] = {
    "explicit_fresh_car": ["set fan speed to {f_speed}", "put the radio on {f_freq}", "set the AC to {f_temp} degrees",
                           "change the dashboard lights to {f_color}", "play {f_song} on the car stereo",
                           "seat heating on {f_speed}", "make it {f_temp} degrees in the car", "radio, {f_freq} please"],
    "explicit_fresh_home": ["dim the {f_room} to {f_pct} percent", "set the thermostat to {f_temp}",
                            "turn the {f_room} lights {f_color}", "play {f_genre} in the {f_room}",
                            "put the {f_room} lamp at {f_pct} percent", "warm the {f_room} to {f_temp} degrees"],
    "explicit_fresh_media": ["play {f_song}", "put on {f_show}", "switch to {f_channel}", "shuffle songs by {f_artist}",
                             "play the latest {f_artist} album", "watch {f_show} on the TV", "play some {f_genre}"],
}


# a smart-home resident's stated preferences (values from the schema's lists and a few of their own words)
_HOME_PREFS: dict[str, tuple[list[str], list[str]]] = {
    "comfort/climate/preferred_room_temperature": (["cool", "moderate", "warm"],
        ["I like the house {v}.", "Keep it {v} indoors, always.", "I prefer a {v} room."]),
    "comfort/climate/night_mode": (["Yes", "No"],
        ["{yn} turn the heating down at night.", "At night {yn2} lower the heating."]),
    "comfort/lighting/light_color": (["warm white", "daylight", "soft orange", "pale blue"],
        ["I always want the lights {v} in the evening.", "I love {v} light.", "{v} lights are my favourite."]),
    "comfort/lighting/brightness": (["dim", "medium", "bright"],
        ["I like the lights {v}.", "I usually want {v} lighting.", "Keep the lights {v} for me."]),
    "entertainment/music/favorite_genre": (["jazz", "classical", "pop", "rock", "reggae", "blues", "hip hop"],
        ["I love {v}.", "{v} is my favourite kind of music.", "I listen to {v} all the time."]),
    "entertainment/music/favorite_artist": (["Miles Davis", "Adele", "Coldplay", "Bach", "Bob Marley", "Taylor Swift"],
        ["I'm a big fan of {v}.", "{v} is my favourite artist.", "I could listen to {v} all day."]),
}


def incar_users(carmem: str | Path) -> list[UserSpec]:
    """CarMem's training users (lines 51-100): each user's ten preferences as the dataset states them, with the
    user turn that reveals each as its sentence."""
    from boundmem.schema.load import builtin_schema

    schema = builtin_schema("incar")
    users = []
    with open(carmem, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for n, line in enumerate(lines):
        if n < 50 or not line.strip():
            continue
        obj = json.loads(line)
        prefs = []
        for conv in obj["data"]:
            _, _, detail, attribute = [x.strip() for x in conv["user_preference"].split(";")]
            pos = int(conv["meta_info"]["position_user_preference_in_conv"]) - 1
            turns = conv["extraction_conversation"]
            said = turns[pos].get("USER") if 0 <= pos < len(turns) else None
            said = said or next(t["USER"] for t in turns if "USER" in t)
            prefs.append(PrefSpec(str(schema.resolve(detail).path), attribute, said))
        uid = f"carmem{n + 1}"
        users.append(UserSpec(uid, "incar", part_of(uid), tuple(prefs)))
    return users


def smarthome_users(n: int = 40, seed: int = SEED) -> list[UserSpec]:
    """Residents with 2-5 of the smart-home schema's preferences each, worded by a few templates."""
    rng = random.Random(seed)
    paths = list(_HOME_PREFS)
    out = []
    for i in range(n):
        prefs = []
        for path in rng.sample(paths, rng.randint(2, 5)):
            values, says = _HOME_PREFS[path]
            v = rng.choice(values)
            yes = v == "Yes"
            s = rng.choice(says).format(v=v, yn="Please" if yes else "Don't", yn2="do" if yes else "don't")
            prefs.append(PrefSpec(path, v, s[0].upper() + s[1:]))
        uid = f"home{i + 1}"
        out.append(UserSpec(uid, "smarthome", part_of(uid), tuple(prefs)))
    return out


def _family_requests(family: str, templates: Sequence[str], kind: Kind, domain: str, targets: tuple[str, ...],
                     per_template: int, rng: random.Random) -> list[Request]:
    out = []
    for t in templates:
        part = part_of(f"{family}:{t}")
        for text in _framed(_expand([t], _SLOTS, per_template, rng), rng):
            out.append(Request(text, kind, family, part, domain, targets, f"{family}:{t}"))
    return out


def unrelated_requests(per_template: int = 3, seed: int = SEED) -> list[Request]:
    """UNRELATED split by template; EXPLICIT_VISIBLE all visible; EXPLICIT_FRESH all in the second held-out part
    (each drawn with its own random stream, so adding them left the first parts' requests as they were)."""
    rng = random.Random(seed)
    out = [r for fam, ts in UNRELATED.items() for r in _family_requests(fam, ts, "unrelated", "any", (), per_template, rng)]
    for sets, slots, part, off in ((EXPLICIT_VISIBLE, _SLOTS_VISIBLE, "visible", 2), (EXPLICIT_FRESH, _SLOTS_FRESH, "held_out_2", 3)):
        rng = random.Random(seed + off)
        for fam, ts in sets.items():
            for t in ts:
                for text in _framed(_expand([t], {**_SLOTS, **slots}, per_template, rng), rng):
                    out.append(Request(text, "unrelated", fam, part, "any", (), f"{fam}:{t}"))
    return out


def related_requests(per_template: int = 2, seed: int = SEED) -> list[Request]:
    rng = random.Random(seed + 1)
    out = []
    for domain, fams in (("incar", RELATED_INCAR), ("smarthome", RELATED_HOME)):
        for fam, (targets, ts) in fams.items():
            out += _family_requests(fam, ts, "related", domain, targets, per_template, rng)
    return out


def slurp_requests(path: str | Path) -> list[Request]:
    """SLURP's spoken commands (one JSON object a line: sentence, scenario, slurp_id), split 70/30 by id."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                key = f"slurp:{r['slurp_id']}"
                out.append(Request(r["sentence"], "slurp", r.get("scenario", ""), part_of(key), template=key))
    return out


@dataclass(frozen=True)
class Case:
    request: Request
    user: UserSpec

    @property
    def part(self) -> Part:
        """Held out when its user or its request is: a visible case shares neither with the held-out parts (the
        second held-out part's requests keep their own part)."""
        if self.request.part == "held_out_2":
            return "held_out_2"
        return "visible" if self.request.part == self.user.part == "visible" else "held_out"


def cases(requests: Sequence[Request], users: Sequence[UserSpec], per_request: int = 2, seed: int = SEED,
          strict: bool = True) -> list[Case]:
    """Each request asked by `per_request` users of its domain (a related one only by users who hold one of its
    targets). `strict`: only pairs whose request and user are on the same side (visible with visible, held-out
    with held-out), so the held-out part shares neither users nor requests with the visible one."""
    rng = random.Random(seed)
    out = []
    for r in requests:
        pool = [u for u in users if (r.domain in ("any", u.domain)) and (r.kind != "related" or u.holds(r.targets))
                and (not strict or u.part == _user_part(r.part))]
        for u in rng.sample(pool, min(per_request, len(pool))):
            out.append(Case(r, u))
    return out


def _user_part(part: Part) -> Part:
    """Who asks a request of a part: the second held-out part is asked by the held-out users."""
    return "held_out" if part == "held_out_2" else part


def store_users(mem, users: Sequence[UserSpec]) -> None:
    """Each user's preferences stored as stated (maintained by the memory's own maintainer)."""
    from boundmem.models import Candidate
    from boundmem.schema.model import CategoryPath

    for u in users:
        cands = [Candidate(path=CategoryPath(**dict(zip(("main", "sub", "detail"), p.path.split("/")))),
                           attribute=p.attribute, sentence=p.sentence, polarity=p.polarity) for p in u.prefs]
        mem.apply(cands, u.user, f"recall-set-{u.user}")

