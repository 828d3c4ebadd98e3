//! The service's protocol: frames of a little-endian u32 length and that
//! many bytes of JSON, each message tagged with its type. Small and
//! bounded: a request over `MAX_REQUEST` bytes is refused before it is read,
//! and decoding never panics, whatever the bytes (its tests, and
//! tests/fuzz's `service_frame`, feed it garbage).

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// The protocol's version: a client of another version is told so.
pub const VERSION: u32 = 1;
/// The largest request, and the largest reply, in bytes.
pub const MAX_REQUEST: usize = 64 * 1024;

/// What a client asks. The first message of a connection is `Run`, with
/// the client's stdin, stdout, stderr and working directory attached
/// (`SCM_RIGHTS`); who asks is never in it: the service asks the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Run kdiag with `argv` (without the program's name) for the caller.
    Run {
        version: u32,
        argv: Vec<String>,
        /// The terminal's settings (TERM, COLUMNS, NO_COLOR...): the
        /// service keeps only those it knows.
        env: Vec<(String, String)>,
    },
    /// The client got a signal (Ctrl-C): pass it on to the run.
    Signal { signal: i32 },
}

/// What the service answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// Not done, and why (exit `code`: 2 for what the policy refuses).
    Refused { message: String, code: u8 },
    /// The run has started, writing to the client's own stdout and stderr.
    Started,
    /// The run ended with this exit code.
    Exit { code: u8 },
}

/// A frame's length, checked against `max` before any of it is read.
pub fn frame_len(header: [u8; 4], max: usize) -> io::Result<usize> {
    let len = u32::from_le_bytes(header) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message of {len} bytes (at most {max})"),
        ));
    }
    Ok(len)
}

/// A message from a frame's body.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a malformed message: {e}"),
        )
    })
}

/// A message as one frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("protocol messages serialize");
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend(body);
    frame
}

/// Read one frame's body (None at a clean end of stream).
pub fn read_frame(r: &mut impl Read, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; 4];
    match r.read(&mut header[..1])? {
        0 => return Ok(None),
        _ => r.read_exact(&mut header[1..])?,
    }
    let mut body = vec![0u8; frame_len(header, max)?];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Read and decode one message.
pub fn read<T: DeserializeOwned>(r: &mut impl Read) -> io::Result<Option<T>> {
    read_frame(r, MAX_REQUEST)?.map(|b| decode(&b)).transpose()
}

/// Write one message.
pub fn write<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator: the same bytes on every run.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn messages_round_trip() {
        let run = Request::Run {
            version: VERSION,
            argv: vec!["diagnose".into(), "-p".into(), "1".into()],
            env: vec![("TERM".into(), "xterm".into())],
        };
        let frame = encode(&run);
        assert_eq!(read::<Request>(&mut &frame[..]).unwrap(), Some(run));
        assert_eq!(read::<Request>(&mut &[][..]).unwrap(), None);
        let exit = encode(&Reply::Exit { code: 3 });
        assert_eq!(
            read::<Reply>(&mut &exit[..]).unwrap(),
            Some(Reply::Exit { code: 3 })
        );
    }

    #[test]
    fn oversized_unknown_and_cut_messages_are_errors() {
        let huge = ((MAX_REQUEST + 1) as u32).to_le_bytes();
        assert!(read::<Request>(&mut &huge[..]).is_err());
        // An identity field is not part of any message: refused, not ignored.
        let spoof = br#"{"type":"run","version":1,"argv":[],"env":[],"uid":0}"#;
        assert!(decode::<Request>(spoof).is_err());
        let mut cut = encode(&Request::Signal { signal: 2 });
        cut.pop();
        assert!(read::<Request>(&mut &cut[..]).is_err());
    }

    #[test]
    fn the_decoder_survives_random_bytes_and_mutated_frames() {
        // Short here; tests/fuzz's `service_frame` target runs it for long.
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let valid = encode(&Request::Run {
            version: VERSION,
            argv: vec!["ps".into()],
            env: vec![],
        });
        for i in 0..20_000 {
            let bytes: Vec<u8> = if i % 2 == 0 {
                let len = (rng.next() % 96) as usize;
                (0..len).map(|_| rng.next() as u8).collect()
            } else {
                let mut m = valid.clone();
                for _ in 0..=(rng.next() % 4) {
                    let at = (rng.next() as usize) % m.len();
                    m[at] = rng.next() as u8;
                }
                m
            };
            let _ = read::<Request>(&mut &bytes[..]);
            let _ = decode::<Request>(&bytes);
        }
    }
}
