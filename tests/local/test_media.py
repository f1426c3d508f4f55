"""The offline media renderers decode as what they claim to be, follow their inputs, and repeat.

Every artefact is decoded by an independent reader (Pillow, the `wave` module, PyAV) rather
than checked by its magic bytes alone.
"""

from __future__ import annotations

import io
import threading
import wave

import av
import numpy as np
import pytest
from PIL import Image

from gatecell.local.backends import image, music, speech, video

SENTENCE = "The quick brown fox jumps over the lazy dog."


def samples(wav_bytes: bytes) -> tuple[np.ndarray, int]:
    with wave.open(io.BytesIO(wav_bytes)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64), w.getframerate()


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x**2)))


def centroid(x: np.ndarray, rate: int) -> float:
    """Spectral centroid in Hz: where the energy of the spectrum sits."""
    spectrum = np.abs(np.fft.rfft(x))
    return float((spectrum * np.fft.rfftfreq(len(x), 1 / rate)).sum() / spectrum.sum())


# image


@pytest.mark.parametrize("size", [(64, 64), (320, 200), (777, 333)])
def test_image_is_a_png_of_exactly_the_size(size):
    data = image.render("a lighthouse in a storm", *size)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(data)) as picture:
        assert picture.format == "PNG"
        assert picture.size == size
        pixels = np.asarray(picture.convert("RGB")).reshape(-1, 3)
    assert len(np.unique(pixels, axis=0)) > 50  # a picture, not a flat fill


def test_image_is_a_function_of_the_prompt():
    assert image.render("a lighthouse", 128, 96) == image.render("a lighthouse", 128, 96)
    one = np.asarray(Image.open(io.BytesIO(image.render("a lighthouse", 128, 96))), dtype=np.int16)
    two = np.asarray(Image.open(io.BytesIO(image.render("a cat on a sofa", 128, 96))), dtype=np.int16)
    assert np.abs(one - two).mean() > 10


def test_image_carries_the_prompt_as_white_text():
    picture = np.asarray(Image.open(io.BytesIO(image.render("sunset over the hills", 256, 256))))
    white = picture.min(axis=2) > 230  # the gradient and shapes are never this pale
    assert white[-48:].sum() > 100
    assert white[:-48].sum() == 0


@pytest.mark.parametrize("size", [(63, 100), (100, 2049), (0, 0), (100.0, 100)])
def test_image_size_out_of_range_is_a_clear_error(size):
    with pytest.raises(ValueError, match=r"from 64 to 2048"):
        image.render("x", *size)


# speech


def test_speech_is_audible_wav_that_grows_with_the_text():
    short, rate = samples(speech.synthesize("Hello.", "alloy"))
    long, _ = samples(speech.synthesize(SENTENCE * 3, "alloy"))
    assert rate == 22050
    assert 0.3 < len(short) / rate < 2.0
    assert 5.0 < len(long) / rate < 20.0
    assert len(long) > 4 * len(short)
    assert rms(short) > 500 and rms(long) > 500


def test_speech_is_deterministic_also_between_voices():
    first = speech.synthesize(SENTENCE, "nova")
    speech.synthesize("Something else entirely, with breath.", "shimmer")
    assert speech.synthesize(SENTENCE, "nova") == first


def test_every_voice_speaks_and_sounds_different():
    clips = {name: speech.synthesize(SENTENCE, name) for name in speech.VOICES}
    assert len(set(clips.values())) == len(clips)
    pitch = {}
    for name, clip in clips.items():
        x, rate = samples(clip)
        assert rms(x) > 500, name
        pitch[name] = centroid(x, rate)
    assert pitch["onyx"] < pitch["nova"]  # the deep voice sits lower than the bright one


def test_speech_mp3_decodes_to_the_same_length():
    wav_x, rate = samples(speech.synthesize(SENTENCE, "echo"))
    mp3 = speech.synthesize(SENTENCE, "echo", "mp3")
    assert mp3[:3] == b"ID3" or (mp3[0] == 0xFF and mp3[1] & 0xE0 == 0xE0)
    with av.open(io.BytesIO(mp3)) as container:
        stream = container.streams.audio[0]
        assert container.format.name == "mp3"
        decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(stream)])
    assert abs(len(decoded) / stream.rate - len(wav_x) / rate) < 0.2
    assert rms(decoded.astype(np.float64) * (32767 if decoded.dtype.kind == "f" else 1)) > 500


def test_speech_pcm_is_the_wav_payload():
    wav_x, _ = samples(speech.synthesize(SENTENCE, "fable"))
    pcm = np.frombuffer(speech.synthesize(SENTENCE, "fable", "pcm"), "<i2")
    assert np.array_equal(pcm, wav_x.astype("<i2"))


def test_speech_from_many_threads_matches_one_thread():
    expected = {v: speech.synthesize(f"Thread test for {v}.", v) for v in ("alloy", "onyx", "sage")}
    got: dict[str, list[bytes]] = {v: [] for v in expected}

    def speak(voice):
        for _ in range(3):
            got[voice].append(speech.synthesize(f"Thread test for {voice}.", voice))

    threads = [threading.Thread(target=speak, args=(v,)) for v in expected for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for voice, clips in got.items():
        assert clips == [expected[voice]] * 6


@pytest.mark.parametrize(
    ("text", "voice", "fmt", "message"),
    [
        ("hi", "alloy", "opus", r"response_format 'opus'.*mp3, pcm, wav"),
        ("hi", "robot", "wav", r"voice 'robot'.*alloy, ash"),
        ("   ", "alloy", "wav", r"empty"),
        ("a" * (speech.MAX_CHARS + 1), "alloy", "wav", r"limit is 4096"),
    ],
)
def test_speech_bad_input_is_a_clear_error(text, voice, fmt, message):
    with pytest.raises(ValueError, match=message):
        speech.synthesize(text, voice, fmt)


# video


def test_video_is_browser_playable_h264_of_the_right_shape():
    data = video.render("waves on a beach", seconds=2.0, width=160, height=120, fps=12)
    assert data[4:8] == b"ftyp"
    assert data.find(b"moov") < data.find(b"mdat")  # faststart: the index comes first
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert (stream.width, stream.height) == (160, 120)
        assert stream.codec_context.pix_fmt == "yuv420p"
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
    assert abs(len(frames) - 24) <= 1
    motion = np.abs(frames[0].astype(np.int16) - frames[len(frames) // 2]).mean()
    assert motion > 2  # the picture moves


def test_video_is_a_function_of_the_prompt():
    one = video.render("waves", seconds=0.5, width=96, height=64, fps=8)
    assert one == video.render("waves", seconds=0.5, width=96, height=64, fps=8)
    assert one != video.render("fire", seconds=0.5, width=96, height=64, fps=8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 161}, "even"),
        ({"width": 4000}, "from 64 to 1280"),
        ({"seconds": 0}, "seconds"),
        ({"seconds": 999}, "seconds"),
        ({"fps": 0}, "fps"),
    ],
)
def test_video_bad_input_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        video.render("x", **kwargs)


# music


def test_music_is_audible_wav_of_the_asked_length():
    x, rate = samples(music.synthesize("morning coffee", "jazz", seconds=3.0))
    assert rate == music.RATE
    assert abs(len(x) / rate - 3.0) < 0.01
    assert rms(x) > 1000


def test_music_styles_differ_measurably():
    bright = {}
    for style in ("ambient", "classical", "rock", "electronic"):
        x, rate = samples(music.synthesize("morning coffee", style, seconds=3.0))
        bright[style] = centroid(x, rate)
    assert bright["ambient"] < bright["classical"] < min(bright["rock"], bright["electronic"])
    assert bright["electronic"] > 3 * bright["ambient"]


def test_music_follows_prompt_and_style_and_repeats():
    base = music.synthesize("morning coffee", "lofi beats", seconds=1.0)
    assert base == music.synthesize("morning coffee", "lofi beats", seconds=1.0)
    assert base != music.synthesize("midnight rain", "lofi beats", seconds=1.0)
    # a style naming no recipe still gets one of its own, the same each time
    assert music.synthesize("x", "sea shanty", 1.0) == music.synthesize("x", "sea shanty", 1.0)
    assert music.style_for("sea shanty") != music.style_for("polka")
    assert music.style_for("Dark AMBIENT drone") == music.STYLES["ambient"]
    assert music.style_for("lo-fi hip hop") == music.STYLES["lofi"]
    assert music.style_for("lighthouse") != music.STYLES["electronic"]  # words, not substrings
    assert rms(samples(music.synthesize("x", None, 1.0))[0]) > 1000


@pytest.mark.parametrize("seconds", [0, -1, music.MAX_SECONDS + 1])
def test_music_bad_length_is_a_clear_error(seconds):
    with pytest.raises(ValueError, match="seconds"):
        music.synthesize("x", "rock", seconds)
