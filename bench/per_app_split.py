#!/usr/bin/env python3
"""The per-app split of bench/per_app_tune.sh: an app's 30 training and 50 test requests.

  bench/per_app_split.py APP OUTDIR [--split tools|lines] [--seed N]   # OUTDIR/{train,test}.jsonl
  bench/per_app_split.py --check                                        # the self-check (CTest)

APP is a held-out catalog of data/calls (its requests: data/calls/eval_requests/APP.jsonl).

--split tools (the default): a sample stratified by tool, as a developer who labels every tool
would write it. Each tool's requests are shuffled (--seed, default 1); the 30 are taken one tool
at a time in turn (each tool gets 30 / tools of them, give or take one); the 50 are a shuffled
draw of the rest (fewer when fewer are left: robot_vacuum has 74 requests, so 44).

--split lines: the split used until 2026-12-05, every 3rd line (the 1st, 4th, ...) for training,
the first 50 of the others for the test. data/calls/generate.py writes each tool's requests from
its templates in turn, so for a tool of three templates every 3rd line is one template: the 30
then show one phrasing of most tools, and the 50 are mostly the other two.

Both print, on stderr, how many test requests have a phrasing (a template of generate.py) that
none of the training requests has.
"""
import argparse
import functools
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = os.path.join(HERE, "..", "data", "calls")
sys.path.insert(0, CALLS)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import generate  # noqa: E402  (data/calls/generate.py: the corpus's templates)

TRAIN, TEST = 30, 50


@functools.lru_cache(maxsize=None)
def specs():
    """data/calls/spec, parsed once: (lists, synonyms, catalogs)."""
    return generate.parse_specs(generate.SPEC_DIR)


def requests(app):
    """The app's request lines as data/calls/eval_requests/APP.jsonl has them, and the tool and
    template each was written from, {line: (tool, template index)}."""
    path = os.path.join(CALLS, "eval_requests", app + ".jsonl")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    lists, synonyms, catalogs = specs()
    catalog = {c.name: c for c in catalogs}[app]
    templates = {}
    for tool in catalog.tools:
        ids = []
        for (text, _, _), tpl in zip(generate.tool_examples(tool, lists, synonyms, ids), ids):
            templates[text] = (tool.name, tpl)
    keys = {}
    for line in lines:
        text = json.loads(line)["request"]
        if text not in templates:
            raise SystemExit("per_app_split.py: %s: %r is not one of the generator's requests "
                             "(run data/calls/generate.py)" % (path, text))
        keys[line] = templates[text]
    return lines, keys


def split(lines, keys, how, seed):
    if how == "lines":
        train = lines[0::3][:TRAIN]
        test = [line for i, line in enumerate(lines) if i % 3 != 0][:TEST]
        return train, test
    rng = random.Random(seed)
    by_tool = {}
    for line in lines:
        by_tool.setdefault(keys[line][0], []).append(line)
    groups = list(by_tool.values())
    for group in groups:
        rng.shuffle(group)
    train = []
    for turn in range(len(groups) * max(map(len, groups))):
        if len(train) == TRAIN:
            break
        group = groups[turn % len(groups)]
        if turn // len(groups) < len(group):
            train.append(group[turn // len(groups)])
    taken = set(train)
    rest = [line for line in lines if line not in taken]
    rng.shuffle(rest)
    return train, rest[:TEST]


def unseen(train, test, keys):
    """Test requests whose template no training request has."""
    shown = {keys[line] for line in train}
    return sum(keys[line] not in shown for line in test)


def check():
    failures = []
    for app in generate.EVAL_CATALOGS:
        lines, keys = requests(app)
        tools = {k[0] for k in keys.values()}
        train, test = split(lines, keys, "tools", 1)
        if len(train) != TRAIN or len(test) != min(TEST, len(lines) - TRAIN):
            failures.append("%s: %d training and %d test requests" % (app, len(train), len(test)))
        if set(train) & set(test):
            failures.append(app + ": a request in both parts")
        if {keys[line][0] for line in train} != tools:
            failures.append(app + ": a tool without a training request")
        counts = {}
        for line in train:
            counts[keys[line][0]] = counts.get(keys[line][0], 0) + 1
        if max(counts.values()) - min(counts.values()) > 1:
            failures.append("%s: training requests per tool %s" % (app, sorted(counts.values())))
        if split(lines, keys, "tools", 1) != (train, test):
            failures.append(app + ": the same seed gave another split")
        if split(lines, keys, "tools", 2) == (train, test):
            failures.append(app + ": seeds 1 and 2 gave the same split")
        # --split lines against the commands bench/per_app_tune.sh ran until 2026-12-05
        src = os.path.join(CALLS, "eval_requests", app + ".jsonl")
        awk = [subprocess.run(["awk", prog, src], capture_output=True, text=True, check=True)
               .stdout.splitlines() for prog in ("NR % 3 == 1 && ++n <= 30", "NR % 3 != 1 && ++n <= 50")]
        if list(split(lines, keys, "lines", 1)) != awk:
            failures.append(app + ": --split lines is not the old split")
    for f in failures:
        print("per_app_split.py --check: " + f, file=sys.stderr)
    if not failures:
        print("per_app_split.py --check: %d apps split" % len(generate.EVAL_CATALOGS))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("app", nargs="?", help="a held-out catalog: " + ", ".join(generate.EVAL_CATALOGS))
    ap.add_argument("outdir", nargs="?", help="where train.jsonl and test.jsonl are written")
    ap.add_argument("--split", choices=["tools", "lines"], default="tools")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true", help="check the splits of every held-out catalog")
    a = ap.parse_args()
    if a.check:
        return check()
    if not a.app or not a.outdir:
        ap.error("APP and OUTDIR are required")
    if a.app not in generate.EVAL_CATALOGS:
        ap.error("%s is not a held-out catalog (%s)" % (a.app, ", ".join(generate.EVAL_CATALOGS)))
    if not os.path.isdir(a.outdir):
        ap.error("%s is not a folder" % a.outdir)
    lines, keys = requests(a.app)
    train, test = split(lines, keys, a.split, a.seed)
    for name, part in (("train", train), ("test", test)):
        path = os.path.join(a.outdir, name + ".jsonl")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in part))
        os.replace(path + ".tmp", path)
    print("per-app %s (--split %s%s): %d training requests, %d test requests, %d of them in a "
          "phrasing none of the %d has" % (a.app, a.split, "" if a.split == "lines" else " --seed %d" % a.seed,
                                           len(train), len(test), unseen(train, test, keys), len(train)),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
