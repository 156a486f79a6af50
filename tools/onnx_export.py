"""The local MiniLM as ONNX files, exported here from the verified safetensors weights, never downloaded.

`verified_onnx_model` returns the bytes of a verified export for a runtime (`onnx` = float32,
`onnx-int8` = dynamically quantised weights; both onnxruntime's fused BERT graph, checked against
torch's token embeddings when made). Exports live in the data dir beside a manifest that
records the source weights' sha256, the exporter versions and the exported file's sha256; a file
whose manifest is missing, names other weights or does not hash to what it records is exported
again, and the caller gets the bytes it verified, so nothing unverified is ever loaded.

The export itself runs in a child process (`python -m tools.onnx_export`): it needs torch and
transformers, and the process that serves questions should not carry them. Files are written to a
temporary name and renamed, under a lock, so a second process never sees half a file.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

# ONNX Runtime's Linux builds (1.2x and later) keep a device id and an event queue under ~/.cache/Microsoft and
# upload usage events to Microsoft unless this is set before the library first loads; kbbot reaches no network.
# Every onnxruntime import in tools/ is in this module or tools.onnx_minilm, which imports this one first, and the
# export child inherits the environment.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

EXPORT_DIR_NAME = "all-MiniLM-L6-v2-onnx"
OPSET = 17
# How each file is made; a manifest that names another recipe (an older export or quantisation) is exported
# again. float32: traced with eager attention, then onnxruntime's transformer fusions (Attention, LayerNorm,
# GELU, skip-LayerNorm); int8: that fused graph, its MatMuls quantised per channel.
RECIPES = {
    "onnx": "torchscript-opset17-eager-attention+ort-bert-fusion",
    "onnx-int8": "fused+dynamic-qint8-matmul-per-channel",
}
# The fused graph must compute the traced encoder's token embeddings: a per-token cosine to torch's last
# hidden state below this (over real, unpadded positions of a padded batch) fails the export.
FUSION_MIN_TOKEN_COSINE = 0.99999
MINILM_HEADS = 12
MINILM_HIDDEN = 384
FILE_NAMES = {"onnx": "model.onnx", "onnx-int8": "model-int8.onnx"}
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]
OUTPUT_NAME = "token_embeddings"
# A first export imports torch and traces the model: ~30 s on an idle 2-core machine, more under load.
EXPORT_TIMEOUT_S = 900


def recipes_digest() -> str:
    """A short name for the current recipes (a cache shared by checkouts of different versions keys on it)."""
    return hashlib.sha256(json.dumps(RECIPES, sort_keys=True).encode()).hexdigest()[:10]


class OnnxExportError(RuntimeError):
    """No verified ONNX export can be had; the message says why and what to do."""


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_path(model_file: Path) -> Path:
    return model_file.with_name(model_file.name + ".json")


def read_verified(model_file: Path, source_sha256: str, runtime: str) -> bytes | None:
    """The file's bytes when its manifest names these source weights, this runtime and its current recipe,
    and the bytes hash as it records; else None."""
    try:
        manifest = json.loads(manifest_path(model_file).read_text(encoding="utf-8"))
        data = model_file.read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("source_sha256") != source_sha256:
        return None
    if manifest.get("runtime") != runtime or manifest.get("recipe") != RECIPES[runtime]:
        return None
    if manifest.get("file_sha256") != _sha256_bytes(data):
        return None
    return data


def _write_atomically(target: Path, data: bytes) -> None:
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)  # mkstemp makes it private; the export is no secret
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _publish(
    model_file: Path,
    data: bytes,
    source_sha256: str,
    versions: dict[str, str],
    runtime: str,
    checks: dict | None = None,
) -> None:
    """Model first, manifest last: a crash in between leaves a model without a matching manifest (re-exported)."""
    manifest = {
        "runtime": runtime,
        "recipe": RECIPES[runtime],
        "source_sha256": source_sha256,
        "file_sha256": _sha256_bytes(data),
        "opset": OPSET,
        "exporter_versions": versions,
        "checks": checks or {},
    }
    manifest_path(model_file).unlink(missing_ok=True)
    _write_atomically(model_file, data)
    _write_atomically(manifest_path(model_file), json.dumps(manifest, indent=2).encode())


@contextmanager
def _export_lock(export_dir: Path):
    export_dir.mkdir(parents=True, exist_ok=True)
    with (export_dir / ".export.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def verified_onnx_model(cache_dir: Path, model_dir: Path, source_sha256: str, runtime: str) -> bytes:
    """The verified ONNX bytes for `runtime`, exporting them first when no verified copy is cached.

    `model_dir` holds weights the caller has verified against `source_sha256`."""
    if runtime not in FILE_NAMES:
        raise OnnxExportError(f"unknown ONNX runtime {runtime!r} (choose one of {', '.join(FILE_NAMES)})")
    export_dir = cache_dir / EXPORT_DIR_NAME
    model_file = export_dir / FILE_NAMES[runtime]
    data = read_verified(model_file, source_sha256, runtime)
    if data is not None:
        return data
    try:
        with _export_lock(export_dir):
            data = read_verified(model_file, source_sha256, runtime)  # another process may have exported meanwhile
            if data is not None:
                return data
            _export_in_child(model_dir, export_dir, source_sha256, runtime)
            data = read_verified(model_file, source_sha256, runtime)
    except OSError as exc:
        log.warning("cannot write the ONNX export under %s: %s", export_dir, exc)
        raise OnnxExportError(
            f"cannot write the ONNX export of the embedding model under {export_dir}: make it writable, point "
            "KBBOT_MODEL_CACHE_DIR elsewhere, or set KBBOT_LOCAL_RUNTIME=torch"
        ) from exc
    if data is None:
        raise OnnxExportError(
            f"the ONNX export at {model_file} does not verify right after exporting it; "
            "set KBBOT_LOCAL_RUNTIME=torch to run without ONNX"
        )
    return data


def _export_in_child(model_dir: Path, export_dir: Path, source_sha256: str, runtime: str) -> None:
    command = [
        sys.executable,
        "-m",
        "tools.onnx_export",
        "--model-dir",
        str(model_dir),
        "--out-dir",
        str(export_dir),
        "--source-sha256",
        source_sha256,
        "--runtime",
        runtime,
    ]
    # The child must import this very tools package, wherever the parent found it.
    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise OnnxExportError(
            f"exporting the embedding model to ONNX took over {EXPORT_TIMEOUT_S} s; "
            "set KBBOT_LOCAL_RUNTIME=torch to run without ONNX"
        ) from exc
    if done.returncode != 0:
        log.warning("ONNX export exited %s: %s", done.returncode, (done.stderr or "").strip()[-2000:])
        raise OnnxExportError(
            "exporting the embedding model to ONNX failed (details in the log); "
            "set KBBOT_LOCAL_RUNTIME=torch to run without ONNX"
        )


def _load_encoder(model_dir: Path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.utils.logging.disable_progress_bar()
    # Eager attention: its matrix products and softmax are the pattern onnxruntime's fusion recognises;
    # the default (scaled_dot_product_attention) traces to a graph whose attention it cannot fuse.
    return transformers.AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    ).eval()


def _trace_float32(encoder, target: Path) -> dict[str, str]:
    """Trace the BERT encoder to ONNX: token ids, mask, type ids in; the last hidden state out."""
    import torch
    import transformers

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self, encoder: torch.nn.Module):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask, token_type_ids):
            outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return outputs.last_hidden_state

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in range(2)) + (torch.zeros(2, 8, dtype=torch.long),)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*INPUT_NAMES, OUTPUT_NAME]}
    with torch.no_grad():
        # The TorchScript exporter: the torch.export one needs onnxscript, which kbbot does not ship.
        # eval(): the exporter restores the wrapper's training mode afterwards, and a fresh module's is "train",
        # which would leave the encoder's dropout on for the check below.
        torch.onnx.export(
            TokenEmbeddings(encoder).eval(),
            example,
            str(target),
            input_names=INPUT_NAMES,
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    return {"torch": torch.__version__, "transformers": transformers.__version__}


def _fuse(source: Path, target: Path) -> dict[str, int]:
    """onnxruntime's BERT fusions, in Python only (opt_level 0: no hardware-specific kernels baked in; the
    session applies its own optimisations at load). Returns the fused operators' counts."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(source), model_type="bert", num_heads=MINILM_HEADS, hidden_size=MINILM_HIDDEN, opt_level=0
    )
    optimized.save_model_to_file(str(target))
    return {name: count for name, count in optimized.get_fused_operator_statistics().items() if count}


def _check_token_embeddings(encoder, model_file: Path) -> float:
    """The lowest per-token cosine between the ONNX graph's output and torch's last hidden state, over the real
    positions of a padded batch of mixed lengths (the positions span pooling reads). Raises below the bar."""
    import numpy as np
    import onnxruntime
    import torch

    session = onnxruntime.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    if names != INPUT_NAMES or outputs != [OUTPUT_NAME]:
        raise RuntimeError(f"the fused graph takes {names} and gives {outputs}")
    generator = np.random.default_rng(12)
    lengths = [3, 17, 64, 130, 256]
    input_ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = generator.integers(1000, 30000, size=length)
        input_ids[row, 0], input_ids[row, length - 1] = 101, 102  # [CLS] … [SEP]
        mask[row, :length] = 1
    types = np.zeros_like(input_ids)
    feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}
    with torch.no_grad():
        reference = encoder(**{name: torch.from_numpy(a) for name, a in feeds.items()}).last_hidden_state.numpy()
    (fused,) = session.run(None, feeds)
    real = mask.astype(bool)
    a, b = fused[real], reference[real]
    cosines = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    lowest = float(cosines.min())
    if not lowest >= FUSION_MIN_TOKEN_COSINE:
        raise RuntimeError(f"the fused graph's token embeddings differ from torch's (cosine {lowest:.7f})")
    return lowest


def _export_float32(model_dir: Path, work: Path, target: Path) -> tuple[dict[str, str], dict]:
    """Trace, fuse and check: the fused graph at `target`, the exporters' versions and what the check found."""
    import onnxruntime

    encoder = _load_encoder(model_dir)
    traced = work / "traced.onnx"
    versions = _trace_float32(encoder, traced) | {"onnxruntime": onnxruntime.__version__}
    fused_operators = _fuse(traced, target)
    checks = {"fused_operators": fused_operators, "min_token_cosine_to_torch": _check_token_embeddings(encoder, target)}
    return versions, checks


def _quantize_int8(source: Path, target: Path) -> dict[str, str]:
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process applies to conv nets

    # Per-channel weight scales on the matrix products only: with one scale per tensor (the default) the
    # vectors' cosine to float32 drops to ~0.94 on SciFact chunks, per channel it is ~0.99 (docs/benchmarks.md).
    # The fused graph's Attention stays float32 (its QKV product is in it): quantising it too (QAttention)
    # moved vectors further from torch's (docs/benchmarks.md, session 7). Shape inference cannot type the
    # outputs of the fused (com.microsoft) operators, hence the default tensor type.
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def export(model_dir: Path, export_dir: Path, source_sha256: str, runtime: str) -> None:
    """Export (and for int8 quantise) into `export_dir`; the float32 file is reused when it verifies."""
    import warnings

    warnings.filterwarnings("ignore")  # the tracer's warnings are about control flow MiniLM does not have
    export_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=export_dir, prefix=".export-") as work:
        float32 = export_dir / FILE_NAMES["onnx"]
        base = read_verified(float32, source_sha256, "onnx")
        versions: dict[str, str] = {}
        if base is None:
            fused = Path(work) / "fused.onnx"
            versions, checks = _export_float32(model_dir, Path(work), fused)
            base = fused.read_bytes()
            _publish(float32, base, source_sha256, versions, "onnx", checks)
        if runtime == "onnx-int8":
            source = Path(work) / "float32.onnx"
            source.write_bytes(base)  # the verified bytes, not whatever the path holds now
            quantised = Path(work) / "int8.onnx"
            versions |= _quantize_int8(source, quantised)
            _publish(export_dir / FILE_NAMES["onnx-int8"], quantised.read_bytes(), source_sha256, versions, runtime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export the local MiniLM to ONNX (run by kbbot, not by hand).")
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--source-sha256", required=True)
    parser.add_argument("--runtime", choices=sorted(FILE_NAMES), required=True)
    args = parser.parse_args(argv)
    # The child verifies the weights itself: it trusts no path it was handed.
    weights = args.model_dir / "model.safetensors"
    with weights.open("rb") as handle:
        actual = hashlib.file_digest(handle, "sha256").hexdigest()
    if actual != args.source_sha256:
        print(f"weights at {weights} do not match sha256 {args.source_sha256[:12]}…", file=sys.stderr)
        return 2
    export(args.model_dir, args.out_dir, args.source_sha256, args.runtime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
