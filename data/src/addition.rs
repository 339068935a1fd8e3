//! The built-in data set: multi-digit addition written as text, generated on the fly.
//!
//! Each problem is one line `AAA+BBB=SSSS\n`. Both operands are zero-padded to `digits` digits,
//! and the sum is written least-significant digit first, zero-padded to `digits + 1` digits:
//! with `digits = 3`, 123 + 45 = 168 is the line `123+045=8610\n`. Reversed sums let a
//! left-to-right model emit each digit from the operand digits of the same place and the carry
//! it has just written; fixed widths keep places at fixed distances.
//!
//! A hash of the operand pair puts about one problem in ten in the held-out set, so no held-out
//! problem is ever trained on, whatever the seed. The skill is measured by exact-match accuracy of
//! completed sums on held-out problems ([`AdditionTask::score`]).

use serde::{Deserialize, Serialize};

use super::rng::{derive_seed, mix64, SplitMix64};
use super::{DataError, Split};

/// The vocabulary: token id = index in this string.
pub const ADDITION_ALPHABET: &[u8; 13] = b"0123456789+=\n";
/// Token id of `+`.
pub const PLUS: u32 = 10;
/// Token id of `=`.
pub const EQUALS: u32 = 11;
/// Token id of the newline that ends a problem.
pub const NEWLINE: u32 = 12;

/// Widest operand supported: sums of two 9-digit numbers and the pair hash fit easily in u64.
pub const MAX_DIGITS: u32 = 9;

/// One in `HELD_OUT_EVERY` operand pairs is held out.
const HELD_OUT_EVERY: u64 = 10;

/// The built-in addition task: problems `a+b=c` with `digits`-digit operands, one in
/// ten operand pairs held out for validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdditionTask {
    /// Digits per operand, `1..=MAX_DIGITS`.
    pub digits: u32,
}

/// Exact-match accuracy on held-out problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Problems answered exactly.
    pub correct: usize,
    /// Problems asked.
    pub total: usize,
}

impl Accuracy {
    /// `correct / total` (0 for no problems).
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.correct as f64 / self.total as f64
        }
    }
}

impl AdditionTask {
    /// The task with `digits`-digit operands; [`DataError::InvalidArgument`] outside
    /// `1..=MAX_DIGITS`.
    pub fn new(digits: u32) -> Result<Self, DataError> {
        if !(1..=MAX_DIGITS).contains(&digits) {
            return Err(DataError::InvalidArgument(format!(
                "the addition task takes 1 to {MAX_DIGITS} digits per operand (got {digits})"
            )));
        }
        Ok(Self { digits })
    }

    /// 13: the digits, `+`, `=` and newline.
    pub fn vocab_size(&self) -> usize {
        ADDITION_ALPHABET.len()
    }

    /// Tokens in one problem line, newline included.
    pub fn line_len(&self) -> usize {
        3 * self.digits as usize + 4
    }

    /// Tokens in a prompt: the previous line's newline, then `AAA+BBB=`.
    pub fn prompt_len(&self) -> usize {
        2 * self.digits as usize + 3
    }

    /// Digits in an answer (the reversed, padded sum), newline excluded.
    pub fn answer_len(&self) -> usize {
        self.digits as usize + 1
    }

    fn operand_limit(&self) -> u64 {
        10u64.pow(self.digits)
    }

    /// Which split the problem `a + b` belongs to.
    pub fn split_of(&self, a: u64, b: u64) -> Split {
        let key = a * self.operand_limit() + b;
        if mix64(key ^ 0xadd_0000 ^ u64::from(self.digits)) % HELD_OUT_EVERY == 0 {
            Split::Validation
        } else {
            Split::Train
        }
    }

    /// Draws operands uniformly from the problems of `split`.
    pub fn sample_problem(&self, rng: &mut SplitMix64, split: Split) -> (u64, u64) {
        let limit = self.operand_limit();
        loop {
            let (a, b) = (rng.below(limit), rng.below(limit));
            // With one digit only 100 pairs exist; the loop still ends because both splits are
            // non-empty for every supported width (checked in tests).
            if self.split_of(a, b) == split {
                return (a, b);
            }
        }
    }

    fn push_digits(out: &mut Vec<u32>, value: u64, width: usize, reversed: bool) {
        let start = out.len();
        let mut v = value;
        for _ in 0..width {
            out.push((v % 10) as u32);
            v /= 10;
        }
        if !reversed {
            out[start..].reverse();
        }
    }

    /// `AAA+BBB=` preceded by a newline, the context every training problem appears in.
    pub fn prompt(&self, a: u64, b: u64) -> Vec<u32> {
        let d = self.digits as usize;
        let mut out = Vec::with_capacity(self.prompt_len());
        out.push(NEWLINE);
        Self::push_digits(&mut out, a, d, false);
        out.push(PLUS);
        Self::push_digits(&mut out, b, d, false);
        out.push(EQUALS);
        out
    }

    /// The expected completion of [`prompt`](Self::prompt), without the final newline.
    pub fn answer(&self, a: u64, b: u64) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.answer_len());
        Self::push_digits(&mut out, a + b, self.answer_len(), true);
        out
    }

    /// Appends the full line `AAA+BBB=SSSS\n`.
    pub fn push_line(&self, a: u64, b: u64, out: &mut Vec<u32>) {
        out.extend_from_slice(&self.prompt(a, b)[1..]);
        out.extend(self.answer(a, b));
        out.push(NEWLINE);
    }

    /// A token stream of `problems` lines of `split`, deterministic in `seed`.
    pub fn generate(&self, split: Split, problems: usize, seed: u64) -> Vec<u16> {
        let mut rng = SplitMix64::new(derive_seed(seed, &[split as u64]));
        let mut line = Vec::with_capacity(self.line_len());
        let mut out = Vec::with_capacity(problems * self.line_len());
        for _ in 0..problems {
            let (a, b) = self.sample_problem(&mut rng, split);
            line.clear();
            self.push_line(a, b, &mut line);
            out.extend(line.iter().map(|&t| t as u16));
        }
        out
    }

    /// Problems in one training sequence of `seq_len` tokens (the last one cut short when
    /// `seq_len` is not a whole number of lines).
    pub fn problems_per_sequence(&self, seq_len: usize) -> usize {
        seq_len.div_ceil(self.line_len()).max(1)
    }

    /// `sequences` independent training sequences of `split`, `seq_len + 1` tokens each (the
    /// inputs and the last target of one window), deterministic in `seed`. Each begins with a
    /// newline and continues with whole problem lines, the last one cut where the sequence
    /// ends. Every problem line thus starts at the same position in every sequence as a scored
    /// [`prompt`](Self::prompt) does, and with `seq_len = line_len()` a sequence is exactly
    /// a prompt, its answer and the closing newline.
    pub fn generate_sequences(&self, split: Split, sequences: usize, seq_len: usize, seed: u64) -> Vec<u16> {
        let mut rng = SplitMix64::new(derive_seed(seed, &[split as u64, seq_len as u64]));
        let record = seq_len + 1;
        let mut sequence = Vec::with_capacity(record + self.line_len());
        let mut out = Vec::with_capacity(sequences * record);
        for _ in 0..sequences {
            sequence.clear();
            sequence.push(NEWLINE);
            while sequence.len() < record {
                let (a, b) = self.sample_problem(&mut rng, split);
                self.push_line(a, b, &mut sequence);
            }
            out.extend(sequence[..record].iter().map(|&t| t as u16));
        }
        out
    }

    /// Reads a completed answer: digits up to the first newline, reversed back. `None` when the
    /// completion is not `answer_len()` digits.
    pub fn parse_answer(&self, completion: &[u32]) -> Option<u64> {
        let digits: Vec<u32> = completion.iter().copied().take_while(|&t| t != NEWLINE).collect();
        if digits.len() != self.answer_len() || digits.iter().any(|&t| t > 9) {
            return None;
        }
        Some(digits.iter().rev().fold(0, |acc, &d| acc * 10 + u64::from(d)))
    }

    /// Exact-match accuracy over `problems` held-out problems drawn with `seed`.
    ///
    /// `complete` receives a prompt ([`prompt`](Self::prompt)) and returns the tokens it
    /// generates after it (at least [`answer_len`](Self::answer_len) of them to be able to score;
    /// anything after a newline is ignored). A completion is correct when the tokens before the
    /// first newline are exactly the expected answer digits.
    pub fn score<F>(&self, problems: usize, seed: u64, mut complete: F) -> Accuracy
    where
        F: FnMut(&[u32]) -> Vec<u32>,
    {
        let mut rng = SplitMix64::new(derive_seed(seed, &[0x5c0e]));
        let mut correct = 0;
        for _ in 0..problems {
            let (a, b) = self.sample_problem(&mut rng, Split::Validation);
            let completion = complete(&self.prompt(a, b));
            let answer: Vec<u32> = completion.iter().copied().take_while(|&t| t != NEWLINE).collect();
            if answer == self.answer(a, b) {
                correct += 1;
            }
        }
        Accuracy { correct, total: problems }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Tokenizer, TokenizerKind};

    #[test]
    fn lines_read_as_documented() {
        let task = AdditionTask::new(3).unwrap();
        let tok = Tokenizer::new(TokenizerKind::Addition).unwrap();
        let mut line = Vec::new();
        task.push_line(123, 45, &mut line);
        assert_eq!(tok.decode(&line), "123+045=8610\n");
        assert_eq!(line.len(), task.line_len());
        assert_eq!(tok.decode(&task.prompt(999, 1)), "\n999+001=");
        assert_eq!(tok.decode(&task.answer(999, 1)), "0001");
        assert_eq!(task.parse_answer(&task.answer(999, 1)), Some(1000));
    }

    #[test]
    fn generated_lines_add_up_and_stay_in_their_split() {
        let seed = 0xadd1;
        for digits in [1, 2, 4, 7] {
            let task = AdditionTask::new(digits).unwrap();
            for split in [Split::Train, Split::Validation] {
                let stream = task.generate(split, 200, seed);
                assert_eq!(stream.len(), 200 * task.line_len());
                for line in stream.chunks(task.line_len()) {
                    let line: Vec<u32> = line.iter().map(|&t| u32::from(t)).collect();
                    let d = digits as usize;
                    let num = |s: &[u32]| s.iter().fold(0u64, |acc, &t| acc * 10 + u64::from(t));
                    let (a, b) = (num(&line[..d]), num(&line[d + 1..2 * d + 1]));
                    assert_eq!(line[d], PLUS);
                    assert_eq!(line[2 * d + 1], EQUALS);
                    assert_eq!(*line.last().unwrap(), NEWLINE);
                    assert_eq!(
                        task.parse_answer(&line[2 * d + 2..]),
                        Some(a + b),
                        "seed {seed} digits {digits}"
                    );
                    assert_eq!(task.split_of(a, b), split, "seed {seed}: {a}+{b}");
                }
            }
        }
    }

    #[test]
    fn sequences_begin_like_a_prompt_and_hold_whole_lines() {
        let seed = 0x5e9;
        for (digits, seq_len) in [(3, 13), (3, 40), (2, 10), (1, 5), (4, 3)] {
            let task = AdditionTask::new(digits).unwrap();
            let d = digits as usize;
            for split in [Split::Train, Split::Validation] {
                let stream = task.generate_sequences(split, 50, seq_len, seed);
                assert_eq!(stream.len(), 50 * (seq_len + 1));
                for record in stream.chunks(seq_len + 1) {
                    let record: Vec<u32> = record.iter().map(|&t| u32::from(t)).collect();
                    assert_eq!(record[0], NEWLINE, "seed {seed}: {record:?}");
                    let lines = record[1..].split(|&t| t == NEWLINE);
                    let mut whole = 0;
                    for (i, line) in lines.enumerate() {
                        // Positions repeat every line: line i starts i lines in.
                        let start = 1 + i * task.line_len();
                        assert!(start <= record.len(), "seed {seed}: {record:?}");
                        if line.len() < task.line_len() - 1 {
                            assert_eq!(start + line.len(), record.len(), "only the last line is cut");
                            continue;
                        }
                        let num = |s: &[u32]| s.iter().fold(0u64, |acc, &t| acc * 10 + u64::from(t));
                        let (a, b) = (num(&line[..d]), num(&line[d + 1..2 * d + 1]));
                        assert_eq!(&record[start - 1..start + 2 * d + 2], &task.prompt(a, b)[..]);
                        assert_eq!(task.parse_answer(&line[2 * d + 2..]), Some(a + b), "seed {seed}");
                        assert_eq!(task.split_of(a, b), split, "seed {seed}: {a}+{b}");
                        whole += 1;
                    }
                    assert_eq!(whole, (seq_len + 1) / task.line_len(), "seed {seed}: {record:?}");
                }
            }
        }
        // One line per sequence: a prompt, its answer and the newline that closes it.
        let task = AdditionTask::new(3).unwrap();
        assert_eq!(task.problems_per_sequence(13), 1);
        assert_eq!(task.problems_per_sequence(14), 2);
        let one = task.generate_sequences(Split::Train, 1, 13, seed);
        assert_eq!(one.last(), Some(&(NEWLINE as u16)));
    }

    #[test]
    fn held_out_share_is_about_a_tenth() {
        let task = AdditionTask::new(2).unwrap();
        let held_out = (0..100)
            .flat_map(|a| (0..100).map(move |b| (a, b)))
            .filter(|&(a, b)| task.split_of(a, b) == Split::Validation)
            .count();
        assert!((700..1300).contains(&held_out), "{held_out} of 10000 held out");
        let one = AdditionTask::new(1).unwrap();
        let one_held = (0..10)
            .flat_map(|a| (0..10).map(move |b| (a, b)))
            .filter(|&(a, b)| one.split_of(a, b) == Split::Validation)
            .count();
        assert!((1..100).contains(&one_held), "1-digit split is degenerate");
    }

    #[test]
    fn score_counts_exact_matches_only() {
        let task = AdditionTask::new(3).unwrap();
        let solve = |prompt: &[u32]| {
            let d = 3;
            let num = |s: &[u32]| s.iter().fold(0u64, |acc, &t| acc * 10 + u64::from(t));
            let (a, b) = (num(&prompt[1..=d]), num(&prompt[d + 2..2 * d + 2]));
            let mut out = task.answer(a, b);
            out.extend([NEWLINE, 4, 2]);
            out
        };
        assert_eq!(task.score(50, 1, solve), Accuracy { correct: 50, total: 50 });
        // Wrong in the last digit half the time.
        let mut calls = 0;
        let half = task.score(40, 1, |p| {
            calls += 1;
            let mut out = solve(p);
            if calls % 2 == 0 {
                out[3] = (out[3] + 1) % 10;
            }
            out
        });
        assert_eq!(half.correct, 20);
        // Answers with trailing digits instead of a newline are wrong.
        let long = task.score(10, 1, |p| {
            let mut out = solve(p);
            out[4] = 0;
            out
        });
        assert_eq!(long.correct, 0);
        assert!((task.score(10, 2, |_| Vec::new()).fraction()).abs() < 1e-12);
    }

    #[test]
    fn rejects_unsupported_widths() {
        assert!(AdditionTask::new(0).is_err());
        assert!(AdditionTask::new(MAX_DIGITS + 1).is_err());
    }
}
