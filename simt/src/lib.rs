//! SIMT emulator core.
