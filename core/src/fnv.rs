//! 64-bit FNV-1a (<http://www.isthe.com/chongo/tech/comp/fnv/>): a hash that is the same on every machine, in
//! every version and every run, unlike std's randomly keyed hasher — for names and ids that must not change.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a, fed in pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(OFFSET_BASIS)
    }
}

impl Fnv1a64 {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(PRIME);
        }
    }

    /// The hash of everything fed so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a64::new();
    hash.write(bytes);
    hash.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference values of FNV's test suite (test_fnv.c, `fnv1a_64` of "", "a" and "foobar").
    #[test]
    fn fnv1a_64_matches_the_reference_values() {
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fed_in_pieces_it_hashes_as_fed_at_once() {
        let mut hash = Fnv1a64::new();
        hash.write(b"foo");
        hash.write(b"bar");
        assert_eq!(hash.finish(), fnv1a_64(b"foobar"));
    }
}
