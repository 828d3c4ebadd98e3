//! Readers for the profile files kdiag writes, for tests: a minimal
//! protobuf decoder for pprof's profile.proto, and a JSON-schema check for
//! speedscope's format (its schema vendored in tests/data).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

/// A minimal protobuf reader: each field as (number, varint or bytes).
#[derive(Debug, Clone)]
enum Field {
    Varint(u64),
    Bytes(Vec<u8>),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let byte = b[*i];
        *i += 1;
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn fields(b: &[u8]) -> Vec<(u32, Field)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let (num, wire) = ((key >> 3) as u32, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(b, &mut i)))),
            2 => {
                let len = varint(b, &mut i) as usize;
                out.push((num, Field::Bytes(b[i..i + len].to_vec())));
                i += len;
            }
            w => panic!("unexpected wire type {w}"),
        }
    }
    out
}

fn uint(msg: &[(u32, Field)], num: u32) -> u64 {
    msg.iter()
        .find_map(|(n, f)| match f {
            Field::Varint(v) if *n == num => Some(*v),
            _ => None,
        })
        .unwrap_or(0)
}

fn packed(msg: &[(u32, Field)], num: u32) -> Vec<u64> {
    let mut out = Vec::new();
    for (n, f) in msg {
        if *n != num {
            continue;
        }
        match f {
            Field::Varint(v) => out.push(*v),
            Field::Bytes(b) => {
                let mut i = 0;
                while i < b.len() {
                    out.push(varint(b, &mut i));
                }
            }
        }
    }
    out
}

fn subs(msg: &[(u32, Field)], num: u32) -> Vec<Vec<(u32, Field)>> {
    msg.iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(b) if *n == num => Some(fields(b)),
            _ => None,
        })
        .collect()
}

/// The fields of profile.proto kdiag writes, decoded.
pub struct Pprof {
    pub strings: Vec<String>,
    pub sample_types: Vec<(String, String)>,
    /// (location ids leaf first, values, comm label)
    pub samples: Vec<(Vec<u64>, Vec<u64>, String)>,
    /// Each sample's string labels, key to value.
    pub labels: Vec<HashMap<String, String>>,
    /// location id → (mapping id, function id)
    pub locations: HashMap<u64, (u64, u64)>,
    /// function id → name
    pub functions: HashMap<u64, String>,
    /// mapping id → (file, build id)
    pub mappings: HashMap<u64, (String, String)>,
    pub period_type: (String, String),
    pub period: u64,
    pub time_nanos: u64,
    pub duration_nanos: u64,
}

impl Pprof {
    pub fn read(path: &Path) -> Pprof {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_end(&mut raw)
            .expect("gzip'd");
        let p = fields(&raw);
        let strings: Vec<String> = p
            .iter()
            .filter_map(|(n, f)| match f {
                Field::Bytes(b) if *n == 6 => Some(String::from_utf8(b.clone()).unwrap()),
                _ => None,
            })
            .collect();
        assert_eq!(strings[0], "", "string_table[0] must be empty");
        let s = |i: u64| strings[i as usize].clone();
        let vt = |m: &[(u32, Field)]| (s(uint(m, 1)), s(uint(m, 2)));
        let sample_types = subs(&p, 1).iter().map(|m| vt(m)).collect();
        let samples = subs(&p, 2)
            .iter()
            .map(|m| {
                let label = subs(m, 3)
                    .iter()
                    .find(|l| s(uint(l, 1)) == "comm")
                    .map(|l| s(uint(l, 2)))
                    .unwrap_or_default();
                (packed(m, 1), packed(m, 2), label)
            })
            .collect();
        let labels = subs(&p, 2)
            .iter()
            .map(|m| {
                subs(m, 3)
                    .iter()
                    .map(|l| (s(uint(l, 1)), s(uint(l, 2))))
                    .collect()
            })
            .collect();
        let locations = subs(&p, 4)
            .iter()
            .map(|m| {
                let line = &subs(m, 4)[0];
                (uint(m, 1), (uint(m, 2), uint(line, 1)))
            })
            .collect();
        let functions = subs(&p, 5)
            .iter()
            .map(|m| (uint(m, 1), s(uint(m, 2))))
            .collect();
        let mappings = subs(&p, 3)
            .iter()
            .map(|m| (uint(m, 1), (s(uint(m, 5)), s(uint(m, 6)))))
            .collect();
        let period_type = subs(&p, 11).first().map(|m| vt(m)).unwrap();
        Pprof {
            sample_types,
            samples,
            labels,
            locations,
            functions,
            mappings,
            period_type,
            period: uint(&p, 12),
            time_nanos: uint(&p, 9),
            duration_nanos: uint(&p, 10),
            strings,
        }
    }

    /// Each sample's function names (leaf first) and its sample count.
    pub fn stacks(&self) -> Vec<(Vec<String>, u64)> {
        self.samples
            .iter()
            .map(|(locs, values, _)| {
                let names = locs
                    .iter()
                    .map(|l| self.functions[&self.locations[l].1].clone())
                    .collect();
                (names, values[0])
            })
            .collect()
    }
}

/// speedscope's file format schema (vendored).
pub fn speedscope_schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/speedscope-file-format-schema.json"),
        )
        .unwrap(),
    )
    .unwrap()
}

/// A draft-07 JSON schema check covering what speedscope's schema uses:
/// $ref, type, properties, required, items, anyOf, const, enum.
pub fn validate(schema: &Value, root: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.strip_prefix("#/definitions/").unwrap();
        return validate(&root["definitions"][name], root, v, at);
    }
    if let Some(any) = schema["anyOf"].as_array()
        && !any.iter().any(|s| validate(s, root, v, at).is_ok())
    {
        return Err(format!("{at}: matches none of anyOf"));
    }
    if let Some(t) = schema["type"].as_str() {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            other => panic!("schema type {other} not handled"),
        };
        if !ok {
            return Err(format!("{at}: not a {t}: {v}"));
        }
    }
    if let Some(c) = schema.get("const")
        && v != c
    {
        return Err(format!("{at}: {v} is not {c}"));
    }
    if let Some(e) = schema["enum"].as_array()
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} not in {e:?}"));
    }
    if let Some(req) = schema["required"].as_array() {
        for r in req {
            let r = r.as_str().unwrap();
            if v.get(r).is_none() {
                return Err(format!("{at}: missing {r}"));
            }
        }
    }
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            if let Some(x) = v.get(k) {
                validate(s, root, x, &format!("{at}.{k}"))?;
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(items, root, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}
