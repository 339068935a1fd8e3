//! Collectives for Trident: communicators, process groups, ring algorithms and transports.
