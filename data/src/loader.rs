//! Batches of `B x T` input tokens and their next-token targets, in an order fixed by a seed.
//!
//! A part of `n` tokens is cut into windows of `T + 1` tokens starting at `offset + i * T`
//! (consecutive windows share one token: the last target of one is the first input of the
//! next). With shuffling, every epoch visits the parts in a seeded random order, each part's
//! windows in a seeded random order, and draws a fresh `offset` in `[0, T)` so that window edges
//! move between epochs. Everything is a pure function of `(seed, epoch)`, so the position
//! `(epoch, part, sample)` is all a checkpoint needs to resume exactly.
//!
//! Data parallelism: every call consumes `B x world` windows of one global stream, and rank `r`
//! keeps the `r`-th block of `B`. The union over ranks is what a single rank with batch `B x
//! world` would see, and the position is independent of `B` and `world`, so a run can resume
//! with another batch size or rank count.
//!
//! [`DataOrder::Llmc`] replaces all of this with the batch order of llm.c's loader
//! ([`LlmcOrder`]), for step-by-step comparisons with llm.c.

use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::llmc_order::LlmcOrder;
use super::rng::{derive_seed, SplitMix64};
use super::{DataError, TokenSet};

/// Which windows a loader serves, in which order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataOrder {
    /// Trident's: windows drawn one by one, seeded by `--seed`, offsets moving between epochs.
    #[default]
    Trident,
    /// llm.c's: each batch one contiguous run of `B x T + 1` tokens, in the order llm.c's
    /// loader serves them (its generator is seeded with 42 + rank, not `--seed`).
    Llmc,
    /// File order: consecutive windows from the first token of the first part, parts in
    /// their listed order, nothing shuffled (llm.c's loader with shuffling off).
    Sequential,
}

impl DataOrder {
    /// The order's name, as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Trident => "trident",
            Self::Llmc => "llmc",
            Self::Sequential => "sequential",
        }
    }
}

impl std::str::FromStr for DataOrder {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "trident" => Ok(Self::Trident),
            "llmc" => Ok(Self::Llmc),
            "sequential" => Ok(Self::Sequential),
            _ => Err(format!("unknown data order `{s}`: use trident, llmc or sequential")),
        }
    }
}

/// Where a loader stands; store it in checkpoints and give it back to [`DataLoader::restore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The seed of the shuffles.
    pub seed: u64,
    /// Whether parts and windows are shuffled.
    pub shuffle: bool,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Tokens in the set it read, to catch a resume on other data.
    pub total_tokens: u64,
    /// Passes over the data completed.
    pub epoch: u64,
    /// Index into this epoch's order of parts.
    pub part: usize,
    /// Index into the current part's order of windows (of batches, in llm.c's order).
    pub sample: usize,
    /// The order batches are served in (states saved before it existed read as the default).
    #[serde(default)]
    pub order: DataOrder,
}

/// One rank's batch: row-major `[batch_size, seq_len]` inputs and targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Sequences.
    pub batch_size: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Token ids, `[batch_size, seq_len]`.
    pub inputs: Vec<u32>,
    /// The next token of each input, `[batch_size, seq_len]`.
    pub targets: Vec<u32>,
}

struct Loaded {
    part: usize,
    tokens: Arc<Vec<u16>>,
    range: Range<usize>,
}

/// Serves one rank's batches of windows over a [`TokenSet`], in the chosen [`DataOrder`],
/// reproducibly from a seed, and resumes from a [`LoaderState`].
pub struct DataLoader {
    set: TokenSet,
    batch_size: usize,
    seq_len: usize,
    rank: usize,
    world: usize,
    shuffle: bool,
    seed: u64,
    epoch: u64,
    part: usize,
    sample: usize,
    part_order: Vec<usize>,
    offset: usize,
    /// Window order of one part (present only when shuffling).
    window_order: Option<(usize, Vec<u32>)>,
    /// Present for [`DataOrder::Llmc`]; it then decides every batch.
    llmc: Option<LlmcOrder>,
    /// [`DataOrder::Sequential`]: windows in file order (and `shuffle` off).
    sequential: bool,
    loaded: Option<Loaded>,
}

/// The offset actually used for a part of `len` tokens and its window count.
fn windows(len: usize, seq_len: usize, offset: usize) -> (usize, usize) {
    if len > offset + seq_len {
        (offset, (len - offset - 1) / seq_len)
    } else if len > seq_len {
        (0, (len - 1) / seq_len)
    } else {
        (0, 0)
    }
}

impl DataLoader {
    /// A loader over `set` giving this rank `batch_size` sequences of `seq_len` tokens per
    /// call. `shuffle = false` reads windows in order from the start (use it for validation,
    /// with [`reset`](Self::reset) before each evaluation).
    pub fn new(
        set: TokenSet,
        batch_size: usize,
        seq_len: usize,
        seed: u64,
        shuffle: bool,
    ) -> Result<Self, DataError> {
        if batch_size == 0 || seq_len == 0 {
            return Err(DataError::InvalidArgument(format!(
                "batch size and sequence length must be at least 1 (got {batch_size} and {seq_len})"
            )));
        }
        let windows_at_zero: usize =
            (0..set.num_parts()).map(|i| windows(set.part_len(i), seq_len, 0).1).sum();
        if windows_at_zero == 0 {
            let longest = (0..set.num_parts()).map(|i| set.part_len(i)).max();
            return Err(DataError::TooFewTokens {
                what: set.name().to_owned(),
                tokens: longest.unwrap_or(0),
                needed: seq_len + 1,
                seq_len,
            });
        }
        let mut loader = Self {
            set,
            batch_size,
            seq_len,
            rank: 0,
            world: 1,
            shuffle,
            seed,
            epoch: 0,
            part: 0,
            sample: 0,
            part_order: Vec::new(),
            offset: 0,
            window_order: None,
            llmc: None,
            sequential: false,
            loaded: None,
        };
        loader.begin_epoch();
        Ok(loader)
    }

    /// Makes this loader data-parallel rank `rank` of `world`.
    pub fn with_rank(mut self, rank: usize, world: usize) -> Result<Self, DataError> {
        if world == 0 || rank >= world {
            return Err(DataError::InvalidArgument(format!(
                "data-parallel rank {rank} is not in a group of {world}"
            )));
        }
        self.rank = rank;
        self.world = world;
        if self.llmc.is_some() {
            self.llmc = Some(self.new_llmc_order()?);
        }
        Ok(self)
    }

    /// Serves batches in `order` from the start.
    pub fn with_order(mut self, order: DataOrder) -> Result<Self, DataError> {
        self.sequential = order == DataOrder::Sequential;
        if self.sequential {
            self.shuffle = false;
            self.epoch = 0;
            self.begin_epoch();
        }
        self.llmc = match order {
            DataOrder::Trident | DataOrder::Sequential => None,
            DataOrder::Llmc => Some(self.new_llmc_order()?),
        };
        Ok(self)
    }

    /// The order batches are served in.
    pub fn order(&self) -> DataOrder {
        if self.llmc.is_some() {
            DataOrder::Llmc
        } else if self.sequential {
            DataOrder::Sequential
        } else {
            DataOrder::Trident
        }
    }

    fn new_llmc_order(&self) -> Result<LlmcOrder, DataError> {
        let lens = (0..self.set.num_parts()).map(|i| self.set.part_len(i)).collect();
        LlmcOrder::new(lens, self.batch_size * self.seq_len, self.rank, self.world, self.shuffle)
    }

    /// Sequences per batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Tokens per sequence.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// Passes over the data completed so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Windows in an epoch that starts at offset 0 (other offsets may give one fewer per part).
    pub fn samples_per_epoch(&self) -> usize {
        if let Some(llmc) = &self.llmc {
            return llmc.slots_per_epoch() * self.batch_size;
        }
        (0..self.set.num_parts()).map(|i| windows(self.set.part_len(i), self.seq_len, 0).1).sum()
    }

    /// Where the loader stands, for [`DataLoader::restore`].
    pub fn state(&self) -> LoaderState {
        let (epoch, part, sample) = match &self.llmc {
            Some(llmc) => llmc.position(),
            None => (self.epoch, self.part, self.sample),
        };
        LoaderState {
            seed: self.seed,
            shuffle: self.shuffle,
            seq_len: self.seq_len,
            total_tokens: self.set.total_tokens() as u64,
            epoch,
            part,
            sample,
            order: self.order(),
        }
    }

    /// Continues from `state` (taken from a loader over the same data and `seq_len`), so the
    /// batches that follow are exactly those the original loader would have produced next.
    pub fn restore(&mut self, state: LoaderState) -> Result<(), DataError> {
        let bad = |msg: String| Err(DataError::BadState(msg));
        if state.seq_len != self.seq_len {
            return Err(DataError::ResumeMismatch {
                setting: "sequence length",
                saved: state.seq_len.to_string(),
                now: self.seq_len.to_string(),
            });
        }
        if state.total_tokens != self.set.total_tokens() as u64 {
            return bad(format!(
                "it was reading {} tokens, but {} has {}; resume on the same data",
                state.total_tokens,
                self.set.name(),
                self.set.total_tokens()
            ));
        }
        if state.order != self.order() {
            return Err(DataError::ResumeMismatch {
                setting: "data order",
                saved: state.order.name().to_string(),
                now: self.order().name().to_string(),
            });
        }
        if state.shuffle != self.shuffle {
            return bad("it was saved with a different shuffle setting".into());
        }
        if let Some(llmc) = self.llmc.as_mut() {
            return llmc.seek((state.epoch, state.part, state.sample));
        }
        if state.part > self.set.num_parts() {
            return bad(format!(
                "part {} is past the {} parts of the data",
                state.part,
                self.set.num_parts()
            ));
        }
        self.seed = state.seed;
        self.epoch = state.epoch;
        self.begin_epoch();
        if state.part < self.set.num_parts() {
            let p = self.part_order[state.part];
            let (_, count) = windows(self.set.part_len(p), self.seq_len, self.offset);
            if state.sample > count {
                return bad(format!("sample {} is past the {count} windows of part {p}", state.sample));
            }
        }
        self.part = state.part;
        self.sample = state.sample;
        Ok(())
    }

    /// Back to the first window of epoch 0.
    pub fn reset(&mut self) {
        self.epoch = 0;
        self.begin_epoch();
        if let Some(llmc) = self.llmc.as_mut() {
            llmc.restart();
        }
    }

    fn begin_epoch(&mut self) {
        self.part = 0;
        self.sample = 0;
        self.window_order = None;
        self.part_order = (0..self.set.num_parts()).collect();
        self.offset = 0;
        if self.shuffle {
            let mut rng = SplitMix64::new(derive_seed(self.seed, &[self.epoch, u64::MAX]));
            rng.shuffle(&mut self.part_order);
            self.offset = rng.below(self.seq_len as u64) as usize;
        }
    }

    /// The next window of the global stream: (part, start of the window inside the part).
    fn next_window(&mut self) -> (usize, usize) {
        loop {
            if self.part >= self.part_order.len() {
                self.epoch += 1;
                self.begin_epoch();
            }
            let p = self.part_order[self.part];
            let (offset, count) = windows(self.set.part_len(p), self.seq_len, self.offset);
            if self.sample < count {
                let w = if self.shuffle {
                    if self.window_order.as_ref().is_none_or(|(q, _)| *q != p) {
                        let mut order: Vec<u32> = (0..count as u32).collect();
                        SplitMix64::new(derive_seed(self.seed, &[self.epoch, p as u64])).shuffle(&mut order);
                        self.window_order = Some((p, order));
                    }
                    self.window_order.as_ref().unwrap().1[self.sample] as usize
                } else {
                    self.sample
                };
                self.sample += 1;
                return (p, offset + w * self.seq_len);
            }
            self.part += 1;
            self.sample = 0;
        }
    }

    fn tokens_of(&mut self, part: usize) -> Result<(&[u16], usize), DataError> {
        let reuse = match &self.loaded {
            Some(l) if l.part == part => true,
            Some(l) if self.set.same_source(l.part, part) => {
                let range = self.set.part_range(part);
                let l = self.loaded.as_mut().unwrap();
                l.part = part;
                l.range = range;
                true
            }
            _ => false,
        };
        if !reuse {
            let (tokens, range) = self.set.load_part(part)?;
            self.loaded = Some(Loaded { part, tokens, range });
        }
        let l = self.loaded.as_ref().unwrap();
        Ok((&l.tokens[l.range.clone()], l.range.start))
    }

    /// This rank's next batch. On error (a shard that cannot be read) the position is left
    /// where it was before the call.
    pub fn next_batch(&mut self) -> Result<Batch, DataError> {
        let before = self.state();
        let result = self.fill_batch();
        if result.is_err() {
            self.restore(before)?;
        }
        result
    }

    fn fill_batch(&mut self) -> Result<Batch, DataError> {
        let (b, t) = (self.batch_size, self.seq_len);
        let mut inputs = Vec::with_capacity(b * t);
        let mut targets = Vec::with_capacity(b * t);
        if let Some(llmc) = self.llmc.as_mut() {
            let (part, start) = llmc.next_batch();
            let (tokens, _) = self.tokens_of(part)?;
            let run = &tokens[start..start + b * t + 1];
            inputs.extend(run[..b * t].iter().map(|&x| u32::from(x)));
            targets.extend(run[1..].iter().map(|&x| u32::from(x)));
            return Ok(Batch { batch_size: b, seq_len: t, inputs, targets });
        }
        for j in 0..b * self.world {
            let (part, start) = self.next_window();
            if j / b != self.rank {
                continue;
            }
            let (tokens, _) = self.tokens_of(part)?;
            let window = &tokens[start..start + t + 1];
            inputs.extend(window[..t].iter().map(|&x| u32::from(x)));
            targets.extend(window[1..].iter().map(|&x| u32::from(x)));
        }
        Ok(Batch { batch_size: b, seq_len: t, inputs, targets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{write_shard, Dataset, TokenizerKind};

    /// Tokens equal to their position, so a window shows where it came from.
    fn counting_set(n: usize) -> TokenSet {
        TokenSet::from_tokens("counting", (0..n as u16).collect(), 65536).unwrap()
    }

    fn window_starts(batch: &Batch) -> Vec<usize> {
        batch
            .inputs
            .chunks(batch.seq_len)
            .zip(batch.targets.chunks(batch.seq_len))
            .map(|(inp, tgt)| {
                for k in 0..batch.seq_len {
                    assert_eq!(inp[k], inp[0] + k as u32, "inputs are one contiguous run");
                    assert_eq!(tgt[k], inp[k] + 1, "targets are the inputs shifted by one");
                }
                inp[0] as usize
            })
            .collect()
    }

    #[test]
    fn every_epoch_visits_each_window_once_in_a_seeded_order() {
        let (n, t, seed) = (1000, 16, 0x10ad);
        let mut loader = DataLoader::new(counting_set(n), 1, t, seed, true).unwrap();
        let mut epochs: Vec<Vec<usize>> = vec![Vec::new(); 3];
        while loader.epoch() < 3 {
            let epoch = loader.epoch() as usize;
            let start = window_starts(&loader.next_batch().unwrap())[0];
            if loader.epoch() as usize != epoch {
                // The window that crossed into the next epoch belongs to it.
                epochs[loader.epoch().min(2) as usize].push(start);
            } else {
                epochs[epoch].push(start);
            }
        }
        for (e, starts) in epochs.iter().enumerate().take(2) {
            let offset = starts[0] % t;
            let mut sorted = starts.clone();
            sorted.sort_unstable();
            let expected: Vec<usize> = (0..(n - offset - 1) / t).map(|i| offset + i * t).collect();
            assert_eq!(sorted, expected, "seed {seed} epoch {e}");
            assert_ne!(starts, &sorted, "seed {seed} epoch {e} is not shuffled");
        }
        assert_ne!(epochs[0], epochs[1], "seed {seed}: epochs repeat");
    }

    #[test]
    fn sequential_loader_reads_from_the_start() {
        let mut loader = DataLoader::new(counting_set(100), 2, 8, 1, false).unwrap();
        assert_eq!(window_starts(&loader.next_batch().unwrap()), vec![0, 8]);
        assert_eq!(window_starts(&loader.next_batch().unwrap()), vec![16, 24]);
        loader.reset();
        assert_eq!(window_starts(&loader.next_batch().unwrap()), vec![0, 8]);
        assert_eq!(loader.samples_per_epoch(), 12);
    }

    #[test]
    fn resuming_from_a_saved_state_continues_exactly() {
        let seed = 0xbee;
        let mut a = DataLoader::new(counting_set(3000), 3, 32, seed, true).unwrap();
        for _ in 0..40 {
            a.next_batch().unwrap();
        }
        let json = serde_json::to_string(&a.state()).unwrap();
        let mut b = DataLoader::new(counting_set(3000), 3, 32, 999, true).unwrap();
        b.restore(serde_json::from_str(&json).unwrap()).unwrap();
        // 60 more batches cross at least one epoch boundary (93 windows per epoch).
        for i in 0..60 {
            assert_eq!(a.next_batch().unwrap(), b.next_batch().unwrap(), "seed {seed} batch {i}");
        }
        assert!(a.epoch() >= 2);
    }

    #[test]
    fn data_parallel_ranks_split_the_single_rank_batch() {
        let seed = 77;
        let mut single = DataLoader::new(counting_set(5000), 4, 20, seed, true).unwrap();
        let mut ranks: Vec<DataLoader> = (0..2)
            .map(|r| DataLoader::new(counting_set(5000), 2, 20, seed, true).unwrap().with_rank(r, 2).unwrap())
            .collect();
        for step in 0..100 {
            let whole = single.next_batch().unwrap();
            let mut joined = Vec::new();
            for r in &mut ranks {
                joined.extend(r.next_batch().unwrap().inputs);
            }
            assert_eq!(whole.inputs, joined, "seed {seed} step {step}");
        }
        assert_eq!(single.state(), ranks[1].state());
    }

    #[test]
    fn llmc_order_serves_contiguous_batches_and_resumes() {
        let (b, t) = (3, 10);
        let mut loader =
            DataLoader::new(counting_set(500), b, t, 1, true).unwrap().with_order(DataOrder::Llmc).unwrap();
        let mut order = LlmcOrder::new(vec![500], b * t, 0, 1, true).unwrap();
        assert_eq!(loader.samples_per_epoch(), 16 * b);
        for step in 0..20 {
            let batch = loader.next_batch().unwrap();
            let (_, start) = order.next_batch();
            let starts = window_starts(&batch);
            assert_eq!(starts, [start, start + t, start + 2 * t], "step {step}");
        }
        let state = loader.state();
        assert_eq!(state.order, DataOrder::Llmc);
        let mut resumed =
            DataLoader::new(counting_set(500), b, t, 9, true).unwrap().with_order(DataOrder::Llmc).unwrap();
        resumed.restore(state).unwrap();
        for _ in 0..20 {
            assert_eq!(resumed.next_batch().unwrap(), loader.next_batch().unwrap());
        }
        let mut trident = DataLoader::new(counting_set(500), b, t, 1, true).unwrap();
        assert!(matches!(
            trident.restore(state),
            Err(DataError::ResumeMismatch { setting: "data order", .. })
        ));
        // Ranks read their block of each shared slot.
        let mut rank1 = DataLoader::new(counting_set(500), 2, t, 1, false)
            .unwrap()
            .with_order(DataOrder::Llmc)
            .unwrap()
            .with_rank(1, 2)
            .unwrap();
        assert_eq!(window_starts(&rank1.next_batch().unwrap()), [20, 30]);
        assert_eq!(window_starts(&rank1.next_batch().unwrap()), [60, 70]);
    }

    #[test]
    fn seeds_change_the_order() {
        let draw = |seed| {
            let mut l = DataLoader::new(counting_set(2000), 4, 16, seed, true).unwrap();
            (0..5).map(|_| l.next_batch().unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn loads_shards_lazily_and_reports_bad_ones() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<_> = (0..3)
            .map(|i| {
                let p = dir.path().join(format!("d_train_{i:06}.bin"));
                let toks: Vec<u16> = (0..400).map(|k| ((k * 13 + i) % 256) as u16).collect();
                write_shard(&p, &toks).unwrap();
                p
            })
            .collect();
        let ds = Dataset::shards(&paths, TokenizerKind::Bytes, 0.1).unwrap();
        let mut loader = DataLoader::new(ds.train.clone(), 4, 16, 3, true).unwrap();
        for _ in 0..50 {
            let b = loader.next_batch().unwrap();
            assert!(b.inputs.iter().all(|&x| x < 256));
        }
        // A shard corrupted after opening is reported when reached, and the position holds.
        let mut bytes = std::fs::read(&paths[1]).unwrap();
        bytes[1024] = 0xff;
        bytes[1025] = 0xff;
        std::fs::write(&paths[1], &bytes).unwrap();
        let mut loader = DataLoader::new(ds.train, 4, 16, 3, false).unwrap();
        let mut err = None;
        for _ in 0..30 {
            match loader.next_batch() {
                Ok(_) => {}
                Err(e) => {
                    err = Some((e, loader.state()));
                    break;
                }
            }
        }
        let (err, state) = err.expect("the corrupt shard is reached");
        assert!(matches!(err, DataError::TokenOutOfRange { token: 65535, .. }), "{err}");
        assert!(err.to_string().contains("d_train_000001.bin"), "{err}");
        assert!(loader.next_batch().is_err());
        assert_eq!(loader.state(), state);
    }

    #[test]
    fn rejects_bad_geometry_and_foreign_states() {
        assert!(matches!(
            DataLoader::new(counting_set(16), 1, 16, 0, true),
            Err(DataError::TooFewTokens { needed: 17, .. })
        ));
        assert!(DataLoader::new(counting_set(100), 0, 8, 0, true).is_err());
        let loader = DataLoader::new(counting_set(100), 1, 8, 0, true).unwrap();
        let state = loader.state();
        assert!(loader.with_rank(2, 2).is_err());

        let mut other = DataLoader::new(counting_set(100), 1, 4, 0, true).unwrap();
        assert!(matches!(
            other.restore(state),
            Err(DataError::ResumeMismatch { setting: "sequence length", .. })
        ));
        let mut other = DataLoader::new(counting_set(120), 1, 8, 0, true).unwrap();
        assert!(other.restore(state).is_err());
        let mut same = DataLoader::new(counting_set(100), 1, 8, 0, true).unwrap();
        assert!(same.restore(LoaderState { sample: 50, ..state }).is_err());
        assert!(same.restore(LoaderState { part: 2, ..state }).is_err());
        same.restore(state).unwrap();
    }

    #[test]
    fn sequential_order_reads_the_file_from_its_first_token_whatever_the_seed() {
        for seed in [1, 2] {
            let mut l = DataLoader::new(counting_set(100), 2, 8, seed, true)
                .unwrap()
                .with_order(DataOrder::Sequential)
                .unwrap();
            assert_eq!(l.order(), DataOrder::Sequential);
            let starts: Vec<usize> = (0..6).flat_map(|_| window_starts(&l.next_batch().unwrap())).collect();
            // 12 windows of 8 fit before the last token; then the second epoch starts over.
            assert_eq!(starts, [0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88]);
            assert_eq!(window_starts(&l.next_batch().unwrap()), [0, 8], "seed {seed}");
        }
        // Its position resumes exactly, and only in the same order.
        let mut a = DataLoader::new(counting_set(100), 2, 8, 3, true)
            .unwrap()
            .with_order(DataOrder::Sequential)
            .unwrap();
        a.next_batch().unwrap();
        let state = a.state();
        let mut b = DataLoader::new(counting_set(100), 2, 8, 3, true)
            .unwrap()
            .with_order(DataOrder::Sequential)
            .unwrap();
        b.restore(state).unwrap();
        assert_eq!(a.next_batch().unwrap(), b.next_batch().unwrap());
        let mut shuffled = DataLoader::new(counting_set(100), 2, 8, 3, true).unwrap();
        assert!(shuffled.restore(state).is_err());
    }
}
