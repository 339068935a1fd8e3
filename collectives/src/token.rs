//! The job token: a shared secret every connection must present, so stray or foreign
//! processes cannot join a job. It keeps honest mistakes out (another job's rank, a port
//! scanner); it is not a defence against someone who can read the job's traffic.

use crate::error::{CommError, Result};
use std::io::Read;

/// Environment variable the launcher sets to the token, in hex.
pub const ENV_TOKEN: &str = "TRIDENT_JOB_TOKEN";

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JobToken(pub [u8; 16]);

impl std::fmt::Debug for JobToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobToken(..)")
    }
}

/// 64-bit FNV-1a, seeded.
pub fn fnv64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ seed;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl JobToken {
    /// 16 random bytes from the operating system.
    pub fn random() -> Result<Self> {
        let mut t = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut t))
            .map_err(|e| CommError::io("reading /dev/urandom for the job token", e))?;
        Ok(JobToken(t))
    }

    /// A token every rank of a job computes alike from what its launcher shared with all
    /// of them (used when no launcher of ours set [`ENV_TOKEN`]).
    pub fn derive(parts: &[&str]) -> Self {
        let joined = parts.join("\u{1f}");
        let a = fnv64(0x7472_6964_656e_7401, joined.as_bytes());
        let b = fnv64(a, joined.as_bytes());
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&a.to_le_bytes());
        t[8..].copy_from_slice(&b.to_le_bytes());
        JobToken(t)
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Result<Self> {
        let s = s.trim();
        let bad = || {
            CommError::InvalidArgument(format!(
                "{ENV_TOKEN} must be 32 hex digits, got {} characters",
                s.len()
            ))
        };
        if s.len() != 32 {
            return Err(bad());
        }
        let mut t = [0u8; 16];
        for (i, byte) in t.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(JobToken(t))
    }

    /// Comparison whose time does not depend on where the tokens differ.
    pub fn matches(&self, other: &[u8]) -> bool {
        other.len() == 16 && self.0.iter().zip(other).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_compare() {
        let t = JobToken::random().unwrap();
        let u = JobToken::from_hex(&t.to_hex()).unwrap();
        assert!(t.matches(&u.0));
        let mut other = u.0;
        other[15] ^= 1;
        assert!(!t.matches(&other));
        assert!(JobToken::from_hex("zz").is_err());
    }
}
