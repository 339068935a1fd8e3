//! Every kernel's barriers and warp collectives in the PTX, held to the reviewed table
//! `kernels/collectives.tsv` (`trident_ptx_builder::checks` says why: a `.aligned` barrier or
//! warp collective that a compiler pass duplicated into divergent branches hangs a GPU, and
//! the emulator, which runs the source, cannot see it).

use std::path::PathBuf;

#[test]
fn every_functions_barriers_and_collectives_match_the_reviewed_table() {
    let ptx = trident::kernels::PTX.expect("built with the `cuda` feature");
    let table = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels").join("collectives.tsv");
    let checked = trident_ptx_builder::checks::check_collectives_table(
        ptx,
        &table,
        "cargo test --test ptx_collectives",
    );
    if let Err(why) = checked {
        panic!("{why}");
    }
}
