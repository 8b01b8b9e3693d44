"""The way back (output buffers) against numpy and ml_dtypes: dequantise,
quantise, 16-bit floats to and from f32, planar <-> packed, top-k."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the bfloat16 reference) is not installed")

from npu_zc import layout
from npu_zc.errors import InvalidArgumentError

LEVELS, _ = layout.simd_levels()
BF16 = ml_dtypes.bfloat16

# Every float32 class: NaN (quiet and signalling, both signs), infinities,
# subnormals, extremes, and the rounding edges of bf16 and f16.
SPECIAL_BITS = [
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF,
    0x00800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F808000, 0x3F818000, 0x3F808001, 0x477FF000, 0x477FEFFF,
    0x33000000, 0x33000001, 0x387FC000, 0x80000000, 0x00000000,
]
SPECIAL = np.array(SPECIAL_BITS, np.uint32).view(np.float32)

floats = hnp.arrays(
    np.float32,
    st.integers(1, 300),
    elements=st.one_of(
        st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
        st.sampled_from([float(x) for x in SPECIAL if not np.isnan(x)]),
        st.integers(-300, 300).map(lambda i: i / 2),  # exact halves: rounding ties
    ),
)


def random_bits(n: int, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bits, np.array(SPECIAL_BITS, np.uint32)]).view(np.float32)


def assert_same_half_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-exact, except that a NaN need only stay a quiet NaN of the same sign
    (numpy keeps signalling NaN payloads; F16C quiets them, as IEEE says)."""
    g, w = got.view(np.uint16), want.view(np.uint16)
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(g[~nan], w[~nan])
    assert np.all(np.isnan(got[nan].astype(np.float32)))
    assert np.array_equal(g[nan] & 0x8000, w[nan] & 0x8000)
    assert np.all(g[nan] & 0x0200)  # quiet


@pytest.mark.parametrize("level", LEVELS)
def test_every_bf16_and_f16_to_float32(level):
    bits = np.arange(2**16, dtype=np.uint16)
    got = layout.to_float32(bits.view(BF16), simd=level)
    assert np.array_equal(got.view(np.uint32), bits.view(BF16).astype(np.float32).view(np.uint32))
    got = layout.to_float32(bits.view(np.float16), simd=level).view(np.uint32)
    # NaNs are told by their bits: a cast of a signalling NaN is an invalid operation, which raises
    # the FPU's invalid flag where the CPU converts in hardware (aarch64) and numpy warns about it.
    nan = ((bits & 0x7C00) == 0x7C00) & ((bits & 0x03FF) != 0)
    # Every other half (zeros, subnormals, normals, infinities) is exactly a float32: numpy's cast.
    assert np.array_equal(got[~nan], bits[~nan].view(np.float16).astype(np.float32).view(np.uint32))
    # A NaN widens as IEEE 754 says: the same sign, quiet, its payload kept in the top mantissa bits.
    wide = bits[nan].astype(np.uint32)
    assert np.array_equal(got[nan], ((wide & 0x8000) << 16) | 0x7FC00000 | ((wide & 0x03FF) << 13))


@pytest.mark.parametrize("level", LEVELS)
def test_float32_to_bf16_and_f16(level):
    values = random_bits(200_000, seed=11)
    bf = np.empty(values.shape, BF16)
    layout.from_float32(values, bf, simd=level)
    # ml_dtypes rounds to nearest even and turns every NaN into the quiet NaN 0x7FC0 (sign kept).
    with np.errstate(invalid="ignore"):
        assert np.array_equal(bf.view(np.uint16), values.astype(BF16).view(np.uint16))
    half = np.empty(values.shape, np.float16)
    layout.from_float32(values, half, simd=level)
    with np.errstate(over="ignore", invalid="ignore"):
        assert_same_half_bits(half, values.astype(np.float16))


@settings(max_examples=60, deadline=None)
@given(values=floats, dtype=st.sampled_from([np.int8, np.uint8]), scale=st.floats(0.0009765625, 50.0, width=32),
       zero_point=st.integers(-128, 255))
def test_quantize_matches_numpy(values, dtype, scale, zero_point):
    info = np.iinfo(dtype)
    zero_point = int(np.clip(zero_point, info.min, info.max))
    scale32 = np.float32(scale)
    with np.errstate(invalid="ignore", over="ignore"):
        rounded = np.rint(values / scale32) + zero_point
        want = np.where(np.isnan(values), zero_point, np.clip(rounded, info.min, info.max)).astype(dtype)
    for level in LEVELS:
        got = np.full(values.shape, 7, dtype)
        layout.quantize(values, got, float(scale32), zero_point, simd=level)
        assert np.array_equal(got, want), level


@settings(max_examples=40, deadline=None)
@given(q=hnp.arrays(np.int8, st.tuples(st.integers(1, 4), st.integers(1, 5), st.integers(1, 6))),
       axis=st.integers(0, 2), seed=st.integers(0, 1000))
def test_per_channel_dequantize_and_quantize(q, axis, seed):
    rng = np.random.default_rng(seed)
    channels = q.shape[axis]
    scales = rng.uniform(0.01, 2.0, channels).astype(np.float32)
    zeros = rng.integers(-20, 20, channels)
    shape = [1, 1, 1]
    shape[axis] = channels
    s, z = scales.reshape(shape), zeros.reshape(shape)
    want = (q.astype(np.float32) - z.astype(np.float32)) * s
    got = layout.dequantize(q, None, scales, zeros, axis=axis)
    assert np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))
    back = np.empty_like(q)
    layout.quantize(got, back, scales, zeros, axis=axis)
    expected = np.clip(np.rint(got / s) + z, -128, 127).astype(np.int8)
    assert np.array_equal(back, expected)


def test_dequantize_reads_uint8_in_place():
    q = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = np.empty((16, 16), np.float32)
    assert layout.dequantize(q, out, 0.5, 128) is out
    assert np.array_equal(out, (q.astype(np.float32) - 128) * np.float32(0.5))


@settings(max_examples=40, deadline=None)
@given(height=st.integers(1, 7), width=st.integers(1, 9), channels=st.integers(3, 5),
       dtype=st.sampled_from([np.uint8, np.int8, BF16, np.float16, np.float32]), seed=st.integers(0, 1000))
def test_packed_to_planar_and_back(height, width, channels, dtype, seed):
    rng = np.random.default_rng(seed)
    packed = rng.integers(-100, 200, (height, width, channels)).astype(np.float32)
    if dtype in (np.uint8, np.int8):
        info = np.iinfo(dtype)
        packed = np.clip(packed, info.min, info.max)
    packed = packed.astype(dtype)
    planar = layout.packed_to_planar(packed[None], planes=3)
    assert np.array_equal(planar, packed[..., :3].astype(np.float32).transpose(2, 0, 1))
    back = np.empty((1, height, width, channels), dtype)
    layout.planar_to_packed(planar, back, pad=7.0)
    want = np.concatenate([packed[..., :3], np.full((height, width, channels - 3), 7.0, np.float32).astype(dtype)], 2)
    assert np.array_equal(back[0].view(np.uint8), want.view(np.uint8))


def test_planar_to_packed_rounds_like_the_casts():
    planes = random_bits(3 * 40, seed=5)[: 3 * 40].reshape(3, 5, 8)
    for dtype in (BF16, np.float16):
        out = np.empty((5, 8, 4), dtype)
        layout.planar_to_packed(planes, out)
        with np.errstate(over="ignore", invalid="ignore"):
            want = planes.transpose(1, 2, 0).astype(dtype)
        if dtype is BF16:
            assert np.array_equal(out[..., :3].view(np.uint16), want.view(np.uint16))
        else:
            assert_same_half_bits(np.ascontiguousarray(out[..., :3]), want)
    # Integer pixels: round half to even, saturate, NaN to 0.
    values = np.array([-7.0, 300.0, 2.5, 3.5, -0.5, np.nan, -200.0, 126.5], np.float32).reshape(1, 1, 8)
    planes = np.repeat(values, 3, axis=0)
    for dtype in (np.uint8, np.int8):
        out = np.empty((1, 8, 3), dtype)
        layout.planar_to_packed(planes, out)
        info = np.iinfo(dtype)
        want = np.clip(np.nan_to_num(np.rint(values[0, 0])), info.min, info.max).astype(dtype)
        assert np.array_equal(out[0, :, 0], want)


@settings(max_examples=60, deadline=None)
@given(values=floats, k=st.integers(1, 10), dtype=st.sampled_from([np.float32, BF16, np.float16]))
def test_topk_matches_a_stable_argsort(values, k, dtype):
    with np.errstate(over="ignore"):
        values = values.astype(dtype)
    k = min(k, values.size)
    indices, top = layout.topk(values, k)
    as_f32 = values.astype(np.float32)
    want = np.argsort(-as_f32, kind="stable")[:k]
    assert np.array_equal(indices, want)
    assert np.array_equal(top, as_f32[want], equal_nan=True)


def test_topk_over_rows_of_quantised_scores():
    rng = np.random.default_rng(2)
    scores = rng.integers(-128, 128, (3, 1000), dtype=np.int8)
    indices, values = layout.topk(scores, 5, scale=0.25, zero_point=-3)
    for row in range(3):
        want = np.argsort(-scores[row].astype(np.int32), kind="stable")[:5]
        assert np.array_equal(indices[row], want)
        assert np.array_equal(values[row], (scores[row, want].astype(np.float32) + 3) * np.float32(0.25))


def test_output_side_refuses_bad_input():
    f = np.zeros(10, np.float32)
    with pytest.raises(InvalidArgumentError, match="dtype float64"):
        layout.quantize(np.zeros(10), np.zeros(10, np.int8), 1.0)
    with pytest.raises(InvalidArgumentError, match="int8, uint8"):
        layout.quantize(f, np.zeros(10, np.int16), 1.0)
    with pytest.raises(InvalidArgumentError, match="positive finite"):
        layout.quantize(f, np.zeros(10, np.int8), 0.0)
    with pytest.raises(InvalidArgumentError, match="outside the int8 range"):
        layout.quantize(f, np.zeros(10, np.int8), 1.0, 200)
    with pytest.raises(InvalidArgumentError, match="axis="):
        layout.quantize(f, np.zeros(10, np.int8), [1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="elements"):
        layout.dequantize(np.zeros(10, np.int8), np.zeros(9, np.float32))
    with pytest.raises(InvalidArgumentError, match="not contiguous"):
        layout.to_float32(np.zeros(20, np.float16)[::2])
    read_only = np.zeros(10, np.int8)
    read_only.setflags(write=False)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        layout.quantize(f, read_only, 1.0)
    with pytest.raises(InvalidArgumentError, match="k = 11"):
        layout.topk(f, 11)
    with pytest.raises(InvalidArgumentError, match="bfloat16, float16"):
        layout.from_float32(f, np.zeros(10, np.uint16))
