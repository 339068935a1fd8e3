//! The network as it is built: NVLink/NVSwitch inside a node, several NICs per node (rails)
//! between nodes, collectives that cross nodes as NCCL runs them (ring, or for all-reduces the
//! tree when it is faster, as NCCL's tuner picks by size), and cluster presets whose figures are
//! sourced.
//!
//! A group of `size` ranks `stride` apart (ranks numbered TP fastest, then DP, then PP, as
//! Megatron-LM's default order) has `k` ranks in each node and spans `n` nodes. Inside one node
//! it is a ring on the node's link. Across nodes, NCCL builds one ring per channel, each leaving
//! a node once through a NIC (with rails, the NIC of a GPU of the group: GPU `i` of every node
//! on NIC `i`'s switch), so per all-reduce each node sends and receives `2 (N - 1) / N` of the
//! buffer over the NICs it has for the group: the bus bandwidth is the node's NIC bandwidth
//! shared by the groups of the same kind running at once on it (`gpus_per_node / k`), capped by
//! the in-node link. NCCL's tree (an in-node chain, then a double binary tree between nodes)
//! moves about `2 x` the buffer per node at the same bandwidth but takes `2 log2 n` inter-node
//! latencies instead of the ring's `2 (N - 1)`; for all-reduces the faster of the two is taken,
//! as NCCL's tuner chooses by size. All-gather and reduce-scatter are rings in NCCL.
//!
//! An all-reduce that stays inside a node whose GPUs are joined by NVLink is priced as
//! Trident's peer-memory kernels run it (`trident_kernels::collective`): the fastest of
//! one-shot, two-shot and ring by the collective time model (`trident_perfmodel::collective`),
//! the model the runtime's algorithm table is generated from, so the planner and the runtime
//! choose alike.

use crate::Cluster;

/// The algorithm a collective's time was taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// A ring.
    Ring,
    /// NCCL's tree (all-reduce only).
    Tree,
    /// Trident's one-shot all-reduce over peer memory (in a node on NVLink).
    OneShot,
    /// Trident's two-shot all-reduce over peer memory (in a node on NVLink).
    TwoShot,
    /// Trident's ring all-reduce over peer memory (in a node on NVLink).
    PeerRing,
}

/// Where a group sits: ranks per node, nodes, and the bandwidth and latency it gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// Ranks of the group in each node.
    pub per_node: usize,
    /// Nodes the group spans.
    pub nodes: usize,
    /// Bus bandwidth the group's ring reaches, bytes/s.
    pub busbw: f64,
    /// Latency of one ring step across the slowest hop, seconds.
    pub latency: f64,
    /// Latency of one in-node step, seconds.
    pub intra_latency: f64,
}

impl Cluster {
    /// The NIC bandwidth (bus bandwidth, bytes/s) one GPU's share of its node's NICs gives.
    pub fn nic_share_per_gpu(&self) -> f64 {
        let gpn = self.gpus_per_node.max(1) as f64;
        self.inter.busbw_bytes_per_s() * self.nics_per_node as f64 / gpn
    }

    /// Where a group of `size` ranks `stride` apart sits and what it gets.
    pub fn placement(&self, stride: usize, size: usize) -> Placement {
        let gpn = self.gpus_per_node.max(1);
        let stride = stride.max(1);
        let size = size.max(1);
        let intra = &self.intra;
        if stride * size <= gpn {
            return Placement {
                per_node: size,
                nodes: 1,
                busbw: intra.busbw_bytes_per_s(),
                latency: intra.latency_s(),
                intra_latency: intra.latency_s(),
            };
        }
        let per_node = if stride >= gpn { 1 } else { (gpn / stride).min(size).max(1) };
        let nodes = size.div_ceil(per_node);
        // The groups of this kind that share a node's NICs at once.
        let groups = (gpn / per_node).max(1) as f64;
        let nic = self.inter.busbw_bytes_per_s() * self.nics_per_node as f64 / groups;
        let busbw = if per_node > 1 { nic.min(intra.busbw_bytes_per_s()) } else { nic };
        Placement {
            per_node,
            nodes,
            busbw,
            latency: self.inter.latency_s(),
            intra_latency: intra.latency_s(),
        }
    }

    /// All-reduce of `bytes` over `size` ranks `stride` apart: the faster of the ring and (across
    /// nodes) the tree, and which it was.
    pub fn all_reduce(&self, bytes: f64, stride: usize, size: usize) -> (f64, Algorithm) {
        if size <= 1 {
            return (0.0, Algorithm::Ring);
        }
        let pl = self.placement(stride, size);
        if pl.nodes <= 1 {
            if let Some(peer) = self.in_node_all_reduce(bytes, size) {
                return peer;
            }
        }
        let n = size as f64;
        let ring = 2.0 * (n - 1.0) / n * bytes / pl.busbw + 2.0 * (n - 1.0) * pl.latency;
        if pl.nodes <= 1 {
            return (ring, Algorithm::Ring);
        }
        let hops = (pl.nodes as f64).log2().ceil();
        let tree = 2.0 * bytes / pl.busbw
            + 2.0 * hops * pl.latency
            + 2.0 * (pl.per_node as f64 - 1.0) * pl.intra_latency;
        if tree < ring {
            (tree, Algorithm::Tree)
        } else {
            (ring, Algorithm::Ring)
        }
    }

    /// An all-reduce of `bytes` over `size` ranks of one node by the peer-memory kernels: the
    /// fastest the collective time model predicts for this node's GPU and in-node link, and
    /// which it is; `None` unless the in-node link is NVLink (the kernels need the GPUs to map
    /// each other's memory).
    pub fn in_node_all_reduce(&self, bytes: f64, size: usize) -> Option<(f64, Algorithm)> {
        use trident_perfmodel::collective::{fastest_all_reduce, predict_bytes, CollectiveKernel, Node};
        if !self.intra.name.starts_with("nvlink") || size < 2 {
            return None;
        }
        let hbm = self.gpu.memory_bytes_per_s() * self.gpu.memory_efficiency;
        let node = Node::with_link(&self.gpu.name, &self.intra, size, hbm);
        let kernel = fastest_all_reduce(&node, size, bytes);
        let algorithm = match kernel {
            CollectiveKernel::OneShotAllReduce => Algorithm::OneShot,
            CollectiveKernel::TwoShotAllReduce => Algorithm::TwoShot,
            _ => Algorithm::PeerRing,
        };
        Some((predict_bytes(&node, kernel, size, bytes).total_s, algorithm))
    }

    /// All-gather (or reduce-scatter) whose full buffer is `bytes`, over `size` ranks `stride`
    /// apart: a ring.
    pub fn all_gather(&self, bytes: f64, stride: usize, size: usize) -> f64 {
        if size <= 1 {
            return 0.0;
        }
        let pl = self.placement(stride, size);
        let n = size as f64;
        (n - 1.0) / n * bytes / pl.busbw + (n - 1.0) * pl.latency
    }

    /// A point-to-point send of `bytes` to the rank `stride` ahead (every rank sending at once,
    /// as pipeline stages do): over the in-node link, or over the GPU's share of its node's NICs.
    pub fn send(&self, bytes: f64, stride: usize) -> f64 {
        if stride < self.gpus_per_node {
            bytes / self.intra.busbw_bytes_per_s() + self.intra.latency_s()
        } else {
            bytes / self.nic_share_per_gpu() + self.inter.latency_s()
        }
    }

    /// The link a group crosses, by name: the in-node link when it fits a node.
    pub fn link_name(&self, stride: usize, size: usize) -> &str {
        if stride * size <= self.gpus_per_node {
            &self.intra.name
        } else {
            &self.inter.name
        }
    }
}

/// A cluster as built: the GPU, its node and the NICs, each figure's source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClusterPreset {
    /// `--cluster` name.
    pub name: &'static str,
    /// The GPU (a hardware-table name).
    pub gpu: &'static str,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// The in-node link (a hardware-table name).
    pub intra: &'static str,
    /// One NIC (a hardware-table name).
    pub nic: &'static str,
    /// NICs per node for the compute fabric.
    pub nics_per_node: usize,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The cluster presets.
pub const CLUSTER_PRESETS: [ClusterPreset; 4] = [
    ClusterPreset {
        name: "dgx-a100",
        gpu: "a100-80gb",
        gpus_per_node: 8,
        intra: "nvlink3",
        nic: "ib-hdr",
        nics_per_node: 8,
        source:
            "NVIDIA DGX A100 user guide: 8 A100 on NVSwitch (600 GB/s per GPU), 8 single-port ConnectX-6 \
                 HDR 200 Gb/s NICs for the compute fabric",
    },
    ClusterPreset {
        name: "dgx-h100",
        gpu: "h100-sxm",
        gpus_per_node: 8,
        intra: "nvlink4",
        nic: "ib-ndr",
        nics_per_node: 8,
        source: "NVIDIA DGX H100 user guide: 8 H100 SXM on NVSwitch (900 GB/s per GPU), 8 ConnectX-7 NDR \
                 400 Gb/s ports (4 twin-port OSFP) for the compute fabric",
    },
    ClusterPreset {
        name: "roce-h100",
        gpu: "h100-sxm",
        gpus_per_node: 8,
        intra: "nvlink4",
        nic: "roce-400g",
        nics_per_node: 8,
        source:
            "Dubey et al. 2024 (Llama 3), section 3.3.1: 8 H100 per server on NVLink, RoCE at 400 Gb/s per \
                 GPU between servers",
    },
    ClusterPreset {
        name: "jean-zay-a100",
        gpu: "a100-80gb",
        gpus_per_node: 8,
        intra: "nvlink3",
        nic: "opa-100",
        nics_per_node: 4,
        source:
            "BigScience 2022 (BLOOM), section 3.4.1: 8 A100 80GB per node on NVLink, 4 Omni-Path 100 Gb/s \
                 links per node",
    },
];

/// The preset named `name`.
pub fn cluster_preset(name: &str) -> Option<&'static ClusterPreset> {
    CLUSTER_PRESETS.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use trident_hardware::{Hardware, Link, Scope};

    use super::*;

    fn link(name: &str, gb_s: f64, latency_us: f64, scope: Scope) -> Link {
        Link { name: name.into(), gb_s, latency_us, efficiency: 1.0, scope, source: String::new() }
    }

    fn cluster(nics: usize) -> Cluster {
        let gpu = Hardware::builtin().gpu("a100-80gb").unwrap().clone();
        Cluster {
            gpu,
            gpus_per_node: 8,
            nodes: 4,
            intra: link("nv", 200.0, 0.0, Scope::IntraNode),
            inter: link("ib", 25.0, 0.0, Scope::InterNode),
            nics_per_node: nics,
        }
    }

    #[test]
    fn groups_share_their_nodes_nics() {
        let c = cluster(8);
        // In a node: the NVLink ring.
        assert_eq!(c.placement(1, 8).busbw, 200e9);
        // DP over 4 nodes with TP 8: one rank a node, 8 groups share 8 NICs: one NIC each.
        let pl = c.placement(8, 4);
        assert_eq!((pl.per_node, pl.nodes, pl.busbw), (1, 4, 25e9));
        // DP 16 with TP 2: 4 ranks a node, 2 groups share 8 NICs: 100 GB/s each.
        let pl = c.placement(2, 16);
        assert_eq!((pl.per_node, pl.nodes, pl.busbw), (4, 4, 100e9));
        // Half the NICs, half the bandwidth.
        assert_eq!(cluster(4).placement(2, 16).busbw, 50e9);
        // A ring all-reduce of 1 GB over 16 ranks at 100 GB/s bus bandwidth: 2 x 15/16 x 10 ms.
        let (t, alg) = c.all_reduce(1e9, 2, 16);
        assert_eq!(alg, Algorithm::Ring);
        assert!((t - 2.0 * 15.0 / 16.0 * 0.01).abs() < 1e-12, "{t}");
        // Pipeline sends across nodes: one GPU's share of the NICs.
        assert!((c.send(25e9, 64) - 1.0).abs() < 1e-12);
        assert!((cluster(4).send(25e9, 64) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_tree_wins_small_all_reduces_across_many_nodes() {
        let mut c = cluster(8);
        c.inter.latency_us = 10.0;
        c.nodes = 64;
        // 64 ranks one per node: the ring takes 126 latencies, the tree 2 x 6.
        let (small, alg) = c.all_reduce(1e3, 8, 64);
        assert_eq!(alg, Algorithm::Tree, "{small}");
        let (_, alg) = c.all_reduce(1e10, 8, 64);
        assert_eq!(alg, Algorithm::Ring);
    }

    #[test]
    fn an_nvlink_node_prices_its_all_reduce_by_the_peer_kernels_model() {
        let hw = Hardware::builtin();
        let mut c = cluster(8);
        c.gpu = hw.gpu("h100-sxm").unwrap().clone();
        c.intra = hw.link("nvlink4").unwrap().clone();
        // TP 8 inside a node: the model's fastest, which is the table's choice.
        let (small, alg) = c.all_reduce(4096.0, 1, 8);
        assert_eq!(alg, Algorithm::OneShot, "{small}");
        let (big, alg) = c.all_reduce(256.0 * 1048576.0, 1, 8);
        assert_eq!(alg, Algorithm::TwoShot, "{big}");
        let node = trident_perfmodel::collective::Node::named("h100", 8).unwrap();
        let want = trident_perfmodel::collective::predict_bytes(
            &node,
            trident_perfmodel::collective::CollectiveKernel::TwoShotAllReduce,
            8,
            256.0 * 1048576.0,
        );
        assert!((big - want.total_s).abs() < 1e-15, "{big} {want:?}");
        // Across nodes it stays NCCL's ring or tree; a link that is not NVLink keeps the ring.
        assert!(matches!(c.all_reduce(1e9, 8, 4).1, Algorithm::Ring | Algorithm::Tree));
        assert_eq!(cluster(8).all_reduce(1e6, 1, 8).1, Algorithm::Ring);
    }

    #[test]
    fn presets_name_tables_entries() {
        let hw = Hardware::builtin();
        for p in CLUSTER_PRESETS {
            assert!(hw.gpu(p.gpu).is_ok(), "{}", p.name);
            assert!(hw.link(p.intra).is_ok() && hw.link(p.nic).is_ok(), "{}", p.name);
            assert!(!p.source.is_empty());
        }
        assert_eq!(cluster_preset("dgx-h100").unwrap().nics_per_node, 8);
    }
}
