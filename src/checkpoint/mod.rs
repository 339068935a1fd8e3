//! Checkpoints and model files: Trident's resumable checkpoints (safetensors + JSON), llm.c's
//! `gpt2_124M.bin` model files, and export to a directory Hugging Face `transformers` loads.

mod atomic;
mod error;
pub mod hf;
pub mod llmc;
mod lock;
mod state;
mod tensors;

pub use atomic::{check_writable_dir, clean_stale_temporaries, sync_dir, write_file_atomically};
pub use error::CheckpointError;
pub use hf::{export_hf, export_hf_as};
pub use llmc::{read_llmc_model, write_llmc_model};
pub use lock::{lock_save_dir, SaveDirLock, LOCK_FILE};
pub use state::{latest_checkpoint, list_checkpoints, prune_checkpoints, step_dir, AdamWMoments, Checkpoint};
pub use tensors::checksum;
