//! Emulated devices that map each other's memory, one host thread per rank, and the buffers a
//! collective kernel of `trident_kernels::collective` takes.

use std::time::Duration;

use trident_kernels::collective::layout::{flag_words, status_words, TABLE_WORDS_PER_RANK};
use trident_kernels::collective::wait::describe_timeout;
use trident_simt::{
    host_order, join_host_order, launch, register, set_emulated_device, EmuError, HostKernel, HostOrder,
    LaunchConfig, Registration,
};

/// Lends `buffer` to the emulator as memory every emulated device maps.
pub fn share<T>(buffer: &[T], label: &str) -> Registration {
    let r = register(buffer.as_ptr().cast(), size_of_val(buffer), true, label);
    r.share_with_peers();
    r
}

/// Runs `body(rank)` on `world` host threads at once, each driving emulated device `rank`;
/// returns what each returned, in rank order. The threads start after everything this thread
/// ordered before, and this thread learns what they did when it joins them (the emulator does
/// not see host synchronisation: [`host_order`] carries it).
pub fn on_devices<R: Send>(world: usize, body: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let before = host_order();
    let results: Vec<(R, HostOrder)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (body, before) = (&body, &before);
                scope.spawn(move || {
                    set_emulated_device(Some(rank as u32));
                    join_host_order(before);
                    let result = body(rank);
                    (result, host_order())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank's thread panicked")).collect()
    });
    results
        .into_iter()
        .map(|(result, order)| {
            join_host_order(&order);
            result
        })
        .collect()
}

/// Runs `kernel` with argument words `args` on the running host thread's device.
pub fn launch_on(kernel: &HostKernel, blocks: u32, threads: u32, args: &[u64]) -> Result<(), EmuError> {
    // SAFETY: every caller passes words of buffers it shared (with [`share`]) for the
    // kernel's accesses, or scalars; the emulator checks each access against them.
    unsafe { launch(kernel, &LaunchConfig::linear(blocks, threads), args) }.map(|_| ())
}

/// The host kernel `name` of `list`.
pub fn kernel(list: &'static [HostKernel], name: &str) -> &'static HostKernel {
    list.iter().find(|k| k.name == name).unwrap_or_else(|| panic!("no kernel `{name}`"))
}

/// The buffers of one communicator: per rank its data (`n` elements of `T`), output, f32
/// scratch, flags and status words, and its peer table.
pub struct Comm<T> {
    pub world: usize,
    pub blocks: usize,
    pub data: Vec<Vec<T>>,
    pub out: Vec<Vec<T>>,
    /// Read and written only through the peer tables.
    _scratch: Vec<Vec<f32>>,
    _flags: Vec<Vec<u32>>,
    pub status: Vec<Vec<u32>>,
    tables: Vec<Vec<u64>>,
    _shared: Vec<Registration>,
}

impl<T: Copy + Default + Sync> Comm<T> {
    /// A communicator of `world` ranks whose kernels run `blocks` blocks, over `data`;
    /// `in_place` makes the output the data itself.
    pub fn new(data: Vec<Vec<T>>, blocks: usize, in_place: bool) -> Self {
        let world = data.len();
        let n = data[0].len();
        let out: Vec<Vec<T>> = (0..world).map(|_| vec![T::default(); n]).collect();
        let scratch: Vec<Vec<f32>> = (0..world).map(|_| vec![0.0; n]).collect();
        let flags: Vec<Vec<u32>> = (0..world).map(|_| vec![0; flag_words(world, blocks)]).collect();
        let status: Vec<Vec<u32>> = (0..world).map(|_| vec![0; status_words(blocks)]).collect();
        let mut shared = Vec::new();
        for r in 0..world {
            shared.push(share(&data[r], "data"));
            shared.push(share(&out[r], "output"));
            shared.push(share(&scratch[r], "scratch"));
            shared.push(share(&flags[r], "flags"));
            shared.push(register(status[r].as_ptr().cast(), status[r].len() * 4, true, "status"));
        }
        let mut table = vec![0u64; TABLE_WORDS_PER_RANK * world];
        for p in 0..world {
            table[p] = data[p].as_ptr() as u64;
            table[world + p] = scratch[p].as_ptr() as u64;
            table[2 * world + p] = flags[p].as_ptr() as u64;
            table[3 * world + p] = if in_place { data[p].as_ptr() } else { out[p].as_ptr() } as u64;
        }
        let tables: Vec<Vec<u64>> = vec![table; world];
        for t in &tables {
            shared.push(register(t.as_ptr().cast(), t.len() * 8, true, "peer table"));
        }
        Comm { world, blocks, data, out, _scratch: scratch, _flags: flags, status, tables, _shared: shared }
    }

    /// Runs `kernel` as collective number `seq` on every rank at once (ranks in `absent` do not
    /// launch: a stopped peer), with waits bounded by `timeout`; returns each rank's outcome, a
    /// timeout described as the host would.
    pub fn run(
        &self,
        kernel: &HostKernel,
        seq: u32,
        timeout: Duration,
        absent: &[usize],
    ) -> Vec<Result<(), String>> {
        on_devices(self.world, |r| {
            if absent.contains(&r) {
                return Ok(());
            }
            self.launch(kernel, r, seq, timeout, None)
        })
    }

    /// Launches `kernel` as rank `r` (on the running host thread, which must drive emulated
    /// device `r`) for collective or transfer number `seq`, with `extra` as the argument after
    /// the status words (the peer of a send or receive, the root of a broadcast); returns its
    /// outcome, a timeout described as the host would.
    pub fn launch(
        &self,
        kernel: &HostKernel,
        r: usize,
        seq: u32,
        timeout: Duration,
        extra: Option<u64>,
    ) -> Result<(), String> {
        let mut words = vec![
            self.tables[r].as_ptr() as u64,
            self.data[0].len() as u64,
            r as u64,
            self.world as u64,
            u64::from(seq),
            timeout.as_nanos() as u64,
            self.status[r].as_ptr() as u64,
        ];
        words.extend(extra);
        launch_on(kernel, self.blocks as u32, 32, &words).map_err(|e| e.to_string())?;
        match describe_timeout(kernel.name, r as u32, &self.status[r]) {
            Some(timeout) => Err(timeout.to_string()),
            None => Ok(()),
        }
    }

    /// Sets rank `r`'s data (between collectives, as its host would).
    pub fn set(&mut self, r: usize, values: &[T]) {
        self.data[r].copy_from_slice(values);
    }
}
