"""Does contextual-token support separate in-KB answers from out-of-KB questions the engine answers?

    python scripts/measure_refusal_causes.py --split dev --out OBS.jsonl    # first: each case's graded evidence
    python scripts/measure_token_support.py OBS.jsonl [--json]

For each English case the engine answered at its first grading round, every content word of the graded query is
matched, ColBERT-style, against the contextual token vectors of the round's best five chunks (MiniLM's last layer,
the vectors its sentence embedding is the mean of): a word's support is the best cosine of its word pieces, averaged.
Prints, per aggregate (the weakest word, the mean), the AUC between in-KB cases answered right and out-of-KB cases
answered, and how many of the latter a threshold keeping 97 % / 99 % of the right answers would refuse. It observes;
nothing in the engine reads it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tools.text import STOPWORDS  # noqa: E402

CHUNKS = 5
# Question words and fillers that carry no asked content (tools.text.STOPWORDS keeps some of them).
FILLERS = re.compile(r"get|do|does|much|many|long|often|need|can|i|we|us|my|our|what|how|when|where|who|which")


def token_vectors(model):
    """A text's word pieces and their normalised contextual vectors, cached across cases (chunks recur)."""
    tokenizer = model.tokenizer

    @lru_cache(maxsize=4096)
    def vectors(text: str) -> tuple[list[str], np.ndarray]:
        ids = tokenizer(text, truncation=True, max_length=256)["input_ids"]
        emb = np.asarray(model.encode(text, output_value="token_embeddings", convert_to_numpy=True))
        return tokenizer.convert_ids_to_tokens(ids), emb / np.linalg.norm(emb, axis=1, keepdims=True)

    return vectors


def word_support(vectors, query: str, chunks: list[str]) -> list[tuple[str, float]]:
    pieces, query_vectors = vectors(query)
    evidence = np.concatenate([vectors(text)[1][1:-1] for text in chunks])
    words: list[tuple[str, list[int]]] = []
    for i, piece in enumerate(pieces):
        if piece in ("[CLS]", "[SEP]"):
            continue
        if piece.startswith("##") and words:
            words[-1] = (words[-1][0] + piece[2:], [*words[-1][1], i])
        else:
            words.append((piece, [i]))
    return [
        (word, float((query_vectors[idx] @ evidence.T).max(axis=1).mean()))
        for word, idx in words
        if re.match(r"[a-z0-9]", word) and word not in STOPWORDS and not FILLERS.fullmatch(word)
    ]


def auc(positive: list[float], negative: list[float]) -> float:
    pos, neg = np.array(positive)[:, None], np.array(negative)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("observed", type=Path, help="measure_refusal_causes.py --out file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from tools.embeddings import verified_model_dir

    vectors = token_vectors(SentenceTransformer(str(verified_model_dir()), device="cpu"))
    cases = []
    for row in map(json.loads, args.observed.read_text(encoding="utf-8").splitlines()):
        if row["lang"] != "en" or row["verdict"] not in ("answered_right", "ook_answered") or not row.get("graded"):
            continue
        graded = row["graded"][0]
        support = word_support(vectors, graded["query"], [c["text"] for c in graded["chunks"][:CHUNKS]])
        if support:
            values = [s for _, s in support]
            cases.append({"verdict": row["verdict"], "min": min(values), "mean": float(np.mean(values))})
    report = {}
    for key in ("min", "mean"):
        right = [c[key] for c in cases if c["verdict"] == "answered_right"]
        wrong = [c[key] for c in cases if c["verdict"] == "ook_answered"]
        report[key] = {"right": len(right), "ook_answered": len(wrong), "auc": round(auc(right, wrong), 3)}
        for keep in (0.97, 0.99):
            threshold = float(np.quantile(right, 1 - keep))
            report[key][f"ook_refused_keeping_{keep}"] = sum(v < threshold for v in wrong)
    print(json.dumps(report, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
