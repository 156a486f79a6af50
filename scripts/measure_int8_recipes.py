"""int8 recipes for the local MiniLM side by side: batch independence, cosine to float32, speed at bulk.

    nice -n 5 taskset -c 1 python scripts/measure_int8_recipes.py --model-cache DIR [--docs 210] [--rounds 2]
        [--calibration-docs 150] [--candidates a,b,...] [--alone 120] [--json]

Every candidate is built here, in a temporary folder, from the verified fused float32 export in --model-cache
(tools/onnx_export.py's `onnx` file, checked against its manifest): `dynamic` (today's `onnx-int8` recipe,
run batched, as a speed reference only: its activation scales are per batch), static QDQ / QOperator int8
with MinMax, Percentile or Entropy activation scales calibrated on SciFact chunk texts of documents that are
not measured, with or without the feed-forward output MatMuls kept float32, and weight-only 8-bit
MatMulNBits (block-wise int8 weights; accuracy level 4 computes with int8 activations quantised per row and
block, i.e. per token, so no scale spans a batch).

Measured texts: the first --docs SciFact abstracts cut as kbbot cuts them (180/24 windows, "title\\nchunk").
For each candidate: cosine of each text's vector to float32's (min, p1, mean); batch independence as the
largest |difference| between a text's vector alone (one text, no padding) and the same text inside length-sorted
batches of 64 (padded to the batch's longest) and inside shuffled batches of 64 (much padding); texts/s and word
pieces/s of a bulk encode (all texts, sorted longest first, batches of 64), the candidates and torch
(sentence-transformers, batch 64) interleaved round by round so a change of load hits them alike. Sessions
run one intra-op thread and torch one thread; run the script pinned to one core (taskset) for fair figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATASETS = REPO.parent / "shared" / "datasets"
if not DATASETS.is_dir():
    DATASETS = Path("/work/shared/datasets")
BATCH = 64
# Calibration documents start here, past every measured document (SciFact has 5,183).
CALIBRATION_FIRST_DOC = 3000
CANDIDATES = (
    "dynamic",
    "static-minmax",
    "static-minmax-ffnout-float",
    "static-percentile",
    "static-percentile-ffnout-float",
    "static-entropy",
    "static-minmax-ffnout-nbits",
    "static-percentile-ffnout-nbits",
    "qop-minmax-ffnout-float",
    "qop-percentile",
    "nbits8-acc4-b16",
    "nbits8-acc4-b32",
    "nbits8-acc4-b64",
    "nbits8-acc4-b128",
    "nbits8-acc0-b128",
)
# Timed only (vectors as `dynamic`'s when alone): today's shipped int8, one text per forward pass.
PER_TEXT = "dynamic-per-text"


def chunk_texts(dataset: str, first: int, limit: int, tokenize: Callable[[str], list]) -> list[str]:
    from llama_index.core.node_parser import SentenceSplitter

    from bot.eval.datasets import load_beir
    from tools.chunking import CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS

    corpus = load_beir(DATASETS / dataset).corpus
    splitter = SentenceSplitter(chunk_size=CHUNK_TOKENS, chunk_overlap=CHUNK_OVERLAP_TOKENS, tokenizer=tokenize)
    texts = []
    for title, text in list(corpus.values())[first : first + limit]:
        texts += [f"{title}\n{piece}" for piece in splitter.split_text(text) if piece.strip()]
    return texts


def verified_float32(model_cache: Path) -> bytes:
    from tools.embeddings import MINILM_SHA256
    from tools.onnx_export import EXPORT_DIR_NAME, FILE_NAMES, read_verified

    data = read_verified(model_cache / EXPORT_DIR_NAME / FILE_NAMES["onnx"], MINILM_SHA256, "onnx")
    if data is None:
        raise SystemExit(f"no verified float32 export under {model_cache}")
    return data


def unpadded_feeds(encodings) -> list[dict[str, np.ndarray]]:
    from tools.onnx_export import INPUT_NAMES

    feeds = []
    for encoding in encodings:
        arrays = (encoding.ids, encoding.attention_mask, encoding.type_ids)
        feeds.append({name: np.asarray([a], dtype=np.int64) for name, a in zip(INPUT_NAMES, arrays, strict=True)})
    return feeds


def flatten_histogram_inputs() -> None:
    """onnxruntime 1.32's histogram collector stacks each tensor's calibration outputs with np.asarray, which fails
    for unpadded texts of different lengths; a histogram does not need the shapes, so hand it one flat array."""
    from onnxruntime.quantization import calibrate

    original = calibrate.HistogramCollector.collect

    def collect(self, name_to_arr):
        flat = {}
        for name, arrays in name_to_arr.items():
            if isinstance(arrays, list):
                arrays = np.concatenate([np.asarray(a).ravel() for a in arrays])
            flat[name] = arrays
        return original(self, flat)

    calibrate.HistogramCollector.collect = collect


def ffn_output_matmuls(model_path: Path) -> list[str]:
    import onnx

    names = [
        node.name
        for node in onnx.load(str(model_path)).graph.node
        if node.op_type == "MatMul" and "/output/dense" in node.name and "/attention/" not in node.name
    ]
    if len(names) != 6:
        raise SystemExit(f"expected one feed-forward output MatMul per layer, found {len(names)}")
    return names


def build_dynamic(source: Path, target: Path) -> None:
    from tools.onnx_export import _quantize_int8

    _quantize_int8(source, target)


def build_static(typed: Path, target: Path, feeds: list[dict], method: str, exclude: list[str], qoperator: bool):
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self._feeds = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self._feeds, None)

    methods = {
        "minmax": CalibrationMethod.MinMax,
        "percentile": CalibrationMethod.Percentile,
        "entropy": CalibrationMethod.Entropy,
    }
    quantize_static(
        str(typed),
        str(target),
        Calibration(),
        quant_format=QuantFormat.QOperator if qoperator else QuantFormat.QDQ,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=exclude,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=methods[method],
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    graph = onnx.load(str(target)).graph
    fixed = sum(node.op_type in ("QuantizeLinear", "QLinearMatMul") for node in graph.node)
    dynamic = sum(node.op_type == "DynamicQuantizeLinear" for node in graph.node)
    if not fixed or dynamic:
        raise SystemExit(f"{target.name}: {fixed} fixed-scale and {dynamic} dynamic quantisations")


def build_nbits(source: Path, target: Path, block_size: int, accuracy_level: int, expected: int = 18) -> None:
    """Each MatMul with a constant 2-D weight becomes MatMulNBits with 8-bit symmetric block-wise weights (the
    quantiser's own C++ kernel; its Python wrapper needs onnx_ir, which kbbot does not ship)."""
    import onnx
    from onnx import numpy_helper
    from onnxruntime.capi._pybind_state import quantize_matmul_8bits

    model = onnx.load(str(source))
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    nodes = []
    replaced = 0
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        matrix = numpy_helper.to_array(weight).astype(np.float32)
        rows, cols = matrix.shape
        k_blocks = (rows + block_size - 1) // block_size
        padded = np.pad(matrix, ((0, k_blocks * block_size - rows), (0, 0)))
        packed = np.zeros((cols, k_blocks, block_size), dtype=np.uint8)
        scales = np.zeros((cols, k_blocks), dtype=np.float32)
        zero_points = np.zeros((cols, k_blocks), dtype=np.uint8)
        quantize_matmul_8bits(packed, np.ascontiguousarray(padded), scales, zero_points, block_size, cols, rows, True)
        packed_name, scales_name = f"{weight.name}_Q8", f"{weight.name}_scales"
        graph.initializer.extend(
            [numpy_helper.from_array(packed, packed_name), numpy_helper.from_array(scales, scales_name)]
        )
        attributes = {"K": rows, "N": cols, "bits": 8, "block_size": block_size}
        if accuracy_level:
            attributes["accuracy_level"] = accuracy_level
        nodes.append(
            onnx.helper.make_node(
                "MatMulNBits",
                [node.input[0], packed_name, scales_name],
                [node.output[0]],
                name=f"{node.name}_Q8",
                domain="com.microsoft",
                **attributes,
            )
        )
        replaced += 1
    if replaced != expected:
        raise SystemExit(f"{target.name}: {replaced} MatMulNBits, expected {expected}")
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.save(model, str(target))


def build(name: str, work: Path, source: Path, typed: Path, feeds: list[dict]) -> Path:
    target = work / f"{name}.onnx"
    exclude = ffn_output_matmuls(typed) if "-ffnout-" in name else []
    if name == "dynamic":
        build_dynamic(source, target)
    elif name.endswith("-ffnout-nbits"):
        # Static scales everywhere but the feed-forward outputs, whose heavy-tailed GELU inputs get int8 per token.
        method = name.split("-")[1]
        mixed = work / f"{name}-static.onnx"
        build_static(typed, mixed, feeds, method, exclude, qoperator=False)
        build_nbits(mixed, target, 64, 4, expected=len(exclude))
    elif name.startswith(("static-", "qop-")):
        method = name.split("-")[1]
        build_static(typed, target, feeds, method, exclude, qoperator=name.startswith("qop-"))
    elif name.startswith("nbits8-"):
        _, accuracy, block = name.split("-")
        build_nbits(source, target, int(block[1:]), int(accuracy[3:]))
    else:
        raise SystemExit(f"unknown candidate {name}")
    return target


def session(model: bytes | str):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def encode(run, encodings, batches: Sequence[Sequence[int]]) -> np.ndarray:
    """Each text's mean-pooled, normalised vector, the texts run in the given batches (padded to each one's longest)."""
    from tools.onnx_minilm import _feeds

    vectors = np.zeros((len(encodings), 384), dtype=np.float32)
    for batch in batches:
        order = sorted(batch, key=lambda i: -len(encodings[i].ids))  # _feeds pads to the first text's length
        feeds = _feeds(order, encodings)
        (tokens,) = run.run(None, feeds)
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (tokens * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        vectors[order] = pooled
    return vectors


def sorted_batches(encodings) -> list[list[int]]:
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids), reverse=True)
    return [order[first : first + BATCH] for first in range(0, len(order), BATCH)]


def cosine_summary(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    cosines = (a * b).sum(axis=1)
    return {
        "min": round(float(cosines.min()), 6),
        "p1": round(float(np.percentile(cosines, 1)), 6),
        "mean": round(float(cosines.mean()), 6),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-cache", type=Path, required=True, help="holds the verified float32 export")
    parser.add_argument("--docs", type=int, default=210, help="SciFact abstracts to measure (~2.4 chunks each)")
    parser.add_argument(
        "--calibration-docs", type=int, default=150, help=f"SciFact abstracts from #{CALIBRATION_FIRST_DOC}"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--alone", type=int, default=120, help="texts also encoded alone, for batch independence")
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--keep", type=Path, help="copy the built candidates here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [c for c in args.candidates.split(",") if c]
    if unknown := set(names) - set(CANDIDATES):
        parser.error(f"unknown candidates: {', '.join(sorted(unknown))}")

    import logging

    import torch
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from tokenizers import Tokenizer

    from tools.embeddings import MINILM_MAX_TOKENS, LocalMiniLM, verified_model_dir

    logging.getLogger().setLevel(logging.ERROR)
    torch.set_num_threads(1)
    model_dir = verified_model_dir()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MINILM_MAX_TOKENS)
    counter = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    counter.no_padding()
    counter.no_truncation()

    def tokenize(text: str) -> list:
        return counter.encode(text, add_special_tokens=False).tokens

    texts = chunk_texts("scifact", 0, args.docs, tokenize)
    calibration = chunk_texts("scifact", CALIBRATION_FIRST_DOC, args.calibration_docs, tokenize)
    encodings = tokenizer.encode_batch([t.strip() for t in texts])
    calibration_feeds = unpadded_feeds(tokenizer.encode_batch([t.strip() for t in calibration]))
    word_pieces = sum(len(e.ids) for e in encodings)
    flatten_histogram_inputs()

    float32_bytes = verified_float32(args.model_cache)
    result: dict = {
        "texts": len(texts),
        "word_pieces": word_pieces,
        "calibration_texts": len(calibration),
        "loadavg": [round(os.getloadavg()[0], 2)],
        "affinity": sorted(os.sched_getaffinity(0)),
        "build_s": {},
        "candidates": {},
    }
    with tempfile.TemporaryDirectory(prefix="int8-recipes-") as folder:
        work = Path(folder)
        source = work / "float32.onnx"
        source.write_bytes(float32_bytes)
        typed = work / "typed.onnx"
        # Symbolic shape inference types the fused operators' outputs: without it static quantisation cannot
        # type the MatMuls' inputs and leaves every activation float.
        quant_pre_process(str(source), str(typed), skip_optimization=True, skip_symbolic_shape=False)
        models: dict[str, bytes] = {"float32": float32_bytes}
        for name in names:
            begun = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):  # the calibrator prints its progress to stdout
                path = build(name, work, source, typed, calibration_feeds)
            result["build_s"][name] = round(time.perf_counter() - begun, 1)
            models[name] = path.read_bytes()
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / path.name).write_bytes(models[name])
            print(f"built {name} in {result['build_s'][name]} s", file=sys.stderr, flush=True)
    sessions = {name: session(data) for name, data in models.items()}
    bulk = sorted_batches(encodings)
    vectors = {name: encode(run, encodings, bulk) for name, run in sessions.items()}
    generator = np.random.default_rng(14)
    shuffled_order = generator.permutation(len(encodings)).tolist()
    shuffled = [shuffled_order[first : first + BATCH] for first in range(0, len(encodings), BATCH)]
    alone_ids = generator.choice(len(encodings), size=min(args.alone, len(encodings)), replace=False).tolist()
    for name, run in sessions.items():
        alone = encode(run, encodings, [[i] for i in alone_ids])
        mixed = encode(run, encodings, shuffled)
        result["candidates"][name] = {
            "cosine_to_float32": cosine_summary(vectors[name], vectors["float32"]),
            "max_abs_alone_vs_sorted_batch": float(np.abs(alone[alone_ids] - vectors[name][alone_ids]).max()),
            "max_abs_alone_vs_shuffled_batch": float(np.abs(alone[alone_ids] - mixed[alone_ids]).max()),
            "min_cosine_alone_vs_batch": round(
                float((alone[alone_ids] * vectors[name][alone_ids]).sum(axis=1).min()), 7
            ),
            "texts_per_s": [],
            "word_pieces_per_s": [],
        }
        print(f"checked {name}", file=sys.stderr, flush=True)

    torch_model = LocalMiniLM()
    torch_vectors = torch_model.embed_documents(texts)
    result["torch_cosine_to_float32"] = cosine_summary(torch_vectors, vectors["float32"])
    result["candidates"]["torch"] = {"texts_per_s": [], "word_pieces_per_s": []}
    timed: dict[str, Callable[[], object]] = {"torch": lambda: torch_model.embed_documents(texts)}
    for name, run in sessions.items():
        timed[name] = lambda run=run: encode(run, encodings, bulk)
    if "dynamic" in sessions:
        one_by_one = [[i] for batch in bulk for i in batch]
        timed[PER_TEXT] = lambda: encode(sessions["dynamic"], encodings, one_by_one)
        result["candidates"][PER_TEXT] = {"texts_per_s": [], "word_pieces_per_s": []}
    for _ in range(args.rounds):
        for name, job in timed.items():
            begun = time.perf_counter()
            job()
            seconds = time.perf_counter() - begun
            entry = result["candidates"][name]
            entry["texts_per_s"].append(round(len(texts) / seconds, 2))
            entry["word_pieces_per_s"].append(round(word_pieces / seconds))
        result["loadavg"].append(round(os.getloadavg()[0], 2))
        print(f"round done, load {result['loadavg'][-1]}", file=sys.stderr, flush=True)
    float32_speeds = result["candidates"]["float32"]["texts_per_s"]
    torch_speeds = result["candidates"]["torch"]["texts_per_s"]
    for entry in result["candidates"].values():
        speeds = entry["texts_per_s"]
        entry["vs_float32_per_round"] = [round(a / b, 3) for a, b in zip(speeds, float32_speeds, strict=True)]
        entry["vs_torch_per_round"] = [round(a / b, 3) for a, b in zip(speeds, torch_speeds, strict=True)]
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
