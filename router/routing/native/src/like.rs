//! JMS LIKE in time linear in the text: the pattern is split at its `%` into segments; the first is anchored at
//! the start, the last at the end, and each middle one is found leftmost after the previous one. Leftmost is
//! always safe for `%`-separated segments (a later match can only leave less text for what follows), so no
//! backtracking is ever needed. A segment of at most 64 code points is found with one Shift-And scan.

use crate::plan::FxMap;

/// One code point of a segment: `None` is `_` (any one character).
type Unit = Option<u32>;

#[derive(Debug, Clone)]
struct Segment {
    units: Vec<Unit>,
    /// Shift-And masks (segments of at most 64 units): bit i is set where unit i accepts the character.
    masks: FxMap<u32, u64>,
    any_mask: u64,
}

impl Segment {
    fn new(units: Vec<Unit>) -> Segment {
        let mut masks: FxMap<u32, u64> = FxMap::default();
        let mut any_mask = 0u64;
        if units.len() <= 64 {
            for (i, u) in units.iter().enumerate() {
                match u {
                    None => any_mask |= 1 << i,
                    Some(c) => *masks.entry(*c).or_insert(0) |= 1 << i,
                }
            }
        }
        Segment {
            units,
            masks,
            any_mask,
        }
    }

    fn matches_at(&self, text: &[u32], at: usize) -> bool {
        self.units
            .iter()
            .zip(&text[at..at + self.units.len()])
            .all(|(u, c)| u.is_none_or(|want| want == *c))
    }

    /// The leftmost start `i >= from` with the segment matching `text[i..i + len]` and `i + len <= to`.
    fn find(&self, text: &[u32], from: usize, to: usize) -> Option<usize> {
        let k = self.units.len();
        if k == 0 {
            return Some(from);
        }
        if from + k > to {
            return None;
        }
        if k <= 64 {
            let done = 1u64 << (k - 1);
            let mut state = 0u64;
            for (j, c) in text.iter().enumerate().take(to).skip(from) {
                let mask = self.any_mask | self.masks.get(c).copied().unwrap_or(0);
                state = ((state << 1) | 1) & mask;
                if state & done != 0 {
                    return Some(j + 1 - k);
                }
            }
            return None;
        }
        (from..=to - k).find(|&i| self.matches_at(text, i))
    }
}

/// A compiled LIKE pattern.
#[derive(Debug, Clone)]
pub struct LikePattern {
    /// The segments between `%`s; one segment means the pattern has no `%`.
    segments: Vec<Segment>,
}

impl LikePattern {
    /// Compile `pattern` (code points) with an optional escape character. A pattern ending in the escape is
    /// refused by the parser; here that escape simply stands for itself.
    pub fn new(pattern: &[u32], escape: Option<u32>) -> LikePattern {
        let mut segments = Vec::new();
        let mut current: Vec<Unit> = Vec::new();
        let mut i = 0;
        while i < pattern.len() {
            let c = pattern[i];
            if Some(c) == escape && i + 1 < pattern.len() {
                current.push(Some(pattern[i + 1]));
                i += 2;
                continue;
            }
            match char::from_u32(c) {
                Some('%') => segments.push(Segment::new(std::mem::take(&mut current))),
                Some('_') => current.push(None),
                _ => current.push(Some(c)),
            }
            i += 1;
        }
        segments.push(Segment::new(current));
        LikePattern { segments }
    }

    pub fn matches(&self, text: &[u32]) -> bool {
        let n = text.len();
        let first = &self.segments[0];
        if self.segments.len() == 1 {
            return first.units.len() == n && first.matches_at(text, 0);
        }
        let last = &self.segments[self.segments.len() - 1];
        let (head, tail) = (first.units.len(), last.units.len());
        if head + tail > n || !first.matches_at(text, 0) || !last.matches_at(text, n - tail) {
            return false;
        }
        let end = n - tail;
        let mut pos = head;
        for seg in &self.segments[1..self.segments.len() - 1] {
            match seg.find(text, pos, end) {
                Some(i) => pos = i + seg.units.len(),
                None => return false,
            }
        }
        true
    }
}

/// Code points of UTF-8 text, surrogates included (literals come from Python with `surrogatepass`).
pub fn code_points(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i] as u32;
        let (len, init) = match b {
            0x00..=0x7f => (1, b),
            0xc0..=0xdf => (2, b & 0x1f),
            0xe0..=0xef => (3, b & 0x0f),
            _ => (4, b & 0x07),
        };
        let mut cp = init;
        for k in 1..len {
            cp = (cp << 6) | (bytes.get(i + k).copied().unwrap_or(0x80) as u32 & 0x3f);
        }
        out.push(cp);
        i += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cps(s: &str) -> Vec<u32> {
        s.chars().map(|c| c as u32).collect()
    }

    fn like(text: &str, pattern: &str, escape: Option<char>) -> bool {
        LikePattern::new(&cps(pattern), escape.map(|c| c as u32)).matches(&cps(text))
    }

    #[test]
    fn wildcards() {
        assert!(like("abc", "abc", None));
        assert!(!like("abcd", "abc", None));
        assert!(like("abc", "a_c", None));
        assert!(like("abc", "%", None));
        assert!(like("", "%", None));
        assert!(!like("", "_", None));
        assert!(like("abc", "a%", None));
        assert!(like("abc", "%c", None));
        assert!(like("abcabc", "%b%b%", None));
        assert!(!like("abcac", "%b%b%", None));
        assert!(like("aXbXc", "a%b%c", None));
        assert!(!like("ab", "a%%b%b", None));
        assert!(like("aa", "a%a", None));
        assert!(!like("a", "a%a", None));
        assert!(like("é", "_", None));
    }

    #[test]
    fn escapes() {
        assert!(like("a%", "a!%", Some('!')));
        assert!(!like("ab", "a!%", Some('!')));
        assert!(like("a_b", "a!_b", Some('!')));
        assert!(!like("axb", "a!_b", Some('!')));
        assert!(like("%", "%%%", Some('%')));
        assert!(!like("a", "%%", Some('%')));
    }

    #[test]
    fn long_inputs_are_linear() {
        let text: String = "a".repeat(200_000);
        let pattern = format!("{}b", "%a".repeat(30));
        assert!(!like(&text, &pattern, None));
        let long_segment = format!("%{}b%", "a".repeat(100));
        assert!(!like(&text[..5000], &long_segment, None));
    }

    #[test]
    fn code_points_round_trip() {
        let s = "aé€😀";
        assert_eq!(code_points(s.as_bytes()), cps(s));
        // A lone surrogate as Python's surrogatepass writes it.
        assert_eq!(code_points(&[0xed, 0xa0, 0x80]), vec![0xd800]);
    }
}
