//! Planning for this machine by running the real trainer (`trident plan --calibrate`,
//! `trident train --dry-run`): the machine's rates measured ([`machine`]), a layout's real ops
//! timed at its shapes ([`local`]), its step simulated with the ranks sharing the cores
//! ([`shared`]), the bytes each rank of the trainer holds ([`rank_memory`]), the planner's
//! layouts run this way ([`local_search`]), and a finished run set beside its prediction
//! ([`compare`]).
//!
//! The cluster planner itself, which knows no trainer, is the `trident-plan` crate
//! ([`crate::plan`]).

pub mod compare;
pub mod local;
pub mod local_search;
pub mod machine;
pub mod rank_memory;
pub mod shared;

#[cfg(test)]
mod tests;
