//! The passes of a batched MSM over a witness made a window at a time (gpu/window.rs): each
//! pass's points and the witness positions its scalars come from. Arithmetic only.

use std::ops::Range;

/// A section's passes: the points of each and the witness positions its scalars are read from
/// (a pass of L reads its own stretch of the aux; one of A or B the variables its points
/// name, which are ascending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Passes {
    pub points: Vec<Range<usize>>,
    pub windows: Vec<Range<usize>>,
}

impl Passes {
    /// Passes of `chunk` points over `n` points whose scalars are witness positions
    /// `first + i` (L's: the aux after the inputs).
    pub fn contiguous(n: usize, chunk: usize, first: usize) -> Passes {
        let points = fixed(n, chunk);
        let windows = points
            .iter()
            .map(|r| first + r.start..first + r.end)
            .collect();
        Passes { points, windows }
    }

    /// Passes of at most `chunk` points over the points of `vars` (ascending witness
    /// positions), each ending early where its window — the positions from its first
    /// variable to its last — would pass `max_window`.
    pub fn windowed(vars: &[u32], chunk: usize, max_window: usize) -> Passes {
        let (chunk, max_window) = (chunk.max(1), max_window.max(1));
        let mut p = Passes::default();
        let mut start = 0;
        while start < vars.len() {
            let lo = vars[start] as usize;
            let cap = (start + chunk).min(vars.len());
            // The last point whose variable still fits the window, by bisection.
            let fits = vars[start..cap].partition_point(|&v| (v as usize) < lo + max_window);
            let end = start + fits.max(1);
            p.points.push(start..end);
            p.windows.push(lo..vars[end - 1] as usize + 1);
            start = end;
        }
        p
    }

    /// The most positions one window holds.
    pub fn widest(&self) -> usize {
        self.windows.iter().map(|w| w.len()).max().unwrap_or(0)
    }
}

/// Passes of `chunk` points over `n`.
pub fn fixed(n: usize, chunk: usize) -> Vec<Range<usize>> {
    let chunk = chunk.max(1);
    (0..n.div_ceil(chunk))
        .map(|i| i * chunk..((i + 1) * chunk).min(n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_passes_cover_every_point_in_order_within_their_bounds() {
        // Dense, then sparse, then a lone far variable.
        let mut vars: Vec<u32> = (0..1000).collect();
        vars.extend((1000..9000).step_by(7));
        vars.push(1 << 20);
        for (chunk, max_window) in [(64, 128), (100, 100), (1 << 12, 300), (5, 1)] {
            let p = Passes::windowed(&vars, chunk, max_window);
            assert_eq!(p.points.len(), p.windows.len());
            let mut next = 0;
            for (r, w) in p.points.iter().zip(&p.windows) {
                assert_eq!(r.start, next, "passes leave a gap or overlap");
                assert!(!r.is_empty() && r.len() <= chunk);
                assert_eq!(w.start, vars[r.start] as usize);
                assert_eq!(w.end, vars[r.end - 1] as usize + 1);
                // A window is within its bound, unless a single point makes it.
                assert!(
                    w.len() <= max_window || r.len() == 1,
                    "{w:?} over {max_window}"
                );
                // A pass ends early only where the next point would not fit its window.
                if r.len() < chunk && r.end < vars.len() {
                    assert!(vars[r.end] as usize + 1 - w.start > max_window);
                }
                next = r.end;
            }
            assert_eq!(next, vars.len());
        }
        assert_eq!(Passes::windowed(&[], 8, 8), Passes::default());
    }

    #[test]
    fn contiguous_passes_read_their_own_stretch() {
        let p = Passes::contiguous(10, 4, 3);
        assert_eq!(p.points, [0..4, 4..8, 8..10]);
        assert_eq!(p.windows, [3..7, 7..11, 11..13]);
        assert_eq!(p.widest(), 4);
        assert_eq!(fixed(0, 4), Vec::<Range<usize>>::new());
    }
}
