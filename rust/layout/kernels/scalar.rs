//! The portable kernels: table lookups, exact by construction (every table
//! entry is the scalar reference value), and the tails of every SIMD kernel.

use super::super::plan::{Luts, Plan};

/// A destination element: how to write it and where its tables live.
pub(crate) trait Out: Copy {
    const SIZE: usize;
    fn put(self, out: &mut [u8]);
    fn luts(luts: &Luts) -> &[[Self; 256]; 3];
    fn from_bits(bits: u32) -> Self;
}

impl Out for u8 {
    const SIZE: usize = 1;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[0] = self;
    }
    fn luts(luts: &Luts) -> &[[u8; 256]; 3] {
        match luts {
            Luts::U8(t) => t,
            _ => unreachable!("a u8 destination has u8 tables"),
        }
    }
    fn from_bits(bits: u32) -> u8 {
        bits as u8
    }
}

impl Out for u16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.to_ne_bytes());
    }
    fn luts(luts: &Luts) -> &[[u16; 256]; 3] {
        match luts {
            Luts::U16(t) => t,
            _ => unreachable!("a 16-bit float destination has u16 tables"),
        }
    }
    fn from_bits(bits: u32) -> u16 {
        bits as u16
    }
}

impl Out for f32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn put(self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.to_ne_bytes());
    }
    fn luts(luts: &Luts) -> &[[f32; 256]; 3] {
        match luts {
            Luts::F32(t) => t,
            _ => unreachable!("an f32 destination has f32 tables"),
        }
    }
    fn from_bits(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
}

/// One row of `C`-channel u8 pixels to packed 4-channel pixels of `T`.
pub(crate) fn packed<T: Out, const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let pad = T::from_bits(plan.pad);
    let [a, b, c] = plan.map;
    for (px, out) in src.chunks_exact(C).zip(dst.chunks_exact_mut(4 * T::SIZE)) {
        luts[0][px[a] as usize].put(out);
        luts[1][px[b] as usize].put(&mut out[T::SIZE..]);
        luts[2][px[c] as usize].put(&mut out[2 * T::SIZE..]);
        pad.put(&mut out[3 * T::SIZE..]);
    }
}

/// One row of `C`-channel u8 pixels to packed 3-channel pixels of `T` (no pad).
pub(crate) fn packed3<T: Out, const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let [a, b, c] = plan.map;
    for (px, out) in src.chunks_exact(C).zip(dst.chunks_exact_mut(3 * T::SIZE)) {
        luts[0][px[a] as usize].put(out);
        luts[1][px[b] as usize].put(&mut out[T::SIZE..]);
        luts[2][px[c] as usize].put(&mut out[2 * T::SIZE..]);
    }
}

/// One row of `C`-channel u8 pixels to one row of each of three planes of `T`.
pub(crate) fn planar<T: Out, const C: usize>(plan: &Plan, src: &[u8], p0: &mut [u8], p1: &mut [u8], p2: &mut [u8]) {
    let luts = T::luts(&plan.luts);
    let [a, b, c] = plan.map;
    let outs = p0.chunks_exact_mut(T::SIZE).zip(p1.chunks_exact_mut(T::SIZE)).zip(p2.chunks_exact_mut(T::SIZE));
    for (px, ((o0, o1), o2)) in src.chunks_exact(C).zip(outs) {
        luts[0][px[a] as usize].put(o0);
        luts[1][px[b] as usize].put(o1);
        luts[2][px[c] as usize].put(o2);
    }
}

/// BT.601 limited-range YUV to RGB in 20-bit fixed point: OpenCV's
/// `cvtColor(COLOR_YUV2RGB_NV12)` arithmetic, so results match it exactly.
pub(crate) mod bt601 {
    pub const SHIFT: u32 = 20;
    pub const HALF: i32 = 1 << (SHIFT - 1);
    pub const CY: i32 = 1_220_542;
    pub const CUB: i32 = 2_116_026;
    pub const CUG: i32 = -409_993;
    pub const CVG: i32 = -852_492;
    pub const CVR: i32 = 1_673_527;
}

/// One NV12 row (Y row, and the UV row it shares with its neighbour) to
/// 4-byte pixels with R, G, B at byte positions `pos` and `pad` in the fourth.
pub(crate) fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
    use bt601::*;
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    for ((ys, uv), px2) in y.chunks_exact(2).zip(uv.chunks_exact(2)).zip(out.chunks_exact_mut(8)) {
        let u = uv[0] as i32 - 128;
        let v = uv[1] as i32 - 128;
        let ruv = HALF + CVR * v;
        let guv = HALF + CVG * v + CUG * u;
        let buv = HALF + CUB * u;
        for (&yy, px) in ys.iter().zip(px2.chunks_exact_mut(4)) {
            let y = (yy as i32 - 16).max(0) * CY;
            px[pos[0]] = ((y + ruv) >> SHIFT).clamp(0, 255) as u8;
            px[pos[1]] = ((y + guv) >> SHIFT).clamp(0, 255) as u8;
            px[pos[2]] = ((y + buv) >> SHIFT).clamp(0, 255) as u8;
            px[pad_pos] = pad;
        }
    }
}
