//! Launch arguments are checked against the kernel's parameter types and count before the
//! kernel runs, and launches on two streams give the right results.

use trident_runtime::{Arg, Buffer, Device, HostKernel, KernelArg, LaunchConfig, ModuleSource, RuntimeError};
use trident_simt::device;

/// `y[i] = a * x[i]` for the calling thread's `i < n`.
///
/// # Safety
/// Inside an emulated launch, with `y` and `x` holding `n` elements.
unsafe fn scale(words: &[u64]) {
    let (y, x) = (<*mut f32>::from_word(words[0]), <*const f32>::from_word(words[1]));
    let (a, n) = (f32::from_word(words[2]), u32::from_word(words[3]));
    let i = device::block_idx()[0] * device::block_dim()[0] + device::thread_idx()[0];
    if i < n {
        // SAFETY: the caller's contract: both hold `n` elements.
        unsafe { *y.add(i as usize) = a * *x.add(i as usize) };
    }
}

static KERNELS: &[&[HostKernel]] = &[&[HostKernel {
    name: "scale",
    params: &["* mut f32", "simt :: Global < f32 >", "f32", "u32"],
    param_names: &["y", "x", "a", "n"],
    entry: scale,
}]];

fn module() -> trident_runtime::Module {
    // An owned PTX string: a module source need not be `'static`.
    let ptx = String::from("// host kernels only");
    Device::Emu.load_module(&ModuleSource::new("test", ptx, KERNELS)).unwrap()
}

#[test]
fn wrong_types_and_counts_are_refused_naming_kernel_parameter_and_types() {
    let f = module().function("scale").unwrap();
    let device = Device::Emu;
    let x = Buffer::from_slice(&device, &[1.0f32, 2.0]).unwrap();
    let ids = Buffer::from_slice(&device, &[1u32, 2]).unwrap();
    let mut y = Buffer::<f32>::zeros(&device, 2).unwrap();
    let cfg = LaunchConfig::for_items(2, 32, 1);
    let (xv, idv) = (x.view(..).unwrap(), ids.view(..).unwrap());
    let mut yv = y.view_mut(..).unwrap();
    let cases: [(Vec<Arg>, usize, &str); 4] = [
        (
            vec![yv.arg_mut(), xv.arg(), Arg::from(2u32), Arg::from(2u32)],
            2,
            "(`a`) is `f32`, the launch passed u32",
        ),
        (
            vec![yv.arg_mut(), idv.arg(), Arg::from(2.0f32), Arg::from(2u32)],
            1,
            "is `Global<f32>`, the launch passed a read-only view of 2 u32",
        ),
        (
            vec![xv.arg(), xv.arg(), Arg::from(2.0f32), Arg::from(2u32)],
            0,
            "is `GlobalMut<f32>`, the launch passed a read-only view",
        ),
        (vec![yv.arg_mut(), xv.arg(), Arg::from(2.0f32), Arg::from(2u64)], 3, "passed u64"),
    ];
    for (args, index, text) in cases {
        // SAFETY: every case is refused before the kernel runs.
        let err = unsafe { f.launch(&cfg, &args) }.unwrap_err();
        assert!(
            matches!(err, RuntimeError::ArgType { kernel: "scale", index: i, .. } if i == index),
            "{err}"
        );
        assert!(err.to_string().contains(text) && err.to_string().contains("kernel `scale`"), "{err}");
    }
    // SAFETY: refused before it runs.
    let err = unsafe { f.launch(&cfg, &[yv.arg_mut(), xv.arg(), Arg::from(2.0f32)]) }.unwrap_err();
    assert!(matches!(err, RuntimeError::ArgCount { expected: 4, got: 3, .. }), "{err}");
    assert!(err.to_string().contains("*mutf32, simt::Global<f32>, f32, u32"), "{err}");
    assert_eq!(y.to_vec().unwrap(), [0.0, 0.0], "no refused launch ran");
}

#[test]
fn launches_on_two_streams_give_their_results_and_foreign_streams_are_refused() {
    let f = module().function("scale").unwrap();
    let device = Device::Emu;
    let (s1, s2) = (device.new_stream().unwrap(), device.new_stream().unwrap());
    let x = Buffer::from_slice(&device, &[1.0f32, 2.0, 3.0]).unwrap();
    let mut y = Buffer::<f32>::zeros(&device, 6).unwrap();
    let cfg = LaunchConfig::for_items(3, 32, 1);
    let xv = x.view(..).unwrap();
    let [mut lo, mut hi] = y.views_mut([0..3, 3..6]).unwrap();
    // SAFETY: each launch touches 3 elements of `x` and of its half of `y`; the halves are
    // disjoint, so the two streams share only `x`, which both only read.
    unsafe {
        f.launch_on(&s1, &cfg, &[lo.arg_mut(), xv.arg(), Arg::from(2.0f32), Arg::from(3u32)]).unwrap();
        f.launch_on(&s2, &cfg, &[hi.arg_mut(), xv.arg(), Arg::from(-1.0f32), Arg::from(3u32)]).unwrap();
    }
    let foreign = Device::Cpu.default_stream();
    let args = [lo.arg_mut(), xv.arg(), Arg::from(2.0f32), Arg::from(3u32)];
    // SAFETY: refused before it runs.
    let err = unsafe { f.launch_on(&foreign, &cfg, &args) }.unwrap_err();
    assert!(matches!(err, RuntimeError::WrongDevice { .. }), "{err}");
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
    assert_eq!(y.to_vec().unwrap(), [2.0, 4.0, 6.0, -1.0, -2.0, -3.0]);
}

#[test]
fn a_view_is_read_as_another_element_type_only_when_whole_and_aligned() {
    let device = Device::Cpu;
    let pairs = Buffer::<u16>::zeros(&device, 8).unwrap();
    assert!(pairs.view(..).unwrap().arg_as::<u32>().is_ok(), "8 u16 are 4 aligned u32");
    let odd = pairs.view(..7).unwrap().arg_as::<u32>().unwrap_err();
    assert!(matches!(odd, trident_runtime::RuntimeError::Reinterpret { bytes: 14, .. }), "{odd}");
    let shifted = pairs.view(1..5).unwrap().arg_as::<u32>().unwrap_err();
    assert!(shifted.to_string().contains("4-byte aligned"), "{shifted}");
}
