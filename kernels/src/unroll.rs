//! [`unroll!`](crate::unroll): a loop body written once, expanded once per index.

/// Expands `body` once per index in the list, with `i` bound to it as a `usize` constant:
/// LLVM has no unroll pragma, and register arrays (accumulators, fragments) stay in registers
/// only when every index into them is a constant; a loop left rolled puts them in local memory.
///
/// ```text
/// unroll!(i in [0, 1, 2, 3] { acc[i] += a[i] * b; });
/// unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7] where i < HS / 16 => { ... });
/// ```
///
/// The `where` form runs the body only for the indices that meet the bound, a constant after
/// monomorphisation (a tile size of a generic kernel), so the copies past it fold away: the
/// list is the largest count the bound can take.
#[macro_export]
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {
        $({
            let $i: usize = $v;
            $body
        })*
    };
    ($i:ident in [$($v:literal),*] where $j:ident < $n:expr => $body:block) => {
        $({
            let $i: usize = $v;
            if $j < $n $body
        })*
    };
}
