//! Outputs against f64 references: the norm-wise relative error, in which any NaN or infinite
//! difference counts as an infinite error (a fold with `f64::max` would skip a NaN and let a
//! poisoned, never-written element pass).

/// The values of `x` as f64, for the references.
pub fn f64s(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// `max |got - want| / max |want|`, the norm-wise relative error; infinite when any element of
/// `got` or `want` is NaN or infinite (their difference is then not a finite number).
///
/// # Panics
/// When the lengths differ.
#[track_caller]
pub fn rel_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "lengths differ: got {}, want {}", got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())).max(f64::MIN_POSITIVE);
    let mut err = 0.0f64;
    for (&g, &w) in got.iter().zip(want) {
        let d = (f64::from(g) - w).abs();
        if !d.is_finite() {
            return f64::INFINITY;
        }
        err = err.max(d);
    }
    err / scale
}

/// Asserts `rel_err(got, want) <= tol`, naming `what` and the worst element.
///
/// # Panics
/// When the error is over `tol` (or not a number), or the lengths differ.
#[track_caller]
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    let e = rel_err(got, want);
    if e <= tol {
        return;
    }
    // The worst element: a non-finite difference first, else the largest.
    let (i, g, w) = got
        .iter()
        .zip(want)
        .enumerate()
        .max_by(|a, b| {
            let d = |(g, w): (&f32, &f64)| {
                let d = (f64::from(*g) - *w).abs();
                if d.is_finite() {
                    d
                } else {
                    f64::INFINITY
                }
            };
            d(a.1).total_cmp(&d(b.1))
        })
        .map(|(i, (&g, &w))| (i, g, w))
        .expect("a non-empty comparison (an empty one has no error)");
    panic!("{what}: relative error {e:.3e} > {tol:.1e}; worst element {i}: got {g}, want {w}");
}

/// Asserts `|got - want| <= rel · |want| + abs` for every element (a NaN or infinite `got`
/// fails), naming `what` and the first element that does not: for outputs whose error bound is
/// per element (one rounding of each value) rather than norm-wise.
///
/// # Panics
/// On the first element out of bounds, or when the lengths differ.
#[track_caller]
pub fn assert_each(what: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ: got {}, want {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // Written so that a NaN on either side fails the comparison.
        let ok = (f64::from(g) - w).abs() <= rel * w.abs() + abs;
        assert!(ok, "{what}: element {i} of {}: got {g}, want {w}", got.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_values_pass_and_far_ones_fail() {
        let want = [1.0, -2.0, 4.0];
        assert_eq!(rel_err(&[1.0, -2.0, 4.0], &want), 0.0);
        assert_eq!(rel_err(&[1.0, -2.0, 5.0], &want), 0.25);
        assert_close("near", &[1.0, -2.0, 4.0 + 4.0 * f32::EPSILON], &want, 1e-6);
        assert!(std::panic::catch_unwind(|| assert_close("far", &[1.0, -2.0, 5.0], &want, 0.2)).is_err());
    }

    #[test]
    fn a_nan_output_fails_wherever_it_is() {
        for at in 0..3 {
            let mut got = [1.0f32, -2.0, 4.0];
            got[at] = f32::NAN;
            let e = rel_err(&got, &[1.0, -2.0, 4.0]);
            assert_eq!(e, f64::INFINITY, "NaN at {at}");
            let caught = std::panic::catch_unwind(|| assert_close("nan", &got, &[1.0, -2.0, 4.0], 1e30));
            assert!(caught.is_err(), "NaN at {at} passed assert_close");
        }
        // A NaN in the reference fails too, and so does the poison.
        assert_eq!(rel_err(&[1.0], &[f64::NAN]), f64::INFINITY);
        assert_eq!(rel_err(&[crate::POISON, 1.0], &[0.0, 1.0]), f64::INFINITY);
    }

    #[test]
    fn an_infinite_output_fails() {
        for inf in [f32::INFINITY, f32::NEG_INFINITY] {
            assert_eq!(rel_err(&[1.0, inf], &[1.0, 2.0]), f64::INFINITY);
            // Even against an infinite reference: inf - inf is not a number.
            assert_eq!(rel_err(&[inf], &[f64::from(inf)]), f64::INFINITY);
            let caught = std::panic::catch_unwind(|| assert_close("inf", &[1.0, inf], &[1.0, 2.0], 1e30));
            assert!(caught.is_err(), "{inf} passed assert_close");
        }
    }

    #[test]
    fn each_element_is_held_to_its_own_bound() {
        assert_each("ok", &[1.0, 100.5], &[1.0, 100.0], 0.01, 0.0);
        assert_each("abs", &[0.001], &[0.0], 0.0, 0.002);
        for bad in [[1.0, 102.0], [f32::NAN, 100.0], [1.0, f32::INFINITY]] {
            let caught = std::panic::catch_unwind(|| assert_each("bad", &bad, &[1.0, 100.0], 0.01, 0.0));
            assert!(caught.is_err(), "{bad:?} passed");
        }
        assert!(std::panic::catch_unwind(|| assert_each("short", &[1.0], &[1.0, 2.0], 1.0, 1.0)).is_err());
    }

    #[test]
    fn zero_references_compare_exactly_and_lengths_must_agree() {
        assert_eq!(rel_err(&[0.0, 0.0], &[0.0, 0.0]), 0.0);
        assert!(rel_err(&[1e-30, 0.0], &[0.0, 0.0]) > 1e200);
        assert!(std::panic::catch_unwind(|| rel_err(&[1.0], &[1.0, 2.0])).is_err());
    }

    #[test]
    fn the_worst_element_is_named() {
        let caught =
            std::panic::catch_unwind(|| assert_close("x", &[1.0, 9.0, f32::NAN], &[1.0, 2.0, 3.0], 0.1));
        let msg = caught.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("worst element 2: got NaN, want 3"), "{msg}");
    }
}
