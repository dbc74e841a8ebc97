#!/usr/bin/env python3
"""Generates the function-calling corpus in data/calls/ from the specs in data/calls/spec/.

Stdlib only, deterministic (seeded per tool from its name). Usage:

  python3 data/calls/generate.py             # write catalogs/, eval.jsonl, eval_requests/, train.jsonl
  python3 data/calls/generate.py --check     # regenerate in memory; the committed files must match
  python3 data/calls/generate.py --out DIR   # write everything under DIR instead
  python3 data/calls/generate.py --stats     # print the counts (catalogs, tools, requests, phenomena)

The spec language (data/calls/spec/*.txt) is described in data/calls/README.md.
"""

import argparse
import json
import os
import random
import re
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC_DIR = os.path.join(HERE, "spec")
SEED = 20261201
DEVELOPER = "You are a model that can do function calling with the following functions"

# Catalogs never trained on, not even as distractors: one per broad domain.
EVAL_CATALOGS = [
    "garden", "pet_care", "printer", "translation",
    "banking", "robot_vacuum", "fitness", "tv_box",
]

EXAMPLES_PER_TOOL = 14
MAX_TOOLS = 10
# Training prompts per catalog (FULL_VIEWS of them list every tool of the catalog).
VIEWS_PER_CATALOG = 6
FULL_VIEWS = 3
# More training prompts per catalog in which every function is renamed to a meaningless
# identifier ("fn_qk3v"), in the prompt and in the call ("function masking", as Hammer's
# training does, Lin et al. 2024): the model cannot answer from a name it memorized and has to
# read the descriptions. The first MASKED_FULL_VIEWS list the whole catalog.
MASKED_VIEWS = 2
MASKED_FULL_VIEWS = 1
_MASK_PREFIXES = ["fn", "tool", "op", "func", "action", "cmd"]
_MASK_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"

# --------------------------------------------------------------------------- numbers

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(n):
    """English words for 0 <= n < 1,000,000 ("twenty one", "one hundred and five")."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " and " + words(rest))
    rest = n % 1000
    head = words(n // 1000) + " thousand"
    if rest == 0:
        return head
    return head + (" and " if rest < 100 else " ") + words(rest)


def say_int(rng, n, tags, p_words=0.3):
    if 0 <= n < 1000000 and rng.random() < p_words:
        tags.add("numbers_as_words")
        return words(n)
    return str(n)


# --------------------------------------------------------------------------- slot generators
# Each returns (surface text, value); tags collects the phenomena the surface shows.

def _pick_int(rng, lo, hi, step=1):
    return lo + step * rng.randrange((hi - lo) // step + 1)


def gen_secs(rng, tags):
    tags.add("units")
    k = rng.randrange(6)
    if k == 0:
        n = _pick_int(rng, 10, 90, 5)
        return say_int(rng, n, tags) + " seconds", n
    if k == 1:
        return rng.choice([("half an hour", 1800), ("an hour", 3600), ("a minute", 60),
                           ("an hour and a half", 5400), ("a quarter of an hour", 900),
                           ("ninety seconds", 90)])
    if k == 2:
        n = rng.randrange(1, 4)
        return say_int(rng, n, tags) + (" hour" if n == 1 else " hours"), n * 3600
    n = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 25, 30, 40, 45, 50, 90])
    unit = rng.choice(["minutes", "minutes", "min", "mins"]) if n > 1 else "minute"
    return say_int(rng, n, tags) + " " + unit, n * 60


def gen_mins(rng, tags):
    tags.add("units")
    k = rng.randrange(5)
    if k == 0:
        return rng.choice([("half an hour", 30), ("an hour", 60), ("an hour and a half", 90),
                           ("a quarter of an hour", 15), ("two hours", 120)])
    if k == 1:
        n = rng.randrange(1, 4)
        return say_int(rng, n, tags) + (" hour" if n == 1 else " hours"), n * 60
    n = rng.choice([5, 10, 15, 20, 25, 30, 40, 45, 50, 60, 75, 90])
    return say_int(rng, n, tags) + " " + rng.choice(["minutes", "minutes", "mins"]), n


def gen_pct(rng, tags):
    n = _pick_int(rng, 5, 100, 5)
    if rng.random() < 0.3:
        return say_int(rng, n, tags, 0.0), n
    tags.add("units")
    return say_int(rng, n, tags) + rng.choice([" percent", "%", " per cent"]), n


def gen_tempc(rng, tags):
    n = rng.randrange(16, 29)
    if rng.random() < 0.2:
        return say_int(rng, n, tags), n
    tags.add("units")
    return say_int(rng, n, tags) + rng.choice([" degrees", " degrees", " degrees celsius", "°C"]), n


def gen_tempf(rng, tags):
    n = rng.randrange(60, 81)
    tags.add("units")
    return say_int(rng, n, tags) + rng.choice([" degrees", " degrees", ""]), n


def gen_oven(rng, tags):
    n = _pick_int(rng, 140, 250, 10)
    tags.add("units")
    return say_int(rng, n, tags, 0.2) + rng.choice([" degrees", " degrees", "°C", " degrees celsius"]), n


def gen_money(rng, tags):
    tags.add("units")
    n = rng.choice([5, 10, 12, 15, 20, 25, 30, 40, 45, 50, 60, 75, 80, 100, 120, 150, 200,
                    250, 300, 500, 750, 1000, 1200])
    k = rng.randrange(4)
    if k == 0:
        return "$" + str(n), n
    if k == 1:
        return say_int(rng, n, tags) + " dollars", n
    if k == 2:
        return say_int(rng, n, tags) + " bucks", n
    return str(n) + " dollars", n


def gen_km(rng, tags):
    tags.add("units")
    k = rng.randrange(3)
    if k == 0:
        n = rng.randrange(1, 43)
        return say_int(rng, n, tags) + rng.choice([" kilometers", " km", " kilometres"]), n
    if k == 1:
        return rng.choice([("a half marathon", 21.1), ("a marathon", 42.2), ("five k", 5),
                           ("ten k", 10), ("half a kilometer", 0.5)])
    n = rng.choice([2.5, 3.5, 4.5, 7.5, 1.5])
    return str(n) + " km", n


def gen_grams(rng, tags):
    tags.add("units")
    k = rng.randrange(3)
    if k == 0:
        n = _pick_int(rng, 50, 900, 50)
        return say_int(rng, n, tags) + rng.choice([" grams", " g"]), n
    if k == 1:
        n = rng.randrange(1, 4)
        return say_int(rng, n, tags) + (" kilo" if n == 1 else " kilos"), n * 1000
    return rng.choice([("half a kilo", 500), ("a kilogram", 1000), ("a pound", 454),
                       ("two pounds", 907)])


def gen_weight_kg(rng, tags):
    tags.add("units")
    if rng.random() < 0.25:
        lb = rng.randrange(110, 240)
        return say_int(rng, lb, tags, 0.2) + " pounds", round(lb * 0.4536, 1)
    n = rng.randrange(45, 120)
    if rng.random() < 0.3:
        n = n + 0.5
        return str(n) + rng.choice([" kg", " kilos"]), n
    return say_int(rng, n, tags) + rng.choice([" kg", " kilos", " kilograms"]), n


def gen_ml(rng, tags):
    tags.add("units")
    k = rng.randrange(3)
    if k == 0:
        n = _pick_int(rng, 100, 900, 50)
        return say_int(rng, n, tags) + rng.choice([" ml", " milliliters", " mils"]), n
    if k == 1:
        return rng.choice([("a glass", 250), ("a cup", 240), ("half a liter", 500),
                           ("a liter", 1000), ("a bottle", 500), ("two glasses", 500)])
    n = rng.randrange(1, 3)
    return say_int(rng, n, tags) + (" liter" if n == 1 else " liters"), n * 1000


def gen_count(rng, tags):
    n = rng.randrange(1, 11)
    return say_int(rng, n, tags, 0.45), n


def gen_floor(rng, tags):
    n = rng.randrange(1, 6)
    return rng.choice(["floor ", "level "]) + say_int(rng, n, tags, 0.4), n


def gen_channel(rng, tags):
    n = rng.randrange(1, 120)
    return say_int(rng, n, tags), n


def gen_vol(rng, tags):
    n = _pick_int(rng, 0, 100, 5)
    return say_int(rng, n, tags), n


def gen_ctime(rng, tags):
    """A time of day copied as said ("7:30 am", "noon")."""
    h = rng.randrange(1, 13)
    m = rng.choice([0, 0, 0, 15, 30, 45, 10, 20])
    ap = rng.choice(["am", "pm", "am", "pm", "a.m.", "p.m."])
    s = ("%d:%02d %s" % (h, m, ap)) if m else ("%d %s" % (h, ap))
    if rng.random() < 0.1:
        s = rng.choice(["noon", "midnight"])
    return s, s


def gen_hour24(rng, tags):
    """An hour of the day, 0-23, said with am/pm."""
    h = rng.randrange(0, 24)
    h12 = h % 12 or 12
    ap = "am" if h < 12 else "pm"
    if rng.random() < 0.3:
        tags.add("numbers_as_words")
        return words(h12) + " " + ap, h
    return "%d %s" % (h12, ap), h


def gen_speed(rng, tags):
    n = rng.randrange(1, 6)
    return say_int(rng, n, tags, 0.5), n


def gen_year(rng, tags):
    n = rng.randrange(1960, 2025)
    return str(n), n


def gen_pages(rng, tags):
    n = rng.choice([1, 2, 3, 4, 5, 10, 12, 20, 25, 50, 100])
    return say_int(rng, n, tags, 0.35), n


def gen_servings(rng, tags):
    n = rng.randrange(1, 13)
    return say_int(rng, n, tags, 0.5), n


def gen_bpm(rng, tags):
    n = rng.choice([60, 70, 80, 90, 100, 110, 120, 128, 140, 160])
    return say_int(rng, n, tags), n


def gen_amount(rng, tags):
    n = rng.choice([1, 2, 3, 5, 10, 12, 15, 20, 25, 50, 100, 250, 1000])
    if rng.random() < 0.2:
        n = rng.choice([1.5, 2.5, 0.5, 3.75, 12.5])
        return str(n), n
    return say_int(rng, n, tags), n


def gen_price(rng, tags):
    return gen_money(rng, tags)


GENERATORS = {
    "SECS": gen_secs, "MINS": gen_mins, "PCT": gen_pct, "TEMPC": gen_tempc, "TEMPF": gen_tempf, "OVEN": gen_oven,
    "MONEY": gen_money, "KM": gen_km, "GRAMS": gen_grams, "KG": gen_weight_kg, "ML": gen_ml,
    "COUNT": gen_count, "FLOOR": gen_floor, "CHANNEL": gen_channel, "VOL": gen_vol,
    "CTIME": gen_ctime, "HOUR": gen_hour24, "SPEED": gen_speed, "YEAR": gen_year,
    "PAGES": gen_pages, "SERVINGS": gen_servings, "BPM": gen_bpm, "AMOUNT": gen_amount,
    "PRICE": gen_price,
}

# Object parameters: the schema of each named object generator, and the generator.
OBJECT_SCHEMAS = {
    "ADDRESS": {
        "type": "object",
        "description": "Delivery address",
        "properties": {
            "street": {"type": "string", "description": "Street and number"},
            "city": {"type": "string", "description": "City"},
        },
        "required": ["street", "city"],
    },
    "RANGE": {
        "type": "object",
        "description": "Temperature range to keep",
        "properties": {
            "low": {"type": "number", "description": "Lowest temperature in degrees"},
            "high": {"type": "number", "description": "Highest temperature in degrees"},
        },
        "required": ["low", "high"],
    },
}


def gen_address(rng, tags, lists):
    street = rng.choice(lists["STREET"])[0]
    city = rng.choice(lists["CITY"])[0]
    tags.add("several_values")
    return street + ", " + city, {"street": street, "city": city}


def gen_range(rng, tags, lists):
    lo = rng.randrange(16, 21)
    hi = lo + rng.randrange(2, 6)
    tags.add("several_values")
    tags.add("units")
    return "%s to %s degrees" % (say_int(rng, lo, tags), say_int(rng, hi, tags)), {"low": lo, "high": hi}


OBJECT_GENERATORS = {"ADDRESS": gen_address, "RANGE": gen_range}

# --------------------------------------------------------------------------- spec parsing


class SpecError(Exception):
    pass


class Param:
    def __init__(self, name, required, kind, arg, desc):
        self.name, self.required, self.kind, self.arg, self.desc = name, required, kind, arg, desc
        self.enum = None
        if kind in ("enum", "arre"):
            self.enum = [m.strip() for m in arg.split(",") if m.strip()]

    def schema(self):
        k = self.kind
        if k == "str":
            return {"type": "string", "description": self.desc}
        if k == "enum":
            return {"type": "string", "enum": list(self.enum), "description": self.desc}
        if k == "int":
            return {"type": "integer", "description": self.desc}
        if k == "num":
            return {"type": "number", "description": self.desc}
        if k == "bool":
            return {"type": "boolean", "description": self.desc}
        if k == "arr":
            return {"type": "array", "items": {"type": "string"}, "description": self.desc}
        if k == "arre":
            return {"type": "array", "items": {"type": "string", "enum": list(self.enum)},
                    "description": self.desc}
        if k == "obj":
            s = json.loads(json.dumps(OBJECT_SCHEMAS[self.arg]))
            s["description"] = self.desc
            return s
        raise SpecError("unknown type " + k)


class Template:
    def __init__(self, kind, text, fixed, where):
        self.kind, self.text, self.fixed, self.where = kind, text, fixed, where


class Tool:
    def __init__(self, name, desc, catalog):
        self.name, self.desc, self.catalog = name, desc, catalog
        self.params = []
        self.templates = []

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        return None

    def schema(self):
        props = {p.name: p.schema() for p in self.params}
        return {"type": "function", "function": {
            "name": self.name, "description": self.desc,
            "parameters": {"type": "object", "properties": props,
                           "required": [p.name for p in self.params if p.required]}}}


class Catalog:
    def __init__(self, name, group, desc):
        self.name, self.desc = name, desc
        self.groups = set(group.split(","))
        self.tools = []

    def schema(self):
        return {"tools": [t.schema() for t in self.tools]}


PARAM_RE = re.compile(r"^(\w+)(\*?)\s+(\w+)(?:\(([^)]*)\))?\s*:\s*(.+)$")
SLOT_RE = re.compile(r"\{(\w+)(?::(\w+))?\}")


def parse_value(s):
    s = s.strip()
    if s in ("true", "false"):
        return s == "true"
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    if re.fullmatch(r"-?\d+\.\d+", s):
        return float(s)
    if len(s) >= 2 and s[0] == s[-1] == '"':
        return s[1:-1]
    return s


def parse_specs(spec_dir):
    lists, synonyms, catalogs = {}, {}, []
    cat = tool = None
    for fname in sorted(os.listdir(spec_dir)):
        if not fname.endswith(".txt"):
            continue
        path = os.path.join(spec_dir, fname)
        cat = tool = None
        with open(path, encoding="utf-8") as f:
            for lineno, raw in enumerate(f, 1):
                where = "%s:%d" % (fname, lineno)
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    if line.startswith("@"):
                        name, _, body = line[1:].partition(":")
                        items = []
                        for it in body.split("|"):
                            it = it.strip()
                            if not it:
                                continue
                            if "=>" in it:
                                a, b = it.split("=>", 1)
                                items.append((a.strip(), parse_value(b)))
                            else:
                                items.append((it, it))
                        if name.strip() in lists:
                            raise SpecError("list defined twice: " + name)
                        lists[name.strip()] = items
                    elif line.startswith("%"):
                        name, _, body = line[1:].partition(":")
                        # after a catalog line in the same file: that catalog's own synonyms
                        key = (cat.name, name.strip()) if cat is not None else name.strip()
                        synonyms.setdefault(key, []).extend(
                            s.strip() for s in body.split("|") if s.strip())
                    elif line.startswith("=="):
                        m = re.fullmatch(r"==\s*(\w+)\s*\[([\w,]+)\]\s*:\s*(.+)", line)
                        if not m:
                            raise SpecError("bad catalog line")
                        cat = Catalog(m.group(1), m.group(2), m.group(3))
                        catalogs.append(cat)
                        tool = None
                    elif line.startswith("--"):
                        m = re.fullmatch(r"--\s*(\w+)\s*:\s*(.+)", line)
                        if not m or cat is None:
                            raise SpecError("bad tool line")
                        tool = Tool(m.group(1), m.group(2), cat)
                        cat.tools.append(tool)
                    elif line[0] in ">~^":
                        if tool is None:
                            raise SpecError("template outside a tool")
                        text, _, fixed_s = line[1:].partition("|")
                        fixed = {}
                        for kv in fixed_s.split(","):
                            if kv.strip():
                                k, v = kv.split("=", 1)
                                fixed[k.strip()] = parse_value(v)
                        kind = {">": "direct", "~": "indirect", "^": "terse"}[line[0]]
                        tool.templates.append(Template(kind, text.strip(), fixed, where))
                    else:
                        m = PARAM_RE.fullmatch(line)
                        if not m or tool is None:
                            raise SpecError("cannot parse: " + line)
                        tool.params.append(Param(m.group(1), m.group(2) == "*", m.group(3),
                                                 m.group(4), m.group(5).strip()))
                except SpecError as e:
                    raise SpecError("%s: %s" % (where, e))
    return lists, synonyms, catalogs


# --------------------------------------------------------------------------- validation

def check_value(schema, v, path):
    t = schema.get("type")
    if t == "string":
        if not isinstance(v, str) or not v:
            return "%s: not a non-empty string" % path
        if "enum" in schema and v not in schema["enum"]:
            return "%s: %r not in enum" % (path, v)
    elif t == "integer":
        if isinstance(v, bool) or not isinstance(v, int):
            return "%s: not an integer" % path
    elif t == "number":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return "%s: not a number" % path
    elif t == "boolean":
        if not isinstance(v, bool):
            return "%s: not a boolean" % path
    elif t == "array":
        if not isinstance(v, list) or not v:
            return "%s: not a non-empty array" % path
        for i, x in enumerate(v):
            e = check_value(schema["items"], x, "%s[%d]" % (path, i))
            if e:
                return e
    elif t == "object":
        return check_object(schema, v, path)
    else:
        return "%s: unknown type %r" % (path, t)
    return None


def check_object(schema, v, path):
    if not isinstance(v, dict):
        return "%s: not an object" % path
    props = schema.get("properties", {})
    for r in schema.get("required", []):
        if r not in v:
            return "%s: required %r missing" % (path, r)
    for k, x in v.items():
        if k not in props:
            return "%s: unknown key %r" % (path, k)
        e = check_value(props[k], x, path + "." + k)
        if e:
            return e
    return None


def validate_call(tools, call):
    """None if call {"name", "arguments"} validates against one of tools (OpenAI schemas)."""
    for t in tools:
        f = t["function"]
        if f["name"] == call["name"]:
            return check_object(f["parameters"], call["arguments"], call["name"])
    return "unknown function %r" % call["name"]


def validate_catalog(cat_schema, where):
    names = set()
    for t in cat_schema["tools"]:
        if t.get("type") != "function":
            raise SpecError(where + ": tool type must be function")
        f = t["function"]
        if not re.fullmatch(r"[a-z][a-z0-9_]*", f["name"]) or f["name"] in names:
            raise SpecError(where + ": bad or repeated tool name " + f["name"])
        names.add(f["name"])
        p = f["parameters"]
        for r in p["required"]:
            if r not in p["properties"]:
                raise SpecError(where + ": required key not a property: " + r)


# --------------------------------------------------------------------------- requests

TYPO_SWAPS = {"please": ["pls", "plz", "pleas"], "the": ["teh", "th"], "temperature": ["temprature", "temperatur"],
              "thermostat": ["thermostate", "thermastat"], "tomorrow": ["tommorow", "tomorow"],
              "minutes": ["minuts", "mintues"], "lights": ["lihgts", "ligths"], "light": ["ligth", "lite"],
              "message": ["mesage", "messsage"], "you": ["u", "yuo"], "turn": ["trun", "tunr"],
              "schedule": ["shedule", "schedual"], "what": ["waht", "wat"], "volume": ["volum", "vloume"],
              "weather": ["wether", "weahter"], "reminder": ["remider", "reminde"], "calendar": ["calender"],
              "set": ["sett", "st"], "for": ["fro", "fr"], "my": ["ym", "mi"], "to": ["too", "ot"]}


def typo_word(rng, w):
    lw = w.lower()
    if lw in TYPO_SWAPS and rng.random() < 0.6:
        return rng.choice(TYPO_SWAPS[lw])
    if len(w) < 4 or not w.isalpha():
        return None
    i = rng.randrange(1, len(w) - 1)
    k = rng.randrange(4)
    if k == 0:
        return w[:i] + w[i + 1] + w[i] + w[i + 2:]
    if k == 1:
        return w[:i] + w[i + 1:]
    if k == 2:
        return w[:i] + w[i] + w[i:]
    near = {"a": "s", "e": "r", "i": "o", "o": "p", "n": "m", "t": "r", "s": "a", "r": "t", "l": "k", "m": "n"}
    c = w[i].lower()
    return w[:i] + near.get(c, c) + w[i + 1:] if c in near else None


POLITE_PRE = ["please ", "could you ", "could you please ", "can you ", "can you please ",
              "would you please ", "hey, could you ", "I'd like you to ", "kindly ",
              "if you don't mind, "]
# Requests that start with these are questions or statements: politeness goes at the end.
NOT_IMPERATIVE = {"what", "what's", "whats", "how", "how's", "is", "are", "who", "who's", "where",
                  "where's", "when", "did", "do", "does", "can", "could", "will", "would", "any",
                  "which", "why", "new", "no", "a", "an", "i", "i'm", "i'd", "i've", "my", "the", "we", "we're", "it's"}
POLITE_POST = [" please", ", please", " thanks", ", thank you", " if you could", " please, thanks"]


def synonyms_of(synonyms, tool, member):
    """The catalog's own synonyms of an enum member, else the shared ones."""
    own = synonyms.get((tool.catalog.name, member))
    return list(own) if own is not None else list(synonyms.get(member, []))


AN_EXCEPTIONS = ("one", "uni", "use", "usb", "uk", "us ", "eu", "uv")


def article_for(word):
    w = word.lower()
    if re.match(r"\d", w):
        return "an" if re.match(r"(8|11|18)(\D|$)", w) else "a"
    if w.startswith(("hour", "honest")):
        return "an"
    if w[:1] in "aeiou" and not w.startswith(AN_EXCEPTIONS):
        return "an"
    return "a"


def fix_articles(parts):
    """A literal part ending in a/an agrees with the word after it (values are never changed);
    a value that brings its own article drops the template's."""
    out = list(parts)
    for i in range(len(out) - 1):
        t, lit = out[i]
        m = re.search(r"(^|\s)([Aa]n?) $", t)
        if not lit or not m:
            continue
        nxt = "".join(x for x, _ in out[i + 1:]).lstrip()
        if not nxt:
            continue
        first = re.split(r"\s", nxt, maxsplit=1)[0]
        head = t[:m.start(2)]
        if first.lower() in ("a", "an", "the"):
            out[i] = (head, True)
            continue
        art = article_for(first)
        if m.group(2)[0] == "A":
            art = art.capitalize()
        out[i] = (head + art + " ", True)
    return out


PLURALS = {"days": "day", "nights": "night", "hours": "hour", "copies": "copy", "portions": "portion",
           "stars": "star", "servings": "serving", "episodes": "episode", "cups": "cup",
           "people": "person", "guests": "guest", "times": "time", "notches": "notch",
           "cartridges": "cartridge", "books": "book", "games": "game", "emails": "email",
           "stories": "story", "passengers": "passenger", "steps": "step", "weeks": "week",
           "minutes": "minute", "seconds": "second", "degrees": "degree"}


def fix_singular(parts):
    """"1 days" -> "1 day": a template's plural noun after a value said as one."""
    out = list(parts)
    for i in range(1, len(out)):
        t, lit = out[i]
        prev, prev_lit = out[i - 1]
        if not lit or prev_lit or prev.strip().lower() not in ("1", "one"):
            continue
        m = re.match(r"(\s+)(\w+)\b", t)
        if m and m.group(2) in PLURALS:
            out[i] = (m.group(1) + PLURALS[m.group(2)] + t[m.end():], True)
    return out


def sample_slot(rng, tool, pname, gen_name, lists, synonyms, tags):
    p = tool.param(pname)
    if p is None:
        raise SpecError("%s: placeholder {%s} is not a parameter" % (tool.name, pname))
    src = gen_name or p.arg
    if p.kind == "enum":
        member = rng.choice(p.enum)
        surfaces = [member.replace("_", " ")] + synonyms_of(synonyms, tool, member)
        s = rng.choice(surfaces)
        if s != member.replace("_", " "):
            tags.add("enum_synonym")
        return s, member
    if p.kind == "arre":
        n = min(len(p.enum), rng.choice([1, 2, 2, 3]))
        members = rng.sample(p.enum, n)
        ss = []
        for m in members:
            surf = [m.replace("_", " ")] + synonyms_of(synonyms, tool, m)
            s = rng.choice(surf)
            if s != surf[0]:
                tags.add("enum_synonym")
            ss.append(s)
        if n > 1:
            tags.add("several_values")
        return join_and(rng, ss), members
    if p.kind == "obj":
        return OBJECT_GENERATORS[src](rng, tags, lists)
    if p.kind == "arr":
        items = lists[src]
        n = min(len(items), rng.choice([1, 2, 2, 3, 3, 4]))
        chosen = rng.sample(items, n)
        if n > 1:
            tags.add("several_values")
        return join_and(rng, [c[0] for c in chosen]), [c[1] for c in chosen]
    if src in GENERATORS:
        s, v = GENERATORS[src](rng, tags)
    elif src in lists:
        s, v = rng.choice(lists[src])
        if p.kind in ("int", "num") and isinstance(v, str):
            v = parse_value(v)
        if p.kind == "str" and not isinstance(v, str):
            v = str(v)
    elif src and re.fullmatch(r"-?\d+(\.\d+)?\.\.-?\d+(\.\d+)?", src):
        lo, hi = src.split("..")
        if p.kind == "int" or ("." not in lo and "." not in hi):
            n = rng.randrange(int(lo), int(hi) + 1)
            s, v = say_int(rng, n, tags), n
        else:
            n = round(rng.uniform(float(lo), float(hi)) * 2) / 2
            s, v = (str(n) if n != int(n) else str(int(n))), n
    else:
        raise SpecError("%s.%s: no slot source %r" % (tool.name, pname, src))
    if p.kind == "num" and isinstance(v, int):
        pass
    if p.kind == "int" and not isinstance(v, int):
        raise SpecError("%s.%s: list value %r is not an integer" % (tool.name, pname, v))
    if p.kind == "str" and isinstance(v, str) and v in s:
        tags.add("copied_string")
    return s, v


def join_and(rng, xs):
    if len(xs) == 1:
        return xs[0]
    return ", ".join(xs[:-1]) + rng.choice([" and ", " and ", ", "]) + xs[-1]


def render(rng, tool, tpl, lists, synonyms):
    """One request from a template: (request, arguments, tags)."""
    tags = {tpl.kind}
    args = dict(tpl.fixed)
    parts = []  # (text, is_literal)
    pos = 0
    for m in SLOT_RE.finditer(tpl.text):
        parts.append((tpl.text[pos:m.start()], True))
        s, v = sample_slot(rng, tool, m.group(1), m.group(2), lists, synonyms, tags)
        if m.group(1) in args:
            raise SpecError("%s: {%s} set twice" % (tpl.where, m.group(1)))
        args[m.group(1)] = v
        parts.append((s, False))
        pos = m.end()
    parts.append((tpl.text[pos:], True))
    parts = fix_singular(fix_articles(parts))
    # typos, only in the template's own words (never in a value that is copied)
    if tpl.kind != "terse" and rng.random() < 0.16:
        lit = [i for i, (t, l) in enumerate(parts) if l and re.search(r"[A-Za-z]{2,}", t)]
        if lit:
            i = rng.choice(lit)
            toks = re.split(r"(\W+)", parts[i][0])
            cand = [j for j, w in enumerate(toks) if w.isalpha() and len(w) >= 2]
            rng.shuffle(cand)
            for j in cand:
                t = typo_word(rng, toks[j])
                if t and t != toks[j]:
                    toks[j] = t
                    parts[i] = ("".join(toks), True)
                    tags.add("typos")
                    break
    text = "".join(t for t, _ in parts)
    text = re.sub(r"\s+", " ", text).strip()
    # a request that starts with a value keeps the value's case (it is copied into the call)
    starts_with_value = not parts[0][0].strip()
    first = re.split(r"[\s']", tpl.text.strip(), maxsplit=1)[0].lower()
    if tpl.kind == "direct" and rng.random() < 0.25:
        tags.add("polite")
        if rng.random() < 0.6 and not starts_with_value and first not in NOT_IMPERATIVE:
            text = rng.choice(POLITE_PRE) + text
            starts_with_value = False
        else:
            text = text + rng.choice(POLITE_POST)
    if rng.random() < 0.5 and not starts_with_value:
        text = text[0].upper() + text[1:]
    r = rng.random()
    if text[-1] in ".!?":
        pass
    elif r < 0.12:
        text += "."
    elif r < 0.16 and tpl.kind != "terse":
        text += "!"
    # the phenomena the arguments show
    present = set(args)
    if any(not p.required and p.name not in present for p in tool.params):
        tags.add("optional_omitted")
    if len(args) >= 3:
        tags.add("several_values")
    for k, v in args.items():
        p = tool.param(k)
        if p is None:
            raise SpecError("%s: fixed key %r is not a parameter" % (tpl.where, k))
        if p.kind == "num" and isinstance(v, int):
            pass
        if p.kind == "str" and isinstance(v, str) and v.lower() in text.lower() and k not in tpl.fixed:
            tags.add("copied_string")
    # key order: the schema's
    order = [p.name for p in tool.params]
    args = {k: args[k] for k in order if k in args}
    return text, args, tags


def same_pair(args):
    """True when paired arguments (from_X/to_X, X_a/X_b, origin/destination) are equal."""
    for k, v in args.items():
        for a, b in (("from_", "to_"), ("source_", "target_")):
            if k.startswith(a) and args.get(b + k[len(a):]) == v:
                return True
        if k.endswith("_a") and args.get(k[:-2] + "_b") == v:
            return True
    return args.get("origin") is not None and args.get("origin") == args.get("destination")


def tool_examples(tool, lists, synonyms, template_ids=None):
    """The tool's requests, written from its templates in turn; template_ids, when a list, gets
    each request's template index (bench/per_app_split.py counts the phrasings a split shares)."""
    rng = random.Random(SEED ^ zlib.crc32(tool.name.encode()))
    out, seen = [], set()
    if not tool.templates:
        raise SpecError(tool.name + ": no templates")
    attempts = 0
    i = 0
    used = {}
    while len(out) < EXAMPLES_PER_TOOL and attempts < 40 * EXAMPLES_PER_TOOL:
        tpl_id = i % len(tool.templates)
        tpl = tool.templates[tpl_id]
        i += 1
        attempts += 1
        if not SLOT_RE.search(tpl.text) and used.get(id(tpl), 0) >= 2:
            continue
        text, args, tags = render(rng, tool, tpl, lists, synonyms)
        key = text.lower().rstrip(".!")
        if key in seen or same_pair(args):
            continue
        seen.add(key)
        used[id(tpl)] = used.get(id(tpl), 0) + 1
        err = check_object(tool.schema()["function"]["parameters"], args, tool.name)
        if err:
            raise SpecError("%s: %s (request %r)" % (tpl.where, err, text))
        out.append((text, args, tags))
        if template_ids is not None:
            template_ids.append(tpl_id)
    return out


# --------------------------------------------------------------------------- corpus

def build(spec_dir=SPEC_DIR):
    """Everything generated, as {relative path: bytes}, and the statistics."""
    lists, synonyms, catalogs = parse_specs(spec_dir)
    by_name = {c.name: c for c in catalogs}
    if len(by_name) != len(catalogs):
        raise SpecError("a catalog name is repeated")
    for e in EVAL_CATALOGS:
        if e not in by_name:
            raise SpecError("eval catalog %s not defined" % e)
    all_tools = {}
    for c in catalogs:
        for t in c.tools:
            if t.name in all_tools:
                raise SpecError("tool name %s in both %s and %s" % (t.name, all_tools[t.name].catalog.name, c.name))
            all_tools[t.name] = t
    files = {}
    stats = {"catalogs": len(catalogs), "tools": len(all_tools), "splits": {}}
    for c in catalogs:
        s = c.schema()
        validate_catalog(s, c.name)
        files["catalogs/%s.json" % c.name] = (json.dumps(s, indent=1, ensure_ascii=False) + "\n").encode()

    train_cats = [c for c in catalogs if c.name not in EVAL_CATALOGS]
    eval_cats = [by_name[n] for n in EVAL_CATALOGS]
    stats["train_catalogs"] = [c.name for c in train_cats]
    stats["eval_catalogs"] = [c.name for c in eval_cats]

    def record(split, tags, ntools):
        st = stats["splits"].setdefault(split, {"requests": 0, "tools_per_example": 0, "phenomena": {}})
        st["requests"] += 1
        st["tools_per_example"] += ntools
        for t in tags:
            st["phenomena"][t] = st["phenomena"].get(t, 0) + 1

    def line(tools, text, name, args):
        call = {"name": name, "arguments": args}
        err = validate_call(tools, call)
        if err:
            raise SpecError("invalid call for %r: %s" % (text, err))
        obj = {"tools": tools, "messages": [
            {"role": "developer", "content": DEVELOPER},
            {"role": "user", "content": text},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": call}]}]}
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    # training: per catalog a few views (the whole catalog or a random part of it, in a random
    # order, with distractors from other train catalogs); each request is asked against a view
    # holding its tool. Requests share a view's prompt prefix, so `fgemma tune` computes the
    # prefix once per run of requests (src/train/trainer.h); the whole-catalog views match how
    # `fgemma call --tools CATALOG` prompts.
    train_lines = []
    for c in train_cats:
        # distractors only from catalogs that share no group (no tool there could also be meant)
        others = [t for oc in train_cats if not (oc.groups & c.groups) for t in oc.tools]
        views = []  # (tools, has distractors, masked names {tool name: shown name})
        for v in range(VIEWS_PER_CATALOG + MASKED_VIEWS):
            vr = random.Random(SEED + 7 ^ zlib.crc32(("%s/%d" % (c.name, v)).encode()))
            masked = v >= VIEWS_PER_CATALOG
            if v < FULL_VIEWS or (masked and v - VIEWS_PER_CATALOG < MASKED_FULL_VIEWS):
                chosen = list(c.tools)
            else:
                chosen = vr.sample(c.tools, vr.randrange(max(1, len(c.tools) // 2), len(c.tools) + 1))
            k_dist = min(vr.choice([0, 1, 2, 3, 4]), MAX_TOOLS - len(chosen))
            chosen = chosen + vr.sample(others, max(0, k_dist))
            vr.shuffle(chosen)
            names = {}
            if masked:
                taken = set()
                for t in chosen:
                    while True:
                        n = vr.choice(_MASK_PREFIXES) + "_" + "".join(
                            vr.choice(_MASK_CHARS) for _ in range(vr.randrange(3, 6)))
                        if n not in taken and n not in all_tools:
                            break
                    taken.add(n)
                    names[t.name] = n
            views.append((chosen, k_dist > 0, names))
        for tool in c.tools:
            rng = random.Random(SEED + 1 ^ zlib.crc32(tool.name.encode()))
            holding = [v for v in views if tool in v[0]]
            for text, args, tags in tool_examples(tool, lists, synonyms):
                chosen, has_dist, names = rng.choice(holding)
                tools = [t.schema() for t in chosen]
                for ts in tools:
                    ts["function"]["name"] = names.get(ts["function"]["name"], ts["function"]["name"])
                name = names.get(tool.name, tool.name)
                train_lines.append(line(tools, text, name, args))
                record("train", tags | ({"distractors"} if has_dist else set()) |
                       ({"masked_names"} if names else set()), len(tools))
    rng = random.Random(SEED)
    rng.shuffle(train_lines)
    files["train.jsonl"] = ("\n".join(train_lines) + "\n").encode()

    # eval: each held-out catalog whole, in its own order (as `--tools CATALOG` sees it)
    eval_lines = []
    for c in eval_cats:
        tools = c.schema()["tools"]
        short = []
        for tool in c.tools:
            for text, args, tags in tool_examples(tool, lists, synonyms):
                eval_lines.append(line(tools, text, tool.name, args))
                short.append(json.dumps({"request": text, "calls": [{"name": tool.name, "arguments": args}]},
                                        ensure_ascii=False, separators=(",", ":")))
                record("eval", tags, len(tools))
        files["eval_requests/%s.jsonl" % c.name] = ("\n".join(short) + "\n").encode()
    files["eval.jsonl"] = ("\n".join(eval_lines) + "\n").encode()
    for st in stats["splits"].values():
        st["tools_per_example"] = round(st["tools_per_example"] / max(1, st["requests"]), 2)
        st["phenomena"] = dict(sorted(st["phenomena"].items()))
    stats["eval_requests"] = {c.name: files["eval_requests/%s.jsonl" % c.name].count(b"\n") for c in eval_cats}
    stats["tools_per_catalog"] = {c.name: len(c.tools) for c in catalogs}
    files["stats.json"] = (json.dumps(stats, indent=1) + "\n").encode()
    return files, stats


def verify_jsonl(files):
    """Every line of every JSONL validates (independent of how it was built)."""
    n = 0
    cats = {}
    for path, data in files.items():
        if path.startswith("catalogs/"):
            cats[path[len("catalogs/"):-len(".json")]] = json.loads(data)["tools"]
    for path, data in files.items():
        if not path.endswith(".jsonl"):
            continue
        for i, ln in enumerate(data.decode().splitlines(), 1):
            o = json.loads(ln)
            if "tools" in o:
                tools = o["tools"]
                msgs = o["messages"]
                if [m["role"] for m in msgs] != ["developer", "user", "assistant"]:
                    raise SpecError("%s:%d: bad roles" % (path, i))
                calls = [tc["function"] for tc in msgs[2]["tool_calls"]]
            else:
                tools = cats[os.path.basename(path)[:-len(".jsonl")]]
                calls = o["calls"]
            for call in calls:
                err = validate_call(tools, call)
                if err:
                    raise SpecError("%s:%d: %s" % (path, i, err))
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="verify the committed files match and validate")
    ap.add_argument("--out", default=HERE, help="output folder (default: data/calls/)")
    ap.add_argument("--stats", action="store_true", help="print the counts as JSON")
    ap.add_argument("--no-train", action="store_true", help="do not write train.jsonl")
    a = ap.parse_args()
    try:
        files, stats = build()
        n = verify_jsonl(files)
    except SpecError as e:
        print("generate.py: " + str(e), file=sys.stderr)
        return 1
    if a.stats:
        print(json.dumps(stats, indent=1))
    if a.check:
        bad = []
        for path, data in sorted(files.items()):
            full = os.path.join(HERE, path)
            try:
                with open(full, "rb") as f:
                    if f.read() != data:
                        bad.append(path + " differs")
            except FileNotFoundError:
                bad.append(path + " missing")
        for sub in ("catalogs", "eval_requests"):
            d = os.path.join(HERE, sub)
            if os.path.isdir(d):
                for fn in os.listdir(d):
                    if sub + "/" + fn not in files:
                        bad.append(sub + "/" + fn + " is not generated")
        if bad:
            print("generate.py --check: the committed corpus is not what the generator writes "
                  "(run python3 data/calls/generate.py):\n  " + "\n  ".join(bad), file=sys.stderr)
            return 1
        print("generate.py --check: %d files identical, %d calls valid" % (len(files), n))
        return 0
    for path, data in sorted(files.items()):
        if a.no_train and path == "train.jsonl":
            continue
        full = os.path.join(a.out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tmp = full + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, full)
    if not a.stats:
        print("wrote %d files under %s (%d calls valid)" % (len(files), a.out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
