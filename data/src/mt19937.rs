//! MT19937, the 32-bit Mersenne Twister (Matsumoto and Nishimura, 1998), with the standard
//! seeding recurrence. Its only use here is to reproduce the sample order of llm.c's data
//! loader, which draws from it; Trident's own order uses [`SplitMix64`](super::SplitMix64).

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER: u32 = 0x8000_0000;
const LOWER: u32 = 0x7fff_ffff;

/// The generator's 624-word state and its position in it.
#[derive(Clone)]
pub struct Mt19937 {
    state: [u32; N],
    /// Index of the next state word to temper; `N` means the state must be regenerated first.
    next: usize,
}

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937").field("next", &self.next).finish_non_exhaustive()
    }
}

impl Mt19937 {
    /// The generator seeded with `seed` by the standard recurrence (`init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Self { state, next: N }
    }

    fn regenerate(&mut self) {
        for i in 0..N {
            let y = (self.state[i] & UPPER) | (self.state[(i + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.state[i] = self.state[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.next = 0;
    }

    /// The next 32-bit output (`genrand_int32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.next >= N {
            self.regenerate();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Fisher-Yates from the last element down, swapping `i` with `next_u32() % (i + 1)`: the
    /// modulo draw (slightly biased for large `i`) is what llm.c's loader uses, so it is kept.
    pub fn shuffle_modulo<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u32() % (i as u32 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_outputs_for_the_default_seed() {
        let mut rng = Mt19937::new(5489);
        let first: Vec<u32> = (0..5).map(|_| rng.next_u32()).collect();
        assert_eq!(first, [3_499_211_612, 581_869_302, 3_890_346_734, 3_586_334_585, 545_404_204]);
        // C++'s std::mt19937 requirement: the 10000th output of a default-seeded engine.
        let mut rng = Mt19937::new(5489);
        let ten_thousandth = (0..10_000).map(|_| rng.next_u32()).last();
        assert_eq!(ten_thousandth, Some(4_123_659_995));
    }

    #[test]
    fn shuffle_is_a_permutation_that_depends_on_the_seed() {
        let shuffled = |seed| {
            let mut v: Vec<u32> = (0..50).collect();
            Mt19937::new(seed).shuffle_modulo(&mut v);
            v
        };
        let a = shuffled(42);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(a, sorted);
        assert_ne!(a, shuffled(43));
        let mut one = [7];
        let mut rng = Mt19937::new(1);
        rng.shuffle_modulo(&mut one);
        assert_eq!(rng.next_u32(), Mt19937::new(1).next_u32(), "one element draws nothing");
    }
}
