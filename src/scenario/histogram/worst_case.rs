//! The worst case of a measured quantity over many cases, for checks that hold a maximum
//! against a bound and say where it occurred.

/// The largest value seen, where, and over how many cases. A NaN is the worst of all: it
/// sticks, so the check built from it fails.
#[derive(Debug, Clone, Default)]
pub struct WorstCase {
    pub value: f64,
    /// Description of the case that gave `value`.
    pub at: String,
    pub count: usize,
}

impl WorstCase {
    /// Records one case; `at` describes it and is only evaluated if it is the new worst.
    pub fn add(&mut self, value: f64, at: impl FnOnce() -> String) {
        self.count += 1;
        if self.value.is_nan() {
            return;
        }
        if self.count == 1 || value.is_nan() || value > self.value {
            self.value = value;
            self.at = at();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_maximum_and_nan_sticks() {
        let mut w = WorstCase::default();
        w.add(1.0, || "a".into());
        w.add(3.0, || "b".into());
        w.add(2.0, || "c".into());
        assert_eq!((w.value, w.at.as_str(), w.count), (3.0, "b", 3));
        w.add(f64::NAN, || "d".into());
        w.add(5.0, || "e".into());
        assert!(w.value.is_nan());
        assert_eq!(w.at, "d");
    }
}
