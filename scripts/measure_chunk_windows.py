"""What each chunk window makes of a BEIR corpus, without embedding it: chunks per document and the word pieces the
model would read (header + text + [CLS]/[SEP], cut at its window — the count `kbbot eval retrieval` reports as
`word_pieces_kbbot`), beside the bare encode's (each document as one text, cut at the window).

    python scripts/measure_chunk_windows.py --dataset scifact --sample 300 --windows 180/24,220/24,230/16,240/0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.eval.datasets import load_beir, resolve  # noqa: E402
from bot.eval.retrieval import records_of  # noqa: E402
from tools.chunking import SPECIAL_TOKENS, ChunkWindow, chunk_document, chunk_header  # noqa: E402
from tools.embeddings import MINILM_MAX_TOKENS, verified_model_dir  # noqa: E402
from tools.parsing import ParsedDocument, Section  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--sample", type=int, default=300, help="the first N documents, as the ingest probe (0: all)")
    parser.add_argument("--windows", default="180/24,220/24,230/16,240/0", help="chunk/overlap pairs")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(verified_model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def tokenize(text: str) -> list:
        return tokenizer.encode(text, add_special_tokens=False).tokens

    def read(pieces: int) -> int:
        return min(pieces + SPECIAL_TOKENS, MINILM_MAX_TOKENS)

    records = records_of(load_beir(resolve(args.dataset)))
    records = records[: args.sample] if args.sample else records
    whole = [len(tokenize(f"{title}\n{text}")) for _, title, text in records]
    print(
        json.dumps(
            {
                "dataset": args.dataset,
                "documents": len(records),
                "word_pieces_bare_docs": sum(read(n) for n in whole),
                "word_pieces_whole_documents": sum(n + SPECIAL_TOKENS for n in whole),
                "documents_past_the_window": sum(n + SPECIAL_TOKENS > MINILM_MAX_TOKENS for n in whole),
            }
        ),
        flush=True,
    )
    for spec in args.windows.split(","):
        chunk_tokens, overlap_tokens = (int(part) for part in spec.split("/"))
        window = ChunkWindow(chunk_tokens, overlap_tokens, MINILM_MAX_TOKENS)
        chunks = pieces = truncated = 0
        for _, title, text in records:
            for draft in chunk_document(ParsedDocument(title, [Section(text, title)]), tokenize, window):
                count = len(tokenize(f"{chunk_header(title, draft.location)}\n{draft.text}"))
                truncated += count + SPECIAL_TOKENS > MINILM_MAX_TOKENS
                pieces += read(count)
                chunks += 1
        print(
            json.dumps(
                {
                    "window": window.identity,
                    "chunks": chunks,
                    "chunks_per_document": round(chunks / len(records), 3),
                    "word_pieces": pieces,
                    "truncated_chunks": truncated,
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
