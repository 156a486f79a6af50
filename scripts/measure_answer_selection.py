"""Which sentence-scoring the offline answer should use: SQuAD 2.0 answerable questions, same evidence.

    .venv/bin/python scripts/measure_answer_selection.py [--data-dir /tmp/kbbot-squad-answers]

Ingests the 411 paragraphs of ../shared/datasets/squad2-sample once (the normal pipeline), then for
every answerable question takes the evidence the engine would answer from (hybrid search, then
`select_evidence`) and writes the extractive answer four ways:

- lexical: rare-term overlap, answer type, chunk rank only (no sentence vectors)
- encoded: + meaning, each candidate sentence encoded at answer time (what kbbot did before v5)
- pooled: + meaning, sentence vectors pooled at ingest from the chunk's own pass (what kbbot does)
- pooled, contrast ×2: the pooled vectors pushed away from their chunk's vector (an alternative tried)

Printed: the share of answers whose text contains a gold answer string, and the mean answer-step time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATASET = REPO.parent / "shared" / "datasets" / "squad2-sample"
KB = "squad"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/kbbot-squad-answers"))
    args = parser.parse_args()

    from bot.agent import answering
    from bot.config import Settings
    from tools.search import HybridSearcher
    from tools.service import KnowledgeService

    manifests = args.data_dir / "no-declared-kbs"
    manifests.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        _env_file=None,
        KBBOT_DATA_DIR=args.data_dir,
        KBBOT_KNOWLEDGE_BASES_DIR=manifests,
        OPENAI_API_KEY=None,
        OPENAI_BASE_URL=None,
        CHROMA_HOST=None,
    )
    service = KnowledgeService(settings.tools)
    rows = [json.loads(line) for line in (DATASET / "questions.jsonl").open(encoding="utf-8")]
    paragraphs = sorted({r["context"] for r in rows})
    if service.store.registry.get_kb(KB) is None:
        service.create_kb(KB, "Wikipedia paragraphs")
        service.ingestor.ingest_texts(KB, [(f"p{i}.txt", "Paragraph", p) for i, p in enumerate(paragraphs)])
    embedder = service.embedder
    searcher = HybridSearcher(service.store, embedder)

    answerable = [r for r in rows if not r["is_impossible"]]
    hits = {name: 0 for name in ("lexical", "encoded", "pooled", "pooled, contrast ×2")}
    seconds = dict.fromkeys(hits, 0.0)
    for row in answerable:
        question = row["question"]
        evidence = answering.select_evidence(searcher.search(question, KB).evidence)
        query_vector = embedder.embed_query(question)
        chunks = [e.chunk for e in evidence]
        pooled = service.store.unit_vectors(embedder.model_name, embedder.dimension, chunks)
        chunk_vectors = {
            c.chunk_id: v for c, v in service.store.get_chunks_with_vectors(KB, [c.chunk_id for c in chunks])
        }
        contrast = {}
        for chunk_id, units in pooled.items():
            pushed = chunk_vectors[chunk_id] + 2 * (units - chunk_vectors[chunk_id])
            contrast[chunk_id] = pushed / np.linalg.norm(pushed, axis=1, keepdims=True)
        variants = {
            "lexical": {},
            "encoded": {"query_vector": query_vector, "embed": embedder.embed_documents},
            "pooled": {"query_vector": query_vector, "embed": embedder.embed_documents, "unit_vectors": pooled},
            "pooled, contrast ×2": {
                "query_vector": query_vector,
                "embed": embedder.embed_documents,
                "unit_vectors": contrast,
            },
        }
        for name, options in variants.items():
            started = time.perf_counter()
            draft = answering.extractive_answer(question, evidence, **options)
            seconds[name] += time.perf_counter() - started
            text = (draft.text if draft else "").lower()
            hits[name] += any(answer.lower() in text for answer in row["answers"])
    print(f"{len(answerable)} answerable SQuAD 2.0 questions; answer text contains a gold answer:")
    for name in hits:
        print(
            f"  {name:22s} {hits[name] / len(answerable):.3f}   "
            f"answer step mean {1000 * seconds[name] / len(answerable):.1f} ms"
        )


if __name__ == "__main__":
    main()
