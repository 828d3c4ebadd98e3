//! A small protobuf encoder for the formats kdiag writes (pprof's
//! profile.proto, OTLP's metrics and logs): varints, fixed 64-bit values
//! and length-delimited fields, built bottom-up, a message at a time.

/// The protobuf message being built; `.0` is its encoding.
#[derive(Default)]
pub struct Msg(pub Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    /// A varint field (uint64, int64 of a value >= 0, an enum); zero is
    /// the default and is left out.
    pub fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        if v != 0 {
            self.key(field, 0);
            self.varint(v);
        }
        self
    }

    pub fn bool(&mut self, field: u32, v: bool) -> &mut Self {
        self.uint(field, v as u64)
    }

    /// A fixed64 or sfixed64 field, always written (it may sit in a oneof,
    /// where a zero is a value).
    pub fn fixed64(&mut self, field: u32, v: u64) -> &mut Self {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A double field, always written (as `fixed64`).
    pub fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.fixed64(field, v.to_bits())
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    /// A string field; the empty string is the default and is left out.
    pub fn string(&mut self, field: u32, s: &str) -> &mut Self {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
        self
    }

    pub fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }

    /// A packed repeated varint field.
    pub fn packed(&mut self, field: u32, vals: impl IntoIterator<Item = u64>) -> &mut Self {
        let mut inner = Msg::default();
        for v in vals {
            inner.varint(v);
        }
        self.bytes(field, &inner.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_defaults() {
        let mut m = Msg::default();
        m.uint(1, 300).uint(2, 0).bool(3, true);
        // 300 = 0b10_0101100: 0xac 0x02; field 2 (zero) left out.
        assert_eq!(m.0, [0x08, 0xac, 0x02, 0x18, 0x01]);
        let mut p = Msg::default();
        p.packed(1, [1, 150]);
        assert_eq!(p.0, [0x0a, 0x03, 0x01, 0x96, 0x01]);
    }

    #[test]
    fn fixed_values_are_little_endian_and_kept_when_zero() {
        let mut m = Msg::default();
        m.double(4, 1.0).fixed64(6, 0).string(1, "").string(1, "a");
        let mut want = vec![0x21];
        want.extend_from_slice(&1.0f64.to_bits().to_le_bytes());
        want.push(0x31);
        want.extend_from_slice(&[0; 8]);
        want.extend_from_slice(&[0x0a, 0x01, b'a']);
        assert_eq!(m.0, want);
    }
}
