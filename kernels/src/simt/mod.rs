//! Placeholder until the emulator branch lands: indices only.
#[cfg(target_arch = "nvptx64")]
pub fn thread_idx_x() -> u32 {
    unsafe { core::arch::nvptx::_thread_idx_x() as u32 }
}
#[cfg(target_arch = "nvptx64")]
pub fn block_idx_x() -> u32 {
    unsafe { core::arch::nvptx::_block_idx_x() as u32 }
}
#[cfg(target_arch = "nvptx64")]
pub fn block_dim_x() -> u32 {
    unsafe { core::arch::nvptx::_block_dim_x() as u32 }
}
#[cfg(target_arch = "nvptx64")]
pub fn grid_dim_x() -> u32 {
    unsafe { core::arch::nvptx::_grid_dim_x() as u32 }
}
#[cfg(not(target_arch = "nvptx64"))]
pub fn thread_idx_x() -> u32 {
    todo!()
}
#[cfg(not(target_arch = "nvptx64"))]
pub fn block_idx_x() -> u32 {
    todo!()
}
#[cfg(not(target_arch = "nvptx64"))]
pub fn block_dim_x() -> u32 {
    todo!()
}
#[cfg(not(target_arch = "nvptx64"))]
pub fn grid_dim_x() -> u32 {
    todo!()
}
