//! Frames without names, by what made them: a JIT's code in anonymous
//! executable memory (the JVM, Node), an interpreter's loop that hides the
//! program's own functions (CPython), a binary without symbols. The
//! runtimes are data (`RUNTIMES`), recognised by their binaries and their
//! frames; render/ words the way to names for each. And a JVM whose CPU
//! goes to its garbage collector at its heap limit. Pure.

use std::collections::BTreeMap;

use crate::model::diagnosis::Observation;
use crate::model::drill::{Runtime, UnnamedFrames, Why};
use crate::model::locks::RuntimeLock;
use crate::model::profile::{Frame, Profile};
use crate::model::verdict::GcAtLimit;

/// How a runtime shows in a stack.
pub struct Pattern {
    pub runtime: Runtime,
    /// Substrings of the paths of its binaries.
    pub modules: &'static [&'static str],
    /// Prefixes of its own functions' names.
    pub frames: &'static [&'static str],
    /// Its interpreter loop: one frame per function of the program.
    pub interpreter: &'static [&'static str],
    /// The prefix of the names its perf support gives the program's
    /// functions: with one in the stack, the loop is named.
    pub named: Option<&'static str>,
}

pub const RUNTIMES: &[Pattern] = &[
    Pattern {
        runtime: Runtime::Jvm,
        modules: &["/libjvm.so"],
        frames: &["JavaThread::", "JavaMain", "JavaCalls::", "ObjectMonitor::"],
        interpreter: &[],
        named: None,
    },
    Pattern {
        runtime: Runtime::Node,
        modules: &["/node", "/nodejs", "/libnode.so"],
        frames: &["v8::", "node::", "Builtins_"],
        interpreter: &[],
        named: None,
    },
    Pattern {
        runtime: Runtime::Python,
        modules: &["/python3", "/libpython3"],
        frames: &["_PyEval_", "PyEval_", "_PyObject_", "Py_RunMain"],
        interpreter: &["_PyEval_EvalFrameDefault"],
        // Python 3.12's perf trampolines: `py::function:file.py`.
        named: Some("py::"),
    },
];

/// The Java method a JVM lock was taken in: the first frame of the JVM's
/// generated code out from its own (a libjvm.so frame has a module; the
/// perf map's names have none), past its stubs. HotSpot's map names a
/// compiled method "void Mon.work(int)": that gives "Mon.work".
/// Interpreted code is one "Interpreter" entry: its methods have no name
/// there. None: no such frame, or one without a name.
pub fn java_caller(frames: &[Frame]) -> Option<String> {
    let f = frames.iter().rev().find(|f| {
        let n = &f.name;
        !f.kernel
            && f.module.is_none()
            && (n.contains('(') || n.starts_with('[') || n == "Interpreter")
    })?;
    if f.name == "Interpreter" {
        return Some("interpreted Java code".into());
    }
    let (head, _) = f.name.split_once('(')?;
    let (_, method) = head.rsplit_once(' ')?;
    (method.contains('.') && !method.contains("::")).then(|| method.to_string())
}

/// With CPython's Python functions read from its memory, its loop no
/// longer hides them, and the GIL is taken back in the Python function its
/// threads run most.
pub fn name_python(w: &mut Why, locks: &mut [RuntimeLock]) {
    let Some(label) = w.python_hot().map(|(f, _)| f.label()) else {
        return;
    };
    w.unnamed.retain(|u| u.runtime != Runtime::Python);
    for l in locks
        .iter_mut()
        .filter(|l| l.runtime == "CPython" && l.kind == "the GIL")
    {
        l.caller = Some(label.clone());
    }
}

/// A JVM collecting this share of the window or more (its collectors'
/// time, as jstat's GCT), while its old generation is OLD_FULL full,
/// collects at its heap limit: the CPU is the limit's, not the program's.
pub const GC_SHARE: f64 = 0.5;
pub const OLD_FULL: f64 = 0.9;

/// The JVM's collector at its heap limit, when that is where its time went.
pub fn gc_at_heap_limit(o: &Observation) -> Option<GcAtLimit> {
    let h = o.jvm.as_ref()?;
    let gc_share = h.gc_s / o.window_s.max(1e-3);
    let full = h.old_used as f64 >= OLD_FULL * h.old_max as f64;
    (h.old_max > 0 && gc_share >= GC_SHARE && full).then(|| GcAtLimit {
        gc_share: gc_share.min(1.0),
        heap: h.clone(),
        window_s: o.window_s,
    })
}

/// Stacks with unnamed frames under this share of a profile are not worth
/// a line.
pub const MIN_PERCENT: f64 = 5.0;

/// The unnamed frames of `profiles` (the drill-downs' CPU and off-CPU
/// profiles of `pids`), the largest share first.
pub fn unnamed(profiles: &[&Profile], pids: &[i32]) -> Vec<UnnamedFrames> {
    let mut best: BTreeMap<(Runtime, Option<String>), f64> = BTreeMap::new();
    for p in profiles {
        let total = p.total_weight().max(1) as f64;
        let mut weight: BTreeMap<(Runtime, Option<String>), u64> = BTreeMap::new();
        for s in &p.stacks {
            for key in in_stack(p, &s.frames) {
                *weight.entry(key).or_default() += s.weight;
            }
        }
        for (key, w) in weight {
            let pct = w as f64 * 100.0 / total;
            let b = best.entry(key).or_default();
            *b = b.max(pct);
        }
    }
    let mut found: Vec<UnnamedFrames> = best
        .into_iter()
        .filter(|(_, pct)| *pct >= MIN_PERCENT)
        .map(|((runtime, module), percent)| UnnamedFrames {
            runtime,
            module,
            pids: pids.to_vec(),
            percent,
        })
        .collect();
    found.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    found
}

/// What one stack holds unnamed: each runtime (or stripped binary) once.
fn in_stack(p: &Profile, frames: &[Frame]) -> Vec<(Runtime, Option<String>)> {
    let user: Vec<&Frame> = frames.iter().filter(|f| !f.kernel).collect();
    let module = |f: &Frame| {
        f.module
            .and_then(|m| p.modules.get(m as usize))
            .map(|m| m.path.as_str())
    };
    let runtime = RUNTIMES.iter().find(|r| {
        user.iter().any(|f| {
            module(f).is_some_and(|m| r.modules.iter().any(|x| m.contains(x)))
                || r.frames.iter().any(|x| f.name.starts_with(x))
        })
    });
    // A JIT's code, or an interpreter's loop its perf support left unnamed.
    let jit = user.iter().any(|f| f.name == "[anon]");
    let looping = runtime.is_some_and(|r| {
        user.iter()
            .any(|f| r.interpreter.contains(&f.name.as_str()))
            && !r
                .named
                .is_some_and(|n| user.iter().any(|f| f.name.starts_with(n)))
    });
    let mut out = Vec::new();
    if jit || looping {
        out.push((runtime.map_or(Runtime::Jit, |r| r.runtime), None));
    }
    // `binary+0x1a2b`: a file mapped, no symbol for the address.
    let mut stripped: Vec<String> = user
        .iter()
        .filter(|f| f.name.contains("+0x"))
        .filter_map(|f| module(f).map(str::to_string))
        .collect();
    stripped.sort();
    stripped.dedup();
    out.extend(stripped.into_iter().map(|m| (Runtime::Stripped, Some(m))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{Module, Stack};

    fn stack(frames: Vec<Frame>, weight: u64) -> Stack {
        Stack {
            comm: "x".into(),
            frames,
            samples: 1,
            weight,
            user_depth: 0,
            state: None,
            waker: None,
            ongoing: false,
        }
    }

    fn in_module(name: &str, m: u32) -> Frame {
        Frame {
            module: Some(m),
            ..Frame::user(name)
        }
    }

    fn profile(stacks: Vec<Stack>) -> Profile {
        Profile {
            stacks,
            modules: vec![
                Module {
                    path: "/usr/lib/jvm/java-17/lib/server/libjvm.so".into(),
                    build_id: None,
                },
                Module {
                    path: "/usr/bin/python3.11".into(),
                    build_id: None,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn jit_frames_in_a_jvm_are_the_jvms() {
        let p = profile(vec![
            stack(
                vec![
                    in_module("JavaMain", 0),
                    Frame::user("[anon]"),
                    in_module("ObjectMonitor::enter", 0),
                    Frame::kernel("futex_wait"),
                ],
                90,
            ),
            stack(vec![Frame::user("main")], 10),
        ]);
        let u = unnamed(&[&p], &[42]);
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!(
            (u[0].runtime, u[0].pids.as_slice()),
            (Runtime::Jvm, &[42][..])
        );
        assert!((u[0].percent - 90.0).abs() < 1e-9);
    }

    #[test]
    fn pythons_loop_without_perf_names_and_its_stripped_binary() {
        let p = profile(vec![stack(
            vec![
                in_module("_PyEval_EvalFrameDefault", 1),
                in_module("python3.11+0x1a2b", 1),
                Frame::user("pthread_cond_timedwait"),
            ],
            100,
        )]);
        let u = unnamed(&[&p], &[7]);
        let kinds: Vec<_> = u.iter().map(|u| (u.runtime, u.module.as_deref())).collect();
        assert_eq!(
            kinds,
            [
                (Runtime::Python, None),
                (Runtime::Stripped, Some("/usr/bin/python3.11"))
            ]
        );
        // With -X perf's names the loop is named.
        let named = profile(vec![stack(
            vec![
                in_module("_PyEval_EvalFrameDefault", 1),
                Frame::user("py::spin:<string>"),
            ],
            100,
        )]);
        assert!(unnamed(&[&named], &[7]).is_empty());
    }

    #[test]
    fn a_jvm_lock_is_taken_in_the_java_method_its_map_names() {
        let waiting = |java: &str| {
            vec![
                Frame::user("void java.lang.Thread.run()"),
                Frame::user(java),
                Frame::user("_complete_monitor_locking_Java"),
                in_module("SharedRuntime::complete_monitor_locking_C(oopDesc*)", 0),
                in_module("ObjectSynchronizer::enter(Handle, JavaThread*)", 0),
            ]
        };
        let named = waiting("void Mon.work(int)");
        assert_eq!(java_caller(&named).as_deref(), Some("Mon.work"));
        // Interpreted: the map has one entry for all the interpreter's code.
        let interpreted = waiting("Interpreter");
        assert_eq!(
            java_caller(&interpreted).as_deref(),
            Some("interpreted Java code")
        );
        // No map: the innermost Java frame is not named, an outer one is
        // never taken for it.
        assert_eq!(java_caller(&waiting("[anon]")), None);
    }

    #[test]
    fn anonymous_code_of_no_known_runtime_is_a_jit_and_small_shares_are_left_out() {
        let p = profile(vec![
            stack(vec![Frame::user("main"), Frame::user("[anon]")], 30),
            stack(vec![Frame::user("main"), in_module("libjvm.so+0x10", 0)], 2),
            stack(vec![Frame::user("main")], 68),
        ]);
        let u = unnamed(&[&p], &[1]);
        assert_eq!(u.len(), 1, "{u:?}");
        assert_eq!(u[0].runtime, Runtime::Jit);
    }
}
