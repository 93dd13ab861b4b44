"""Speech features: AudioSpectrogram and Mfcc, the custom ops of TensorFlow's speech-commands
models, which LiteRT's ``BuiltinOpResolver`` registers.

Semantics read from LiteRT 2.3's ``tflite/kernels/audio_spectrogram.cc`` with
``internal/spectrogram.cc``, and ``tflite/kernels/mfcc.cc`` with ``internal/mfcc.cc``,
``internal/mfcc_mel_filterbank.cc`` and ``internal/mfcc_dct.cc``. Both compute in double
precision and round to float32 at the end, as those kernels do; numlite's FFT (NumPy's) differs
from LiteRT's (Ooura's ``rdft``) only in double-precision rounding.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from numlite.errors import InvokeError
from numlite.kernels.base import Kernel, Spec, TensorInfo, register, scratch
from numlite.kernels.flex_options import FlexOptions, expect_arity

FLOAT32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)
FILTERBANK_FLOOR = 1e-12  # mfcc.cc's kFilterbankFloor: the smallest mel energy taken the log of


def _next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


@register("AudioSpectrogram")
class AudioSpectrogram(Kernel):
    """Short-time power (or magnitude) spectrum of each channel of a ``[samples, channels]``
    float32 signal: a periodic Hann window of ``window_size`` samples every ``stride`` samples,
    zero-padded to the next power of two, real FFT; output ``[channels, frames, fft/2 + 1]``.

    Options (flexbuffer map, read as LiteRT reads them): ``window_size`` and ``stride``
    (``AsInt64``, required: a window under 2 samples or a stride under 1 fails as in LiteRT),
    ``magnitude_squared`` (``AsBool``, default false: the square root of the power, in float32).
    A signal shorter than one window gives zero frames. Source: LiteRT's
    ``tflite/kernels/audio_spectrogram.cc`` and ``internal/spectrogram.cc``.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if not hasattr(self, "window"):
            m = FlexOptions(self)
            window, self.stride = m.as_int("window_size", bits=64), m.as_int("stride", bits=64)
            self.magnitude_squared = m.as_bool("magnitude_squared")
            if window < 2:
                raise self.fail(f"window_size is {window}; the spectrogram needs at least 2 samples")
            if self.stride < 1:
                raise self.fail(f"stride is {self.stride}; it must be at least 1")
            self.fft_length = _next_power_of_two(window)
            scratch((self.fft_length,), np.float64)  # refuses an absurd window before computing it
            i = np.arange(window, dtype=np.float64)
            self.window = 0.5 - 0.5 * np.cos((2.0 * np.pi * i) / window)  # GetPeriodicHann
        expect_arity(self, ins, 1, 1)
        x = ins[0]
        self.expect_dtype(x, np.float32)
        if x.ndim != 2:
            raise self.fail(f"input {x.name!r} has shape {x.shape}; it must be [samples, channels]")
        samples, channels = x.shape
        window = self.window.size
        self.frames = 0 if samples < window else 1 + (samples - window) // self.stride
        scratch((channels, self.frames, self.fft_length), np.float64)
        return [Spec((channels, self.frames, self.fft_length // 2 + 1), FLOAT32)]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        out = outs[0]
        if self.frames == 0 or out.size == 0:
            return
        signal = ins[0].T.astype(np.float64)  # [channels, samples]
        window = self.window.size
        frames = np.lib.stride_tricks.sliding_window_view(signal, window, axis=1)[:, :: self.stride][:, : self.frames]
        spectrum = np.fft.rfft(frames * self.window, n=self.fft_length, axis=-1)
        power = (spectrum.real * spectrum.real + spectrum.imag * spectrum.imag).astype(np.float32)
        if self.magnitude_squared:
            out[...] = power
        else:
            np.sqrt(power, out=out)  # sqrtf of the float power, as LiteRT


class _MelFilterbank:
    """``internal::MfccMelFilterbank`` for one spectrum length and sample rate: which FFT bins
    feed which triangular mel channel, with what weight (HTK style, DC excluded)."""

    def __init__(self, input_length: int, sample_rate: float, channels: int, lower: float, upper: float) -> None:
        def to_mel(freq):
            return 1127.0 * np.log1p(np.asarray(freq, np.float64) / 700.0)

        mel_low, mel_high = to_mel(lower), to_mel(upper)
        spacing = (mel_high - mel_low) / float(channels + 1)
        centers = mel_low + spacing * np.arange(1, channels + 2, dtype=np.float64)
        hz_per_bin = 0.5 * sample_rate / float(input_length - 1)
        self.start = int(1.5 + lower / hz_per_bin)
        self.end = int(upper / hz_per_bin)
        self.input_length = input_length
        bins = np.arange(self.start, min(self.end, input_length - 1) + 1)
        mel = to_mel(bins * hz_per_bin)
        # A bin's channel: the last center frequency below it (-1 before the first center).
        band = np.searchsorted(centers[:channels], mel, side="left") - 1
        upper_center = centers[band + 1]
        lower_center = np.where(band >= 0, centers[np.maximum(band, 0)], mel_low)
        weights = (upper_center - mel) / (upper_center - lower_center)
        # Each bin adds weight * magnitude to its channel (right slope of the triangle) and the
        # rest of its magnitude to the next channel (left slope of that one's triangle).
        self.right = np.zeros((bins.size, channels))
        self.left = np.zeros((bins.size, channels))
        rows = np.arange(bins.size)
        self.right[rows[band >= 0], band[band >= 0]] = 1.0
        self.left[rows[band + 1 < channels], band[band + 1 < channels] + 1] = 1.0
        self.weights = weights

    def __call__(self, spectra: np.ndarray) -> np.ndarray | None:
        """Mel energies of ``[frames, input_length]`` squared magnitudes; None when the spectrum
        does not reach ``end`` (LiteRT then computes nothing and its DCT sums an empty vector)."""
        if self.input_length <= self.end:
            return None
        magnitude = np.sqrt(spectra[:, self.start : self.end + 1])
        weighted = magnitude * self.weights
        return weighted @ self.right + (magnitude - weighted) @ self.left


@register("Mfcc")
class Mfcc(Kernel):
    """Mel-frequency cepstral coefficients of a squared-magnitude spectrogram
    ``[channels, frames, bins]`` (AudioSpectrogram's output with ``magnitude_squared``) at the
    int32 ``sample_rate`` (second input, one value): per frame, the square roots of the bins
    summed under ``filterbank_channel_count`` triangular mel filters between
    ``lower_frequency_limit`` and ``upper_frequency_limit``, floored at 1e-12, their logs, and
    the first ``dct_coefficient_count`` coefficients of an orthonormal DCT-II. Output
    ``[channels, frames, dct_coefficient_count]``.

    Options (flexbuffer map): all four read with ``AsInt64`` as LiteRT reads them, so a
    fractional frequency limit is truncated to an integer; an absent key reads 0. Settings with
    which LiteRT's Mfcc fails to initialize (fewer than 1 channel or coefficient, more
    coefficients than channels, lower limit negative or not below the upper, a sample rate not
    positive, fewer than 2 bins) are errors. An upper limit at or above the spectrum's last bin
    frequency makes LiteRT's filterbank compute nothing: every coefficient is 0, in numlite too.
    Source: LiteRT's ``tflite/kernels/mfcc.cc``, ``internal/mfcc.cc``,
    ``internal/mfcc_mel_filterbank.cc``, ``internal/mfcc_dct.cc``.
    """

    def prepare(self, ins: Sequence[TensorInfo | None]) -> list[Spec]:
        if not hasattr(self, "coefficients"):
            m = FlexOptions(self)
            # mfcc.cc stores the AsInt64 reads in float fields: integral, then float32.
            self.upper = float(np.float32(m.as_int("upper_frequency_limit", bits=64)))
            self.lower = float(np.float32(m.as_int("lower_frequency_limit", bits=64)))
            self.channels = m.as_int("filterbank_channel_count")
            self.coefficients = m.as_int("dct_coefficient_count")
            self._check_options()
            self.filterbanks: dict[tuple[int, int], _MelFilterbank] = {}
        expect_arity(self, ins, 2, 1)
        spectrogram, rate = ins
        self.expect_dtype(spectrogram, np.float32)
        self.expect_dtype(rate, np.int32)
        if spectrogram.ndim != 3:
            raise self.fail(f"input {spectrogram.name!r} has shape {spectrogram.shape}; it must be [channels, frames, bins]")
        if rate.size != 1:
            raise self.fail(f"sample rate {rate.name!r} has shape {rate.shape}; it must hold one value")
        if spectrogram.shape[2] < 2:
            raise self.fail(f"the spectrogram has {spectrogram.shape[2]} bins; the mel filterbank needs at least 2")
        if rate.value is not None:
            self._filterbank(spectrogram.shape[2], int(rate.value.reshape(-1)[0]), self.fail)
        j = np.arange(self.channels, dtype=np.float64) + 0.5
        arg = np.pi / self.channels
        self.dct = math.sqrt(2.0 / self.channels) * np.cos(np.arange(self.coefficients)[:, None] * arg * j)
        return [Spec((spectrogram.shape[0], spectrogram.shape[1], self.coefficients), FLOAT32)]

    def _check_options(self) -> None:
        if self.channels < 1:
            raise self.fail(f"filterbank_channel_count is {self.channels}; it must be at least 1")
        if not 1 <= self.coefficients <= self.channels:
            raise self.fail(f"dct_coefficient_count is {self.coefficients}; it must be in [1, filterbank_channel_count"
                            f" = {self.channels}]")
        if self.lower < 0:
            raise self.fail(f"lower_frequency_limit is {self.lower}; it must not be negative")
        if self.upper <= self.lower:
            raise self.fail(f"upper_frequency_limit {self.upper} must be above lower_frequency_limit {self.lower}")

    def _filterbank(self, bins: int, rate: int, error) -> _MelFilterbank:
        if rate <= 0:
            raise error(f"the sample rate is {rate}; it must be positive")
        key = (bins, rate)
        if key not in self.filterbanks:
            self.filterbanks[key] = _MelFilterbank(bins, float(rate), self.channels, self.lower, self.upper)
        return self.filterbanks[key]

    def eval(self, ins: Sequence[np.ndarray | None], outs: list[np.ndarray | None]) -> None:
        spectrogram, rate = ins
        out = outs[0]
        if out.size == 0:
            return
        bank = self._filterbank(spectrogram.shape[2], int(rate.reshape(-1)[0]), InvokeError)
        mel = bank(spectrogram.reshape(-1, spectrogram.shape[2]).astype(np.float64))
        if mel is None:
            out[...] = 0
            return
        log_mel = np.log(np.maximum(mel, FILTERBANK_FLOOR))
        out[...] = (log_mel @ self.dct.T).astype(np.float32).reshape(out.shape)
