#!/usr/bin/env python3
"""Chart of fgemma against llama.cpp from bench/compare.sh results files.

  bench/plot.py RESULTS.json [RESULTS.json ...] [-o docs/benchmarks.png] [--title TEXT]

Each RESULTS.json is one run of `bench/compare.sh ... -o RESULTS.json -l LABEL` (format
"fgemma-compare/1", written by bench/summarize.py), typically one per quant type. The chart has
one row per file: prefill (ppN) and decode (tgN) in tokens/s per thread count, and time to call
(ttc_cold / ttc_warm, ms) when the run has it; fgemma and llama.cpp side by side, the bars at
the median with the standard deviation as an error bar, and the ratio written above each pair
(fgemma / llama.cpp tokens/s; for time to call, fgemma / llama.cpp time, below 1 is faster).

Needs matplotlib (pinned in scripts/requirements-bench.txt; `make venv` installs it into
build/venv). Exit codes: 0 written, 1 a file is missing or malformed (or matplotlib is
absent), 2 bad command line.
"""
import argparse
import json
import math
import os
import re
import sys

FORMAT = "fgemma-compare/1"
FG_COLOR, LL_COLOR = "#1f77b4", "#ff7f0e"


class InputError(Exception):
    pass


def _number(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{where}: expected a number, got {json.dumps(v)}")
    return float(v)


def _engine(row, key, where, required):
    e = row.get(key)
    if e is None and not required:
        return None
    if not isinstance(e, dict):
        raise InputError(f"{where}.{key}: expected an object with 'median' (and 'sd')")
    median = _number(e.get("median"), f"{where}.{key}.median")
    if median <= 0:
        raise InputError(f"{where}.{key}.median: expected > 0, got {median:g}")
    sd = _number(e.get("sd", 0), f"{where}.{key}.sd")
    if sd < 0:
        raise InputError(f"{where}.{key}.sd: expected >= 0, got {sd:g}")
    return median, sd


def _threads(row, where):
    t = row.get("threads")
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise InputError(f"{where}.threads: expected an integer >= 1, got {json.dumps(t)}")
    return t


def load_results(path):
    """Reads and checks one results file; raises InputError naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise InputError("expected a JSON object (bench/compare.sh -o output)")
    if d.get("format") != FORMAT:
        raise InputError(f"'format' is {json.dumps(d.get('format'))}, expected \"{FORMAT}\"")
    res = {"label": str(d.get("label") or os.path.basename(path)), "date": str(d.get("date", "")),
           "machine": str(d.get("machine", "")), "note": str(d.get("note", "")),
           "speed": [], "ttc": []}
    for key in ("speed", "ttc"):
        if not isinstance(d.get(key, []), list):
            raise InputError(f"'{key}': expected a list")
    for i, r in enumerate(d.get("speed", [])):
        where = f"speed[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where}: expected an object")
        test = r.get("test")
        if not isinstance(test, str) or not re.fullmatch(r"(pp|tg)[0-9]+", test):
            raise InputError(f"{where}.test: expected ppN or tgN, got {json.dumps(test)}")
        res["speed"].append({"test": test, "threads": _threads(r, where),
                             "fg": _engine(r, "fgemma", where, True),
                             "ll": _engine(r, "llama_cpp", where, False)})
    for i, r in enumerate(d.get("ttc", [])):
        where = f"ttc[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where}: expected an object")
        test = r.get("test")
        if test not in ("ttc_cold", "ttc_warm"):
            raise InputError(f"{where}.test: expected ttc_cold or ttc_warm, got {json.dumps(test)}")
        res["ttc"].append({"test": test, "threads": _threads(r, where),
                           "catalog": str(r.get("catalog", "")),
                           "fg": _engine(r, "fgemma", where, True),
                           "ll": _engine(r, "llama_cpp", where, False)})
    if not res["speed"] and not res["ttc"]:
        raise InputError("no rows: 'speed' and 'ttc' are both empty")
    return res


def bars(ax, groups, unit, ratio_suffix):
    """groups: [(x label, (fg median, sd), (ll median, sd) or None)]. Draws the pairs."""
    width = 0.38
    top = 0.0
    for i, (_, fg, ll) in enumerate(groups):
        ax.bar(i - width / 2, fg[0], width, yerr=fg[1], color=FG_COLOR, capsize=3,
               label="fgemma" if i == 0 else None)
        top = max(top, fg[0] + fg[1])
        if ll is not None:
            ax.bar(i + width / 2, ll[0], width, yerr=ll[1], color=LL_COLOR, capsize=3,
                   label="llama.cpp" if i == 0 else None)
            top = max(top, ll[0] + ll[1])
    for i, (_, fg, ll) in enumerate(groups):
        high = max(fg[0] + fg[1], (ll[0] + ll[1]) if ll else 0)
        text = f"{fg[0] / ll[0]:.2f}x{ratio_suffix}" if ll else "no llama.cpp"
        ax.text(i, high + top * 0.03, text, ha="center", va="bottom", fontsize=8,
                fontweight="bold")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel(unit, fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def plural(t):
    return f"{t} thread" + ("s" if t > 1 else "")


def draw(results, output, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_ttc = any(r["ttc"] for r in results)
    cols = 3 if with_ttc else 2
    fig, axes = plt.subplots(len(results), cols, figsize=(4.6 * cols, 3.4 * len(results) + 1.2),
                             squeeze=False)
    for row, res in enumerate(results):
        speed = sorted(res["speed"], key=lambda r: (r["threads"], int(r["test"][2:])))
        for col, (kind, name) in enumerate((("pp", "prefill"), ("tg", "decode"))):
            ax = axes[row][col]
            groups = [(f"{r['test']}\n{plural(r['threads'])}", r["fg"], r["ll"])
                      for r in speed if r["test"].startswith(kind)]
            ax.set_title(f"{res['label']}: {name} (tok/s, higher is better)", fontsize=9)
            if groups:
                bars(ax, groups, "tokens/s", "")
            else:
                ax.text(0.5, 0.5, f"no {kind}N rows in this run", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8)
                ax.set_axis_off()
        if with_ttc:
            ax = axes[row][2]
            ttc = sorted(res["ttc"], key=lambda r: (r["catalog"], r["test"], r["threads"]))
            catalogs = sorted({r["catalog"] for r in ttc})
            groups = [((f"{r['catalog']}\n" if len(catalogs) > 1 else "") +
                       f"{r['test'][4:]}\n{plural(r['threads'])}", r["fg"], r["ll"]) for r in ttc]
            what = f" ({catalogs[0]})" if len(catalogs) == 1 else ""
            ax.set_title(f"{res['label']}: time to call{what} (ms, lower is better)", fontsize=9)
            if groups:
                bars(ax, groups, "ms", " time")
            else:
                ax.text(0.5, 0.5, "no time-to-call rows in this run", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8)
                ax.set_axis_off()
    handles, labels = [], []
    for ax in axes.flat:
        h, l = ax.get_legend_handles_labels()
        for hh, ll in zip(h, l):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    if not title:
        dates = sorted({r["date"] for r in results if r["date"]})
        title = "fgemma vs llama.cpp" + (f", run of {', '.join(dates)}" if dates else "")
    fig.suptitle(title, fontsize=11)
    fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=2)
    by_machine = {}
    for r in results:
        if r["machine"]:
            by_machine.setdefault(r["machine"], []).append(r["label"])
    machines = [m if len(by_machine) == 1 else f"{', '.join(labels)}: {m}"
                for m, labels in by_machine.items()]
    notes = sorted({r["note"] for r in results if r["note"]})
    caption = "\n".join(machines + notes +
                        ["Bars: median; error bars: standard deviation; labels: fgemma / "
                         "llama.cpp (tokens/s, or time for time to call)."])
    fig.text(0.01, 0.005, caption, fontsize=6.5, va="bottom", ha="left", wrap=True)
    caption_lines = caption.count("\n") + 1
    fig.tight_layout(rect=(0, 0.02 + 0.12 * caption_lines / (3.4 * len(results) + 1.2), 1, 0.95))
    try:
        fig.savefig(output, dpi=110, metadata={"Software": None})
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror}") from None
    finally:
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", metavar="RESULTS.json",
                    help="bench/compare.sh -o files, one row of the chart each")
    ap.add_argument("-o", "--output", default="docs/benchmarks.png",
                    help="PNG file to write (default: docs/benchmarks.png)")
    ap.add_argument("--title", default="", help="chart title (default: from the files' dates)")
    args = ap.parse_args()
    results = []
    for path in args.results:
        try:
            results.append(load_results(path))
        except InputError as e:
            print(f"plot.py: {path}: {e}", file=sys.stderr)
            return 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"plot.py: matplotlib is not installed in {sys.executable} "
              "(pip install -r scripts/requirements-bench.txt, or `make venv`)", file=sys.stderr)
        return 1
    try:
        draw(results, args.output, args.title)
    except InputError as e:
        print(f"plot.py: {args.output}: {e}", file=sys.stderr)
        return 1
    print(f"plot.py: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
