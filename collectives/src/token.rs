//! The job token: a shared secret every connection (store and data) must present, so
//! stray or foreign processes cannot join a job.
//!
//! Threat model: other users of the hosts, without root, who can list processes, see the
//! job's ports, command lines, job ids and master address, and connect to any port; they
//! cannot read this user's files or process environments, nor the job's traffic. Against
//! them the token must be unguessable, so it is one of:
//!
//! - [`ENV_TOKEN`], 32 hex digits: set by `trident launch` (16 random bytes, handed to its
//!   children in their environment, which only this user can read), or exported by the user;
//! - otherwise (torchrun, Slurm, mpirun, which share no secret of ours) a keyed hash
//!   (SipHash-2-4, two 64-bit halves) of what every rank of the job sees alike (launcher,
//!   job id, master address and port, world size), keyed by a 32-byte secret in a file only
//!   this user can read: [`ENV_SECRET_FILE`], default `$HOME/.trident/job-secret`, created
//!   (mode 0600, in a 0700 directory) by the first rank that needs it. Every host of a job
//!   must see the same file (a shared home directory, as on most clusters, or a copy);
//! - where neither is possible, the job is refused unless [`ENV_INSECURE`]`=1` accepts the
//!   old unkeyed derivation, which anyone who sees the job's parameters can compute.
//!
//! Not covered: anyone who can read the job's traffic (the token travels in clear) or
//! this user's files (root, the same user).

use crate::error::{CommError, Result};
use std::io::Read;

/// Environment variable the launcher sets to the token, in hex.
pub const ENV_TOKEN: &str = "TRIDENT_JOB_TOKEN";
/// Path of the secret that keys derived tokens (default `$HOME/.trident/job-secret`).
pub const ENV_SECRET_FILE: &str = "TRIDENT_JOB_SECRET_FILE";
/// `1` accepts a token anyone can compute, where no secret can be shared.
pub const ENV_INSECURE: &str = "TRIDENT_ALLOW_INSECURE_TOKEN";
/// Bytes of the secret file.
pub const SECRET_LEN: usize = 32;

/// The 16-byte token every connection of a job presents; a connection without it is refused.
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

    /// A token every rank of a job computes alike from what its launcher shared with all of
    /// them, keyed by `secret`: without the secret nobody can compute it.
    pub fn derive_keyed(secret: &[u8; SECRET_LEN], parts: &[&str]) -> Self {
        let joined = parts.join("\u{1f}");
        let key = |i: usize| -> [u8; 16] { secret[16 * i..16 * i + 16].try_into().unwrap() };
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&siphash24(&key(0), joined.as_bytes()).to_le_bytes());
        t[8..].copy_from_slice(&siphash24(&key(1), joined.as_bytes()).to_le_bytes());
        JobToken(t)
    }

    /// The unkeyed token of the same parts, that anyone who knows them can compute; only
    /// used where the user accepts that ([`ENV_INSECURE`]).
    pub fn derive(parts: &[&str]) -> Self {
        let joined = parts.join("\u{1f}");
        let a = fnv64(0x7472_6964_656e_7401, joined.as_bytes());
        let b = fnv64(a, joined.as_bytes());
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&a.to_le_bytes());
        t[8..].copy_from_slice(&b.to_le_bytes());
        JobToken(t)
    }

    /// The token as 32 lower-case hex digits (the form the environment carries).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The token 32 hex digits spell; [`CommError::InvalidArgument`] for anything else.
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

/// SipHash-2-4 of `msg` under `key` (Aumasson and Bernstein, "SipHash: a fast short-input
/// PRF", 2012: 2 compression rounds per 8-byte word, 4 finalisation rounds).
pub fn siphash24(key: &[u8; 16], msg: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |m: u64, v: &mut [u64; 4]| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let mut words = msg.chunks_exact(8);
    for w in &mut words {
        compress(u64::from_le_bytes(w.try_into().unwrap()), &mut v);
    }
    // The last word: the remaining bytes, and the message length mod 256 in the top byte.
    let mut last = (msg.len() as u64 & 0xff) << 56;
    for (i, &b) in words.remainder().iter().enumerate() {
        last |= (b as u64) << (8 * i);
    }
    compress(last, &mut v);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Where the secret keying derived tokens lives: [`ENV_SECRET_FILE`], else
/// `$HOME/.trident/job-secret`.
pub fn secret_path(var: &dyn Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    match var(ENV_SECRET_FILE) {
        Some(p) if !p.is_empty() => Some(p.into()),
        _ => var("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| std::path::Path::new(&h).join(".trident/job-secret")),
    }
}

/// Reads the secret at `path`, creating it (random, mode 0600) if it does not exist yet.
/// Ranks racing to create it agree: each writes a private temporary and links it into
/// place, and whoever loses reads the winner's. A file other users could read, or that
/// another user owns, is refused.
pub fn load_or_create_secret(path: &std::path::Path) -> Result<[u8; SECRET_LEN]> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let show = path.display();
    if !path.exists() {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| CommError::io(format!("creating {} for the job secret", dir.display()), e))?;
        }
        // Unique among the processes and threads racing here.
        let tmp = path.with_extension(format!("tmp.{}.{}", std::process::id(), JobToken::random()?.to_hex()));
        let written = (|| -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            let secret = JobToken::random().map_err(std::io::Error::other)?.0;
            let more = JobToken::random().map_err(std::io::Error::other)?.0;
            std::io::Write::write_all(&mut f, &[secret, more].concat())?;
            f.sync_all()?;
            match std::fs::hard_link(&tmp, path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        written.map_err(|e| CommError::io(format!("creating the job secret {show}"), e))?;
    }
    let meta =
        std::fs::metadata(path).map_err(|e| CommError::io(format!("reading the job secret {show}"), e))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(CommError::InvalidArgument(format!(
            "the job secret {show} is owned by uid {} with mode {:o}; it must belong to this user (uid {me}) and be readable by nobody else: `chmod 600 {show}`, or point {ENV_SECRET_FILE} at another file",
            meta.uid(),
            meta.mode() & 0o777
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| CommError::io(format!("reading the job secret {show}"), e))?;
    bytes.get(..SECRET_LEN).and_then(|b| b.try_into().ok()).ok_or_else(|| {
        CommError::InvalidArgument(format!(
            "the job secret {show} has {} bytes, expected at least {SECRET_LEN}: remove it and a new one is made",
            bytes.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vectors() {
        // From the SipHash paper, appendix A: key 00..0f, messages 00..(n-1).
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &msg), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(&key, &[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn secret_file_is_private_shared_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("trident-secret-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/job-secret");
        // Ranks racing to create it all end with the same secret.
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn({
                    let p = path.clone();
                    move || load_or_create_secret(&p).unwrap()
                })
            })
            .collect();
        let secrets: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(secrets.iter().all(|s| *s == secrets[0]));
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1, "no temporaries left");
        // Without the secret, the public parts give another token.
        let parts = ["slurm", "77.0", "gpu03", "29500", "8"];
        let keyed = JobToken::derive_keyed(&secrets[0], &parts);
        assert_ne!(keyed, JobToken::derive(&parts));
        assert_ne!(keyed, JobToken::derive_keyed(&[0; SECRET_LEN], &parts));
        assert_eq!(keyed, JobToken::derive_keyed(&load_or_create_secret(&path).unwrap(), &parts));
        // A secret others can read is refused, naming the file and the fix.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create_secret(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600") && err.contains("job-secret"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
