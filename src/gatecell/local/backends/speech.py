"""Offline text to speech: real spoken audio from espeak-ng, the stand-in for a TTS model.

The `espeakng-loader` wheel ships libespeak-ng and its voice data, so nothing is installed
system-wide. The library is driven through ctypes in synchronous mode: `espeak_Synth` runs the
synthesis on the calling thread and hands 16-bit mono samples to a callback. libespeak-ng keeps
global state and is not reentrant, so one lock serialises initialisation and every synthesis.

espeak-ng carries state from one utterance to the next, so two measures make it repeat itself:
both random generators it draws breath noise from are reseeded before each utterance, and each
public voice uses a copy of its espeak variant with pitch flutter and roughness turned off,
because their phase counters are process-wide statics that no API call resets. The copies live
in a private overlay of the data directory (links to the shipped files).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import tempfile
import threading
from typing import NamedTuple

from ._wav import wav

__all__ = ["VOICES", "FORMATS", "MIME", "MAX_CHARS", "synthesize"]


class Voice(NamedTuple):
    """An espeak-ng language and variant (a file of voices/!v) with pitch (0..100) and rate (words/min)."""

    language: str
    variant: str
    pitch: int
    rate: int


VOICES: dict[str, Voice] = {
    "alloy": Voice("en-us", "f2", 55, 175),
    "ash": Voice("en-us", "m2", 40, 180),
    "ballad": Voice("en-gb-x-rp", "m5", 45, 150),
    "coral": Voice("en-us", "f4", 62, 170),
    "echo": Voice("en-us", "m1", 35, 165),
    "fable": Voice("en-gb-x-rp", "m3", 50, 160),
    "nova": Voice("en-us", "f3", 70, 185),
    "onyx": Voice("en-us", "m7", 20, 155),
    "sage": Voice("en", "f1", 50, 165),
    "shimmer": Voice("en", "f5", 75, 180),
    "verse": Voice("en-us", "m3", 50, 190),
}
MIME = {"wav": "audio/wav", "mp3": "audio/mpeg", "pcm": "audio/pcm"}
FORMATS = frozenset(MIME)
MAX_CHARS = 4096

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_CHARS_UTF8 = 1
_POS_CHARACTER = 1
_RATE, _VOLUME, _PITCH = 1, 2, 3
_STEADY = "\nflutter 0\nroughness 8\n"  # appended to each variant; 8 is past the roughness table
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)

_lock = threading.Lock()
_engine: _Engine | None = None


def synthesize(text: str, voice: str, fmt: str = "wav") -> bytes:
    """Speak `text` in `voice`; WAV (16-bit mono), MP3 or raw 16-bit little-endian PCM bytes."""
    if voice not in VOICES:
        raise ValueError(f"unknown voice {voice!r}; choose one of: {', '.join(sorted(VOICES))}")
    if fmt not in FORMATS:
        raise ValueError(f"unsupported response_format {fmt!r}; choose one of: {', '.join(sorted(FORMATS))}")
    if not text.strip():
        raise ValueError("input text is empty")
    if len(text) > MAX_CHARS:
        raise ValueError(f"input text is {len(text)} characters; the limit is {MAX_CHARS}")
    with _lock:
        engine = _started()
        pcm = engine.speak(text, VOICES[voice])
    if fmt == "pcm":
        return pcm
    if fmt == "mp3":
        return _mp3(pcm, engine.rate)
    return wav(pcm, engine.rate)


class _Engine:
    """The loaded library, its output sample rate and the callback that collects samples."""

    def __init__(self) -> None:
        import espeakng_loader

        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        data = _steady_data(espeakng_loader.get_data_path())
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data.encode(), _INITIALIZE_DONT_EXIT)
        if rate <= 0:
            raise RuntimeError(f"espeak-ng failed to initialise (code {rate})")
        self.lib, self.rate = lib, rate
        self._libc = ctypes.CDLL(None)
        self._chunks: list[bytes] = []
        self._callback = _CALLBACK(self._collect)  # kept alive: the library holds the pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, samples, count: int, _events) -> int:
        if samples and count > 0:
            self._chunks.append(ctypes.string_at(samples, count * 2))
        return 0  # 0 = go on synthesising

    def speak(self, text: str, voice: Voice) -> bytes:
        """16-bit mono PCM of `text`; the caller holds the lock."""
        name = f"{voice.language}+gatecell-{voice.variant}"
        if self.lib.espeak_SetVoiceByName(name.encode()) != 0:
            raise RuntimeError(f"espeak-ng has no voice {name!r}")
        for parameter, value in ((_RATE, voice.rate), (_PITCH, voice.pitch), (_VOLUME, 100)):
            self.lib.espeak_SetParameter(parameter, value, 0)
        data = text.encode("utf-8")
        self._chunks = []
        self.lib.espeak_ng_SetRandSeed(0)  # breath noise comes from both generators
        self._libc.srand(0)
        status = self.lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        if status != 0:
            raise RuntimeError(f"espeak-ng synthesis failed (code {status})")
        pcm, self._chunks = b"".join(self._chunks), []
        return pcm


def _started() -> _Engine:
    global _engine
    if _engine is None:
        _engine = _Engine()
    return _engine


def _steady_data(source: str) -> str:
    """A private data directory: links to espeak-ng's files plus our steady voice variants."""
    root = tempfile.mkdtemp(prefix="gatecell-espeak-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for entry in os.listdir(source):
        if entry != "voices":
            os.symlink(os.path.join(source, entry), os.path.join(root, entry))
    variants = os.path.join(root, "voices", "!v")
    os.makedirs(variants)
    for variant in {v.variant for v in VOICES.values()}:
        with open(os.path.join(source, "voices", "!v", variant), encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(variants, f"gatecell-{variant}"), "w", encoding="utf-8") as f:
            f.write(text + _STEADY)
    return root


def _mp3(pcm: bytes, rate: int) -> bytes:
    import lameenc

    encoder = lameenc.Encoder()
    encoder.set_bit_rate(64)
    encoder.set_in_sample_rate(rate)
    encoder.set_channels(1)
    encoder.set_quality(5)  # 2 is slower by half for no audible gain on speech
    return bytes(encoder.encode(pcm) + encoder.flush())
