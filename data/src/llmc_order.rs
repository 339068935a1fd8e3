//! The batch order of llm.c's data loader, reproduced so that a run can be compared with llm.c
//! step for step.
//!
//! llm.c serves each batch as one contiguous run of `B x T + 1` tokens: row `b` is the window
//! starting `b x T` into it. A part of `n` tokens holds `(n - 1) / (world x B x T)` such batch
//! slots; slot `i` starts at `i x world x B x T`, and rank `r` reads `r x B x T` into it. With
//! shuffling, an MT19937 seeded with `42 + rank` draws, at the start of every epoch, a
//! permutation of the part order (applied to the previous epoch's order, not to the identity),
//! and, each time a part is entered, a permutation of its slots. Without shuffling, parts and
//! slots go in order. Every draw is a modulo Fisher-Yates ([`Mt19937::shuffle_modulo`]). A new
//! epoch (and its draws) begins only when a batch is asked for past the end of the last part.

use super::mt19937::Mt19937;
use super::DataError;

/// llm.c seeds rank `r`'s shuffling generator with this plus `r`.
pub const LLMC_SHUFFLE_SEED: u32 = 42;

/// One rank's position in llm.c's batch order (see the module docs).
#[derive(Clone, Debug)]
pub struct LlmcOrder {
    /// The generator's seed, when shuffling.
    shuffle_seed: Option<u32>,
    rng: Option<Mt19937>,
    part_lens: Vec<usize>,
    /// Tokens one slot spans over all ranks: `world x B x T`.
    slot_tokens: usize,
    /// Where this rank's batch starts inside a slot: `rank x B x T`.
    rank_offset: usize,
    part_order: Vec<usize>,
    slot_order: Vec<u32>,
    slots: usize,
    epoch: u64,
    /// Index into `part_order`.
    part: usize,
    /// Index into the current part's slots.
    sample: usize,
}

impl LlmcOrder {
    /// The order for rank `rank` of `world`, each serving `batch_tokens` (`B x T`) per batch,
    /// over parts of `part_lens` tokens. Like llm.c, every part must hold at least one slot.
    pub fn new(
        part_lens: Vec<usize>,
        batch_tokens: usize,
        rank: usize,
        world: usize,
        shuffle: bool,
    ) -> Result<Self, DataError> {
        let slot_tokens = batch_tokens * world;
        if let Some(&short) = part_lens.iter().find(|&&n| n < slot_tokens + 1) {
            return Err(DataError::InvalidArgument(format!(
                "llm.c's data order needs every shard to hold one batch for every rank plus one \
                 token ({} tokens); one has {short}. Use fewer or shorter sequences, or the \
                 default data order",
                slot_tokens + 1
            )));
        }
        let mut order = Self {
            shuffle_seed: shuffle.then(|| LLMC_SHUFFLE_SEED.wrapping_add(rank as u32)),
            rng: None,
            part_order: Vec::new(),
            part_lens,
            slot_tokens,
            rank_offset: rank * batch_tokens,
            slot_order: Vec::new(),
            slots: 0,
            epoch: 0,
            part: 0,
            sample: 0,
        };
        order.restart();
        Ok(order)
    }

    /// Back to the state of a new order: the first batch of epoch 0, generator freshly seeded.
    pub fn restart(&mut self) {
        self.rng = self.shuffle_seed.map(Mt19937::new);
        self.part_order = (0..self.part_lens.len()).collect();
        self.epoch = 0;
        self.begin_epoch();
    }

    /// Completed epochs, the index into this epoch's part order, and the slots already served
    /// from the current part.
    pub fn position(&self) -> (u64, usize, usize) {
        (self.epoch, self.part, self.sample)
    }

    /// Batch slots in one pass over all parts.
    pub fn slots_per_epoch(&self) -> usize {
        self.part_lens.iter().map(|n| (n - 1) / self.slot_tokens).sum()
    }

    fn begin_epoch(&mut self) {
        self.part = 0;
        if let Some(rng) = self.rng.as_mut() {
            rng.shuffle_modulo(&mut self.part_order);
        }
        self.enter_part();
    }

    fn enter_part(&mut self) {
        self.sample = 0;
        self.slots = (self.part_lens[self.part_order[self.part]] - 1) / self.slot_tokens;
        if let Some(rng) = self.rng.as_mut() {
            self.slot_order = (0..self.slots as u32).collect();
            rng.shuffle_modulo(&mut self.slot_order);
        }
    }

    fn advance_part(&mut self) {
        if self.part + 1 == self.part_lens.len() {
            self.epoch += 1;
            self.begin_epoch();
        } else {
            self.part += 1;
            self.enter_part();
        }
    }

    /// This rank's next batch: the part and the token where its `B x T + 1` tokens start.
    pub fn next_batch(&mut self) -> (usize, usize) {
        if self.sample >= self.slots {
            self.advance_part();
        }
        let slot = if self.rng.is_some() { self.slot_order[self.sample] as usize } else { self.sample };
        self.sample += 1;
        (self.part_order[self.part], slot * self.slot_tokens + self.rank_offset)
    }

    /// Restarts and replays up to `position` (as [`position`](Self::position) gave it), so the
    /// batches that follow are those the saved order would have served next.
    pub fn seek(&mut self, (epoch, part, sample): (u64, usize, usize)) -> Result<(), DataError> {
        if part >= self.part_lens.len() {
            return Err(DataError::BadState(format!(
                "part {part} is past the {} parts of the data",
                self.part_lens.len()
            )));
        }
        self.restart();
        while (self.epoch, self.part) < (epoch, part) {
            self.advance_part();
        }
        if sample > self.slots {
            return Err(DataError::BadState(format!(
                "sample {sample} is past the {} batches of part {}",
                self.slots, self.part_order[self.part]
            )));
        }
        self.sample = sample;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(order: &mut LlmcOrder, n: usize) -> Vec<(usize, usize)> {
        (0..n).map(|_| order.next_batch()).collect()
    }

    #[test]
    fn sequential_order_reads_slots_in_place() {
        let mut order = LlmcOrder::new(vec![1000, 600], 256, 0, 1, false).unwrap();
        // (1000 - 1) / 256 = 3 slots, then (600 - 1) / 256 = 2, then around again.
        let expected = [(0, 0), (0, 256), (0, 512), (1, 0), (1, 256), (0, 0)];
        assert_eq!(take(&mut order, 6), expected);
        let mut rank1 = LlmcOrder::new(vec![1000], 100, 1, 2, false).unwrap();
        // (1000 - 1) / 200 = 4 slots of two ranks; rank 1 reads the second half of each.
        assert_eq!(take(&mut rank1, 5), [(0, 100), (0, 300), (0, 500), (0, 700), (0, 100)]);
    }

    /// The draws spelled out: epoch 0 permutes the parts, then each entered part its slots;
    /// epoch 1 permutes the previous part order again.
    #[test]
    fn shuffled_order_follows_the_documented_draws() {
        let lens = vec![2000, 1300, 800];
        let mut order = LlmcOrder::new(lens.clone(), 128, 0, 1, true).unwrap();
        let mut rng = Mt19937::new(42);
        let mut parts = vec![0, 1, 2];
        let mut expected = Vec::new();
        for _epoch in 0..3 {
            rng.shuffle_modulo(&mut parts);
            for &p in &parts {
                let mut slots: Vec<usize> = (0..(lens[p] - 1) / 128).collect();
                rng.shuffle_modulo(&mut slots);
                expected.extend(slots.iter().map(|&s| (p, s * 128)));
            }
        }
        assert_eq!(order.slots_per_epoch(), 15 + 10 + 6);
        assert_eq!(take(&mut order, expected.len()), expected);
    }

    /// Recorded from llm.c's own data loader (commit f1e2ace) over three shards of 2000, 1300
    /// and 800 tokens, B = 2, T = 16, rank 1 of 2, shuffled: batches 0-7 and 59-69, which cross
    /// the first epoch's end (63 slots) into the reshuffled second epoch.
    #[test]
    fn matches_batches_recorded_from_llmc() {
        let mut order = LlmcOrder::new(vec![2000, 1300, 800], 32, 1, 2, true).unwrap();
        let served = take(&mut order, 70);
        let first = [(2, 544), (2, 672), (2, 416), (2, 224), (2, 288), (2, 96), (2, 608), (2, 32)];
        assert_eq!(served[..8], first);
        let boundary = [
            (1, 736),
            (1, 288),
            (1, 1120),
            (1, 32),
            (1, 96),
            (1, 864),
            (1, 480),
            (1, 736),
            (1, 1184),
            (1, 672),
            (1, 608),
        ];
        assert_eq!(served[59..], boundary);
    }

    #[test]
    fn seeking_replays_to_the_same_place() {
        let lens = vec![3000, 900, 1700];
        let mut a = LlmcOrder::new(lens.clone(), 64, 1, 3, true).unwrap();
        take(&mut a, 57);
        let mut b = LlmcOrder::new(lens.clone(), 64, 1, 3, true).unwrap();
        b.seek(a.position()).unwrap();
        assert_eq!(take(&mut a, 40), take(&mut b, 40));
        assert!(b.seek((0, 7, 0)).is_err());
        let err = LlmcOrder::new(vec![3000, 100], 64, 0, 2, true).unwrap_err();
        assert!(err.to_string().contains("129 tokens"), "{err}");
    }
}
