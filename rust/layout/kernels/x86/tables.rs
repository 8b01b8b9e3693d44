//! The x86 kernels' byte shuffles and permutes: those of a plan, built once
//! per plan ([`Permutes`], which `Plan` holds: building them per row costs
//! as much as a short row's conversion), and the fixed masks of the YUV
//! rows. Plain data, no intrinsics: plan.rs reads this module and nothing
//! else of the x86 home.

/// Byte shuffles and permutations of the x86 kernels, built once per plan
/// (building them per row costs as much as a short row's conversion).
/// `shuffle_epi8` masks index bytes within a 16-byte lane, 0x80 zeroing a
/// byte; the VBMI permutes index a step of 16 source pixels' bytes, or
/// [`Permutes::zero`] for a byte that must be 0.
pub(crate) struct Permutes {
    /// VBMI: 4-byte pixels in destination order: byte 4p+k <- pixel p, channel k.
    pub packed_bytes: [u8; 64],
    /// VBMI: quarter j, 32-bit lane 4p+k <- pixel 4j+p, channel k (the pad slot 0).
    pub packed_lanes: [[u8; 64]; 4],
    /// VBMI: channel k, 32-bit lane p <- pixel p, channel k (planar destinations).
    pub planar_lanes: [[u8; 64]; 3],
    /// A lane of 4 source pixels to 4-byte pixels in destination order (the
    /// pad byte 0). GRAY is first widened to one pixel per 4 bytes.
    pub lane_pixels: [u8; 16],
    /// A lane of 4 source pixels to 4 bytes of channel 0, 4 of 1, 4 of 2.
    pub lane_channels: [u8; 16],
    /// Mask k widens channel k of the 4 pixels at the start of a lane to
    /// 32-bit lanes (AVX2 planar, after `in_order`).
    pub widen: [[u8; 16]; 3],
    /// Mask k widens channel k after [`Permutes::spread`], in the lane
    /// order 0, 1, 4, 5 | 2, 3, 6, 7 (AVX2 packed 16-bit floats).
    pub split: [[u8; 32]; 3],
}

impl Permutes {
    /// The index of a zero byte: the last byte of a 64-byte window holding
    /// fewer than 64 source bytes (a masked load zeroes the rest), else the
    /// first byte of a second, zeroed register (two-source permutes).
    pub(crate) fn zero(channels: usize) -> u8 {
        if 16 * channels < 64 {
            63
        } else {
            64
        }
    }

    /// Where AVX2 moves the source dwords of 8 pixels for `split`: lane 0
    /// gets the bytes of pixels 0, 1 (its low 8 bytes) and 4, 5 (its high
    /// 8); lane 1 those of 2, 3 and 6, 7. Each half is two consecutive source
    /// dwords.
    pub(crate) const fn spread(channels: usize) -> [i32; 8] {
        match channels {
            1 => [0, 1, 0, 1, 0, 1, 0, 1],
            3 => [0, 1, 3, 4, 1, 2, 4, 5],
            _ => [0, 1, 4, 5, 2, 3, 6, 7],
        }
    }

    pub(crate) fn new(channels: usize, map: [usize; 3]) -> Permutes {
        let zero = Self::zero(channels);
        let from = |pixel: usize, k: usize| if k < 3 { (pixel * channels + map[k]) as u8 } else { zero };
        let mut p = Permutes {
            packed_bytes: [zero; 64],
            packed_lanes: [[zero; 64]; 4],
            planar_lanes: [[zero; 64]; 3],
            lane_pixels: [0x80; 16],
            lane_channels: [0x80; 16],
            widen: [[0x80; 16]; 3],
            split: [[0x80; 32]; 3],
        };
        for pixel in 0..16 {
            for k in 0..4 {
                p.packed_bytes[4 * pixel + k] = from(pixel, k);
                p.packed_lanes[pixel / 4][4 * (4 * (pixel % 4) + k)] = from(pixel, k);
            }
            for k in 0..3 {
                p.planar_lanes[k][4 * pixel] = from(pixel, k);
            }
        }
        let spread = Self::spread(channels);
        for (k, &mapped) in map.iter().enumerate() {
            // In a lane: GRAY widened (4 bytes a pixel), else `channels` bytes a pixel.
            let channel = if channels == 1 { 0 } else { mapped };
            for pixel in 0..4 {
                let widened = if channels == 1 { 4 * pixel } else { channels * pixel + channel };
                p.lane_pixels[4 * pixel + k] = widened as u8;
                p.lane_channels[4 * k + pixel] = widened as u8;
                p.widen[k][4 * pixel] = (pixel * channels + channel) as u8;
            }
            for lane in 0..2 {
                for (slot, pixel) in [0, 1, 4, 5].into_iter().enumerate() {
                    let half = slot / 2;
                    let at = (pixel + 2 * lane) * channels + channel;
                    let first = 4 * spread[4 * lane + 2 * half] as usize;
                    p.split[k][16 * lane + 4 * slot] = (at - first + 8 * half) as u8;
                }
            }
        }
        p
    }
}

/// The byte-shuffle masks that make the words `vpmaddwd` multiplies
/// exactly: byte c as the bytes [0, c, c, 0] of a dword, whose high byte,
/// xored with 0x80, makes the words `256 (c - 128)` and `c` (`Simd::
/// luma_products`, `add_chroma`). Dword j of 16-byte lane L takes byte
/// `lane_start[L] + step * j + first` of that lane.
const fn dword_words(lane_start: [usize; 4], step: usize, first: usize) -> [u8; 64] {
    let mut mask = [0x80u8; 64];
    let mut i = 1;
    while i < 64 {
        let (lane, j) = (i / 16, i % 16 / 4);
        mask[i] = (lane_start[lane] + step * j + first) as u8;
        mask[i + 1] = mask[i];
        i += 4;
    }
    mask
}

/// A mask of [`dword_words`] for one 16-byte lane (every lane alike).
const fn first_lane(mask: [u8; 64]) -> [u8; 16] {
    let mut lane = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        lane[i] = mask[i];
        i += 1;
    }
    lane
}

/// Byte `b` of every dword as its words (AVX2's fused resize pass: the Y
/// pair and chroma bytes of each lane's pixel).
pub(super) const fn in_dword(b: usize) -> [u8; 64] {
    dword_words([0; 4], 4, b)
}

/// NV12 chroma pairs, each byte as its words: dword j of lane L takes pair
/// 4 L + j where the lanes hold pairs 0-7, 0-7 (AVX2: 16 bytes in both
/// lanes) or 0-7, 0-7, 8-15, 8-15 (AVX-512); `[0]` its first byte, `[1]` its
/// second.
pub(super) const PAIR_WORDS: [[u8; 64]; 2] = [dword_words([0, 8, 0, 8], 2, 0), dword_words([0, 8, 0, 8], 2, 1)];

/// A plane of single chroma bytes (I420's U or V row) loaded into every
/// lane, each byte as its words: dword j of lane L takes byte 4 L + j.
pub(super) const CHROMA_PLANE_WORDS: [u8; 64] = dword_words([0, 4, 8, 12], 1, 0);

/// In each 16-byte lane (4 pixel pairs of a packed 4:2:2 row), pair k's
/// first (`second`: its second) chroma byte as the words of dword k; with
/// `swapped` the other way round.
pub(super) fn chroma_422_mask(y_first: bool, swapped: bool, second: bool) -> [u8; 16] {
    const BYTE: [[u8; 16]; 4] =
        [first_lane(in_dword(0)), first_lane(in_dword(1)), first_lane(in_dword(2)), first_lane(in_dword(3))];
    BYTE[usize::from(y_first) + 2 * usize::from(second != swapped)]
}

/// VBMI: the `vpermt2b` indices that make 32 pixels from their channel
/// bytes packed as `[R 0-7, B 0-7]` (the first operand, a 16-byte lane per 8
/// pixels) and `[G 0-7, pad]` (the second: index + 64): 4-byte pixels 0-15
/// (`[0]`) and 16-31 (`[1]`), and bytes 0-63 (`[2]`) and 64-95 (`[3]`, the
/// rest unused) of 3-byte ones.
pub(super) const PIXELS_OF_CHANNEL_BYTES: [[u8; 64]; 4] = {
    let mut idx = [[0u8; 64]; 4];
    let mut t = 0;
    while t < 4 {
        let mut o = 0;
        while o < 64 {
            let bytes = if t < 2 { 4 } else { 3 };
            let at = 64 * (t % 2) + o;
            let (p, c) = (at / bytes, at % bytes);
            if p < 32 {
                let lane = 16 * (p / 8) + p % 8;
                idx[t][o] = match c {
                    0 => lane,
                    1 => 64 + lane,
                    2 => lane + 8,
                    _ => 64 + lane + 8,
                } as u8;
            }
            o += 1;
        }
        t += 1;
    }
    idx
};

/// In each 16-byte lane, pair k's even (`odd`) pixel's luma as the words
/// of dword k (see `luma_products`). A `const fn`: the kernels' loops take
/// it as a constant (`const { .. }`), never computed per step.
pub(super) const fn luma_422_mask(y_first: bool, odd: bool) -> [u8; 16] {
    first_lane(in_dword(!y_first as usize + 2 * odd as usize))
}

/// In each 16-byte lane of 8 pixels' bytes packed as `[R 0-7, B 0-7]` (`rb`)
/// and `[G 0-7, pad]` (`gp`), the masks that take output bytes 0-15 (`[0]`)
/// and 16-23 (`[1]`) of the lane's 24-byte run of 3-byte pixels from `rb`
/// (`[.][0]`) and from `gp` (`[.][1]`); the bytes the other register gives,
/// and those past the run, are zero. A constant: computed in the kernel's
/// loop, it was not always folded, and the loop rebuilt it every step.
pub(super) const THREE_BYTE_PIXELS: [[[u8; 16]; 2]; 2] = {
    let mut masks = [[[0x80u8; 16]; 2]; 2];
    let mut byte = 0;
    while byte < 24 {
        let (p, c) = (byte / 3, byte % 3);
        let (mask, from, at) = match c {
            0 => (&mut masks[byte / 16][0], p, byte % 16),
            1 => (&mut masks[byte / 16][1], p, byte % 16),
            _ => (&mut masks[byte / 16][0], 8 + p, byte % 16),
        };
        mask[at] = from as u8;
        byte += 1;
    }
    masks
};

/// AVX2's fast 3-byte store (`Fast16::store3`), its byte shuffles: chunk k (16 bytes) of a lane's 16
/// 3-byte pixels (in both lanes) from pack v of the three that pair the
/// channels' halves (`[c0 0-7, c1 0-7]`, `[c2 0-7, c0 8-15]`,
/// `[c1 8-15, c2 8-15]`); -1 (zero) where another pack holds the byte.
pub(super) const THREE_BYTES: [[[i8; 32]; 3]; 3] = {
    let mut m = [[[-1i8; 32]; 3]; 3];
    let mut t = 0;
    while t < 48 {
        let (q, c) = (t / 3, t % 3);
        let (v, at) = match (c, q < 8) {
            (0, true) => (0, q),
            (0, false) => (1, q),
            (1, true) => (0, 8 + q),
            (1, false) => (2, q - 8),
            (_, true) => (1, q),
            _ => (2, q),
        };
        m[t / 16][v][t % 16] = at as i8;
        m[t / 16][v][16 + t % 16] = at as i8;
        t += 1;
    }
    m
};

/// AVX-512's fast 3-byte store without VBMI (OpenCV's
/// `v_store_interleave`), per 16-byte lane of 16 pixels: the lane's 48
/// output bytes are three chunks, and byte j of chunk k is channel
/// `(k + j) % 3`'s. Channel c's 16 bytes are shuffled once, by
/// `INTERLEAVE_PLACES[c]` (a lane's, broadcast to the four), so that byte
/// j holds the pixel whose channel c lands at byte j of the one chunk
/// where byte j is channel c's; each chunk then takes, from the three
/// shuffles in turn, the bytes of `INTERLEAVE_BLEND` (mask bits of 64
/// bytes: `j % 3` 1, then 2, in each lane).
pub(super) const INTERLEAVE_PLACES: [[u8; 16]; 3] = {
    let mut m = [[0u8; 16]; 3];
    let mut c = 0;
    while c < 3 {
        let mut j = 0;
        while j < 16 {
            let chunk = (c + 3 - j % 3) % 3;
            m[c][j] = ((16 * chunk + j - c) / 3) as u8;
            j += 1;
        }
        c += 1;
    }
    m
};
pub(super) const INTERLEAVE_BLEND: [u64; 2] = {
    let mut bits = [0u64; 2];
    let mut j = 0;
    while j < 64 {
        match j % 16 % 3 {
            1 => bits[0] |= 1 << j,
            2 => bits[1] |= 1 << j,
            _ => {}
        }
        j += 1;
    }
    bits
};

/// Where AVX2's `channels` moves the source dwords of 8 pixels so that 4
/// pixels start each 16-byte lane, in pixel order (`Job::Planar`): one byte
/// apart for GRAY, `C` bytes apart otherwise. (`Permutes::spread` for `Job::Packed16`.)
pub(super) const fn in_order(channels: usize) -> [i32; 8] {
    match channels {
        1 => [0, 0, 0, 0, 1, 1, 1, 1],
        3 => [0, 1, 2, 3, 3, 4, 5, 6],
        _ => [0, 1, 2, 3, 4, 5, 6, 7],
    }
}
