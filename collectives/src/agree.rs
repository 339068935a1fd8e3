//! Settings every rank must share, compared across ranks: lists of (name, value) pairs
//! ("lr" = "0.0003", "tp" = "2", ...), each rank's list checked against every other's so a
//! difference is reported by name, with the ranks and values on both sides, instead of
//! surfacing later as a hang or a silent divergence.
//!
//! Used by [`crate::Communicator::agree`] (over the communicator's own collectives) and by
//! the bootstrap (over the rendezvous store, before any communicator exists).
//!
//! Wire encoding of one list: for each pair, name length u32 LE, name bytes, value length
//! u32 LE, value bytes. Lists are compared as decoded pairs, not as bytes.

use crate::error::{CommError, Result};
use crate::token::fnv64;

/// Largest encoded list accepted, bytes.
pub const MAX_SETTINGS_BYTES: usize = 1 << 20;

/// What a value is shown as where a rank does not have the setting at all.
pub const UNSET: &str = "<unset>";

/// Encodes `settings` (see the module header).
pub fn encode<K: AsRef<str>, V: AsRef<str>>(settings: &[(K, V)]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (k, v) in settings {
        for s in [k.as_ref(), v.as_ref()] {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    if out.len() > MAX_SETTINGS_BYTES {
        return Err(CommError::InvalidArgument(format!(
            "settings to compare across ranks take {} bytes encoded, more than the limit of {MAX_SETTINGS_BYTES}",
            out.len()
        )));
    }
    Ok(out)
}

/// Decodes what [`encode`] made; `None` if `bytes` is not such a list.
pub fn decode(mut bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let take = |bytes: &mut &[u8]| -> Option<String> {
        let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let s = std::str::from_utf8(bytes.get(4..4 + len)?).ok()?.to_string();
        *bytes = &bytes[4 + len..];
        Some(s)
    };
    let mut pairs = Vec::new();
    while !bytes.is_empty() {
        let k = take(&mut bytes)?;
        let v = take(&mut bytes)?;
        pairs.push((k, v));
    }
    Some(pairs)
}

/// 64-bit digest of an encoded list (equal lists, equal digests).
pub fn digest(encoded: &[u8]) -> u64 {
    fnv64(0x0061_6772_6565, encoded)
}

/// The first difference between ranks' settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The setting's name.
    pub name: String,
    /// The rank compared against (the lowest rank that has the setting, usually 0) and its value.
    pub rank_a: usize,
    /// `rank_a`'s value.
    pub value_a: String,
    /// The lowest rank that differs from `rank_a`, and its value ([`UNSET`] if it lacks it).
    pub rank_b: usize,
    /// `rank_b`'s value.
    pub value_b: String,
}

fn lookup<'a>(list: &'a [(String, String)], name: &str) -> Option<&'a str> {
    list.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The first setting on which `lists[r]` (rank r's settings) differ: names are taken in
/// rank 0's order, then the names only later ranks have; for each, the lowest rank whose
/// value differs from the lowest rank that has it. Deterministic, so every rank that holds
/// the same lists reports the same difference.
pub fn first_difference(lists: &[Vec<(String, String)>]) -> Option<Difference> {
    let mut names: Vec<&str> = Vec::new();
    for list in lists {
        for (k, _) in list {
            if !names.contains(&k.as_str()) {
                names.push(k);
            }
        }
    }
    for name in names {
        let values: Vec<Option<&str>> = lists.iter().map(|l| lookup(l, name)).collect();
        let a = values.iter().position(|v| v.is_some())?;
        // A rank missing the setting altogether counts as differing from rank `a` too, and
        // so does one below `a` (which lacks it while rank `a` has it).
        let b = (0..lists.len()).find(|&r| r != a && values[r] != values[a]);
        if let Some(b) = b {
            let (first, second) = if b < a { (b, a) } else { (a, b) };
            let show = |r: usize| values[r].unwrap_or(UNSET).to_string();
            return Some(Difference {
                name: name.to_string(),
                rank_a: first,
                value_a: show(first),
                rank_b: second,
                value_b: show(second),
            });
        }
    }
    None
}

/// The error for a difference in `what` ("the training configuration", ...). `ranks` maps
/// the group ranks of the difference to the ranks shown (world ranks).
pub fn disagreement(what: &str, d: Difference, ranks: impl Fn(usize) -> usize) -> CommError {
    CommError::Disagreement {
        what: what.to_string(),
        name: d.name,
        rank_a: ranks(d.rank_a),
        value_a: d.value_a,
        rank_b: ranks(d.rank_b),
        value_b: d.value_b,
    }
}

/// Packs bytes six to an f64 (an integer below 2^48, so exact in any f64 copy), for moving
/// them through the float collectives; the length travels separately.
pub fn pack(bytes: &[u8], words: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; words];
    for (w, chunk) in out.iter_mut().zip(bytes.chunks(6)) {
        let mut v = 0u64;
        for (i, &b) in chunk.iter().enumerate() {
            v |= (b as u64) << (8 * i);
        }
        *w = v as f64;
    }
    out
}

/// Inverse of [`pack`]: the first `len` bytes; `None` if a word is not such an integer.
pub fn unpack(words: &[f64], len: usize) -> Option<Vec<u8>> {
    if len > words.len() * 6 {
        return None;
    }
    let mut out = Vec::with_capacity(words.len() * 6);
    for &w in words {
        if !(0.0..(1u64 << 48) as f64).contains(&w) || w.fract() != 0.0 {
            return None;
        }
        let v = w as u64;
        out.extend((0..6).map(|i| (v >> (8 * i)) as u8));
    }
    out.truncate(len);
    Some(out)
}

/// Words needed for `len` bytes.
pub fn words_for(len: usize) -> usize {
    len.div_ceil(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn encode_decode_pack_round_trip() {
        let l = list(&[("lr", "0.0003"), ("", ""), ("name with spaces", "ünïcode")]);
        let e = encode(&l).unwrap();
        assert_eq!(decode(&e).unwrap(), l);
        assert_eq!(unpack(&pack(&e, words_for(e.len())), e.len()).unwrap(), e);
        assert!(decode(&e[..e.len() - 1]).is_none());
        assert!(unpack(&[0.5], 1).is_none());
        assert_eq!(digest(&e), digest(&encode(&l).unwrap()));
    }

    #[test]
    fn first_difference_names_setting_ranks_and_values() {
        let a = list(&[("seed", "1"), ("lr", "0.1")]);
        let b = list(&[("seed", "1"), ("lr", "0.2")]);
        assert_eq!(first_difference(&[a.clone(), a.clone(), a.clone()]), None);
        let d = first_difference(&[a.clone(), a.clone(), b.clone()]).unwrap();
        assert_eq!(
            (d.name.as_str(), d.rank_a, d.value_a.as_str(), d.rank_b, d.value_b.as_str()),
            ("lr", 0, "0.1", 2, "0.2")
        );
        // A setting one rank lacks is reported as unset there, whichever side lacks it.
        let short = list(&[("seed", "1")]);
        let d = first_difference(&[short.clone(), a.clone()]).unwrap();
        assert_eq!((d.name.as_str(), d.value_a.as_str(), d.value_b.as_str()), ("lr", UNSET, "0.1"));
        let d = first_difference(&[a, short]).unwrap();
        assert_eq!((d.rank_a, d.value_a.as_str(), d.rank_b, d.value_b.as_str()), (0, "0.1", 1, UNSET));
    }
}
