"""The local models embedd serves, declared once: each model id's dimension, the
languages it was trained on and the text put before an input of each input_type.

`languages` are ISO 639-1 codes. They are what `/v1/embed/models` lists and what a
client reads to pick a new corpus's model (`lakehouse.wire.models.model_for`) and the
fusion to weigh a corpus's vector layer: a model's vectors are trusted for the languages
it declares. all-MiniLM-L6-v2 was trained on English pairs only (its vectors saw 0.12
hit@3 on Chinese questions); multilingual-e5-small on XLM-RoBERTa's CC-100 languages
(those with an ISO 639-1 code), then on multilingual retrieval pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from internal.embedd.local import MODEL_IDS as MINILM_IDS

E5_LANGUAGES: tuple[str, ...] = (
    "af", "am", "ar", "as", "az", "be", "bg", "bn", "br", "bs", "ca", "cs", "cy", "da",
    "de", "el", "en", "eo", "es", "et", "eu", "fa", "fi", "fr", "fy", "ga", "gd", "gl",
    "gu", "ha", "he", "hi", "hr", "hu", "hy", "id", "is", "it", "ja", "jv", "ka", "kk",
    "km", "kn", "ko", "ku", "ky", "la", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr",
    "ms", "my", "ne", "nl", "no", "om", "or", "pa", "pl", "ps", "pt", "ro", "ru", "sa",
    "sd", "si", "sk", "sl", "so", "sq", "sr", "su", "sv", "sw", "ta", "te", "th", "tl",
    "tr", "ug", "uk", "ur", "uz", "vi", "xh", "yi", "zh",
)
E5_ID = "multilingual-e5-small-int8"  # e5_build.NUMERICS[0]


@dataclass(frozen=True)
class Spec:
    id: str
    dim: int
    languages: tuple[str, ...]
    # input_type ("query" | "document") -> the text put before each input
    prefixes: Mapping[str, str] = field(default_factory=dict)


SPECS: dict[str, Spec] = {
    **{mid: Spec(mid, 384, ("en",)) for mid in MINILM_IDS.values()},
    E5_ID: Spec(E5_ID, 384, E5_LANGUAGES, {"query": "query: ", "document": "passage: "}),
}
