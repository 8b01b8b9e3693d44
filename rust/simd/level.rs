//! Which instruction set the hot loops use: picked once from the CPU (or the
//! `NPU_ZC_SIMD` environment variable), or per call, e.g. by tests that
//! compare every path against the portable scalar one.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Portable Rust, no explicit SIMD: the reference every other path must equal.
    Scalar,
    /// x86_64 with AVX2, FMA and F16C (Haswell, Zen and later).
    Avx2,
    /// x86_64 with AVX-512 F, BW, DQ and VL on top of AVX2 (Skylake-SP and later).
    Avx512,
    /// AVX-512 with VBMI byte permutes too (Ice Lake, Zen 4 and later); the
    /// AVX512-BF16 conversion instruction is used where the CPU also has it.
    Avx512Vbmi,
    /// aarch64 Advanced SIMD (every 64-bit Arm core).
    Neon,
}

impl SimdLevel {
    pub const ALL: [SimdLevel; 5] =
        [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512, SimdLevel::Avx512Vbmi, SimdLevel::Neon];

    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Avx512Vbmi => "avx512vbmi",
            SimdLevel::Neon => "neon",
        }
    }

    /// Whether this CPU can run the level's code.
    pub fn is_supported(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => {
                SimdLevel::Avx2.is_supported()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512dq")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512Vbmi => SimdLevel::Avx512.is_supported() && is_x86_feature_detected!("avx512vbmi"),
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The levels this CPU supports, scalar first.
    pub fn available() -> Vec<SimdLevel> {
        Self::ALL.into_iter().filter(|l| l.is_supported()).collect()
    }

    /// The best level this CPU supports.
    pub fn best() -> SimdLevel {
        Self::available().into_iter().max().unwrap_or(SimdLevel::Scalar)
    }

    /// The level used when a call does not name one: `NPU_ZC_SIMD` if it names
    /// a supported level (read once), otherwise the best one.
    pub fn default_level() -> SimdLevel {
        static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            std::env::var("NPU_ZC_SIMD")
                .ok()
                .and_then(|name| name.parse::<SimdLevel>().ok())
                .filter(|level| level.is_supported())
                .unwrap_or_else(SimdLevel::best)
        })
    }

    /// `level` if given and supported (an error otherwise), else the default.
    pub fn resolve(level: Option<SimdLevel>) -> Result<SimdLevel, LevelError> {
        match level {
            None => Ok(Self::default_level()),
            Some(level) if level.is_supported() => Ok(level),
            Some(level) => Err(LevelError(format!(
                "this CPU cannot run the {level} code path; the available ones are {}",
                Self::available().iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

impl fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SimdLevel {
    type Err = LevelError;

    fn from_str(name: &str) -> Result<SimdLevel, LevelError> {
        match Self::ALL.into_iter().find(|l| l.name().eq_ignore_ascii_case(name)) {
            Some(level) => Ok(level),
            None => {
                Err(LevelError(format!("unknown SIMD level {name:?}: use scalar, avx2, avx512, avx512vbmi or neon")))
            }
        }
    }
}

/// A level this CPU cannot run, or a name that is no level: a bad argument,
/// told as a sentence (the layout engine and the binding pass it on as theirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelError(pub String);

impl fmt::Display for LevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LevelError {}
