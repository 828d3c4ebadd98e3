//! OTLP profiles (opentelemetry-proto's collector/profiles/v1development,
//! profiles/v1development; public alpha): watch's continuous profiles as
//! one `ExportProfilesServiceRequest`, POSTed to
//! `/v1development/profiles` with the development version the collector
//! checks (`OTLP-Profiles-Development-Version`).
//!
//! The request's `ProfilesDictionary` (dictionary = 2) holds every table,
//! each with its zero value first as the format requires: mapping_table =
//! 1 (filename_strindex = 4), location_table = 2 (mapping_index = 1, lines
//! = 3: `Line` function_index = 1), function_table = 3 (name_strindex = 1,
//! system_name_strindex = 2), link_table = 4, string_table = 5,
//! attribute_table = 6 (`KeyValueAndUnit`: key_strindex = 1, value = 2),
//! stack_table = 7 (location_indices = 1, leaf first). Each series is a
//! `ResourceProfiles` (resource = 1, scope_profiles = 2) whose resource
//! says whose it is (`service.name`, `container.id`, ...), with one
//! `Profile` per kind: sample_type = 1, samples = 2 (`Sample`: stack_index
//! = 1, attribute_indices = 2, values = 4), time_unix_nano = 3 (fixed64),
//! duration_nano = 4, period_type = 5, period = 6. A CPU profile counts
//! samples of `cpu` nanoseconds each; an off-CPU profile nanoseconds
//! blocked (`off_cpu`).

use std::collections::HashMap;

use crate::model::profile::{Profile, WeightUnit};
use crate::render::otlp::{Val, key_value};
use crate::render::protobuf::Msg;

pub const PATH: &str = "/v1development/profiles";
/// The development version of the messages here (opentelemetry-proto's
/// profiles versioning: a collector refuses one it does not know).
pub const HEADERS: &[(&str, &str)] = &[("OTLP-Profiles-Development-Version", "1")];

/// One series: whose (resource attributes) and its profiles.
pub struct Series<'a> {
    pub attrs: Vec<(&'static str, String)>,
    pub profiles: Vec<&'a Profile>,
}

/// The dictionary's tables, each item once, index 0 the zero value.
struct Dictionary {
    strings: Table<String>,
    mappings: Table<u64>,
    functions: Table<(u64, bool)>,
    locations: Table<(u64, u64)>,
    stacks: Table<Vec<u64>>,
    attributes: Table<(u64, String)>,
}

struct Table<K> {
    index: HashMap<K, u64>,
    list: Vec<K>,
}

impl<K: std::hash::Hash + Eq + Clone + Default> Table<K> {
    fn new() -> Self {
        let mut t = Table {
            index: HashMap::new(),
            list: Vec::new(),
        };
        t.get(K::default());
        t
    }

    fn get(&mut self, k: K) -> u64 {
        if let Some(&i) = self.index.get(&k) {
            return i;
        }
        let i = self.list.len() as u64;
        self.index.insert(k.clone(), i);
        self.list.push(k);
        i
    }
}

/// The request of `series`.
pub fn request(series: &[Series<'_>]) -> Vec<u8> {
    let mut d = Dictionary {
        strings: Table::new(),
        mappings: Table::new(),
        functions: Table::new(),
        locations: Table::new(),
        stacks: Table::new(),
        attributes: Table::new(),
    };
    let mut req = Msg::default();
    for s in series {
        let mut resource = Msg::default();
        for (k, v) in &s.attrs {
            resource.msg(1, &key_value(k, &Val::Str(v.clone())));
        }
        let mut scope = Msg::default();
        scope
            .string(1, "kdiag.watch")
            .string(2, env!("CARGO_PKG_VERSION"));
        let mut scope_profiles = Msg::default();
        scope_profiles.msg(1, &scope);
        for p in &s.profiles {
            scope_profiles.msg(2, &profile(p, &mut d));
        }
        let mut rp = Msg::default();
        rp.msg(1, &resource).msg(2, &scope_profiles);
        req.msg(1, &rp);
    }
    req.msg(2, &dictionary(&d));
    req.0
}

fn value_type(d: &mut Dictionary, kind: &str, unit: &str) -> Msg {
    let mut m = Msg::default();
    m.uint(1, d.strings.get(kind.into()))
        .uint(2, d.strings.get(unit.into()));
    m
}

fn profile(p: &Profile, d: &mut Dictionary) -> Msg {
    let cpu = p.unit == WeightUnit::Samples;
    let mut m = Msg::default();
    let (kind, unit) = if cpu {
        ("samples", "count")
    } else {
        ("off_cpu", "nanoseconds")
    };
    m.msg(1, &value_type(d, kind, unit));
    for s in &p.stacks {
        // Leaf first.
        let locations: Vec<u64> = s
            .frames
            .iter()
            .rev()
            .map(|f| {
                let function = d.functions.get((d.strings.get(f.name.clone()), f.kernel));
                let mapping = match (f.kernel, f.module) {
                    (true, _) => {
                        let file = d.strings.get("[kernel.kallsyms]".into());
                        d.mappings.get(file)
                    }
                    (false, Some(i)) => match p.modules.get(i as usize) {
                        Some(module) => {
                            let file = d.strings.get(module.path.clone());
                            d.mappings.get(file)
                        }
                        None => 0,
                    },
                    (false, None) => 0,
                };
                d.locations.get((function, mapping))
            })
            .collect();
        let thread = d.strings.get("thread.name".into());
        let mut sample = Msg::default();
        sample
            .uint(1, d.stacks.get(locations))
            .packed(2, [d.attributes.get((thread, s.comm.clone()))])
            .packed(4, [if cpu { s.samples } else { s.weight }]);
        m.msg(2, &sample);
    }
    m.fixed64(3, p.started_unix_ns)
        .uint(4, (p.cost.wall_secs * 1e9) as u64);
    if cpu && p.freq_hz > 0 {
        m.msg(5, &value_type(d, "cpu", "nanoseconds"))
            .uint(6, 1_000_000_000 / p.freq_hz);
    }
    m
}

fn dictionary(d: &Dictionary) -> Msg {
    let mut m = Msg::default();
    for &file in &d.mappings.list {
        let mut mapping = Msg::default();
        mapping.uint(4, file);
        m.msg(1, &mapping);
    }
    for &(function, mapping) in &d.locations.list {
        let mut location = Msg::default();
        if function != 0 {
            let mut line = Msg::default();
            line.uint(1, function);
            location.uint(1, mapping).msg(3, &line);
        }
        m.msg(2, &location);
    }
    for &(name, _) in &d.functions.list {
        let mut function = Msg::default();
        function.uint(1, name).uint(2, name);
        m.msg(3, &function);
    }
    m.msg(4, &Msg::default()); // link_table[0], the zero value
    for s in &d.strings.list {
        m.bytes(5, s.as_bytes());
    }
    for (key, value) in &d.attributes.list {
        let mut kv = Msg::default();
        if *key != 0 {
            let mut any = Msg::default();
            any.bytes(1, value.as_bytes()); // string_value = 1
            kv.uint(1, *key).msg(2, &any);
        }
        m.msg(6, &kv);
    }
    for stack in &d.stacks.list {
        let mut s = Msg::default();
        if !stack.is_empty() {
            s.packed(1, stack.iter().copied());
        }
        m.msg(7, &s);
    }
    m
}
