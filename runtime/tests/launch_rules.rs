//! Launches a GPU refuses are refused on `Emu` too, under the runtime's own launch policy:
//! the dynamic shared memory opt-in and the registers a block needs.

use std::panic::Location;

use trident_runtime::{Device, HostKernel, LaunchConfig, ModuleSource, RuntimeError};
use trident_simt::device;

/// Declares 16 bytes of static shared memory and touches the dynamic window's first byte, as
/// the tensor-core GEMMs do.
fn static_and_dynamic(_: &[u64]) {
    let s = device::static_shared::<u32>("launch_rules::S", 4, Location::caller());
    if device::linear_thread_id() == 0 {
        s.store(0, 1);
        device::dynamic_shared::<u8>(0, 1, Location::caller()).store(0, 1);
    }
}

fn nothing(_: &[u64]) {}

static KERNELS: &[&[HostKernel]] = &[&[
    HostKernel { name: "static_and_dynamic", params: &[], param_names: &[], entry: static_and_dynamic },
    HostKernel { name: "big_registers", params: &[], param_names: &[], entry: nothing },
    HostKernel { name: "unlisted", params: &[], param_names: &[], entry: nothing },
]];

/// Registers per thread as `ptxas -v` would report them; the largest over the archs counts.
const RESOURCES: &str = "# kernel\tarch\tregisters\tstatic smem\n\
                         big_registers\tsm_80\t96\t0\n\
                         big_registers\tsm_90\t128\t0\n\
                         static_and_dynamic\tsm_90\t32\t16\n";

fn one_block(threads: u32, dynamic_smem_bytes: u32) -> LaunchConfig {
    LaunchConfig { grid: [1, 1, 1], block: [threads, 1, 1], dynamic_smem_bytes }
}

fn emulator_message(error: RuntimeError) -> String {
    assert!(matches!(error, RuntimeError::Emulator(_)), "{error}");
    error.to_string()
}

#[test]
fn the_runtime_opts_in_to_dynamic_shared_memory_that_with_static_exceeds_48_kib() {
    let module = Device::Emu.load_module(&ModuleSource::new("rules", "", KERNELS)).unwrap();
    let f = module.function("static_and_dynamic").unwrap();
    // 16 static + 49152 dynamic bytes: launchable only opted in, which the runtime does.
    // SAFETY: the kernel takes no arguments and touches only shared memory.
    unsafe { f.launch(&one_block(64, 48 * 1024), &[]) }.unwrap();
    // SAFETY: as above.
    unsafe { f.launch(&one_block(64, 100 * 1024), &[]) }.unwrap();
    // A smaller launch after a larger one runs under the larger opt-in; so does another
    // `Function` of the same kernel (one `CUfunction` to the driver).
    let again = module.function("static_and_dynamic").unwrap();
    // SAFETY: as above.
    unsafe { again.launch(&one_block(64, 1), &[]) }.unwrap();
    // More than a block can have opted in to is still refused: 16 static + 227 KiB.
    // SAFETY: as above.
    let error = unsafe { f.launch(&one_block(64, 227 * 1024), &[]) }.unwrap_err();
    let message = emulator_message(error);
    assert!(
        message.contains("kernel `static_and_dynamic`")
            && message.contains("16 bytes of static shared memory plus the 232448")
            && message.contains("MAX_DYNAMIC_SHARED_SIZE_BYTES"),
        "{message}"
    );
}

#[test]
fn a_block_needing_more_registers_than_an_sm_has_is_refused() {
    let source = ModuleSource::new("rules", "", KERNELS).with_resources(RESOURCES);
    let module = Device::Emu.load_module(&source).unwrap();
    let big = module.function("big_registers").unwrap();
    // 512 threads at 128 registers: 16 warps of 4096, exactly the 65536 an SM has.
    // SAFETY: the kernel takes no arguments and touches no memory.
    unsafe { big.launch(&one_block(512, 0), &[]) }.unwrap();
    // SAFETY: as above.
    let error = unsafe { big.launch(&one_block(1024, 0), &[]) }.unwrap_err();
    let message = emulator_message(error);
    assert!(
        message.contains("kernel `big_registers`")
            && message.contains("1024 threads at 128 registers per thread need 131072 registers per block")
            && message.contains("65536 registers per block"),
        "{message}"
    );
    // 544 threads round up to 17 warps: 69632 registers.
    // SAFETY: as above.
    let error = unsafe { big.launch(&one_block(544, 0), &[]) }.unwrap_err();
    assert!(emulator_message(error).contains("69632"));

    // A kernel the table does not list, and any kernel of a module without a table, is not
    // checked.
    let unlisted = module.function("unlisted").unwrap();
    // SAFETY: as above.
    unsafe { unlisted.launch(&one_block(1024, 0), &[]) }.unwrap();
    let untabled = Device::Emu.load_module(&ModuleSource::new("rules", "", KERNELS)).unwrap();
    // SAFETY: as above.
    unsafe { untabled.function("big_registers").unwrap().launch(&one_block(1024, 0), &[]) }.unwrap();
}

#[test]
fn a_malformed_resource_table_is_refused_naming_the_line() {
    let source =
        ModuleSource::new("rules", "", KERNELS).with_resources("# ok\nbig_registers\tsm_90\tmany\t0\n");
    let error = Device::Emu.load_module(&source).unwrap_err();
    assert!(matches!(error, RuntimeError::Resources { line: 2, .. }), "{error}");
    let source =
        ModuleSource::new("rules", "", KERNELS).with_resources(String::from("big_registers sm_90 1 0"));
    let error = Device::Emu.load_module(&source).unwrap_err();
    assert!(error.to_string().contains("line 1"), "{error}");
}
