//! Folding stacks for flame graphs, and the summaries of a profile: top
//! functions by self and total, hottest stacks, truncated user stacks.
//!
//! Counts are period-weighted samples: each stack's weight scaled so that the
//! counts add up to the number of samples. With cpu-clock the periods are
//! nearly equal and this is the plain sample count; with cycles it corrects
//! for the kernel adjusting the period (FlameGraph#165). An off-CPU profile
//! (weights in nanoseconds blocked) counts microseconds instead, and a
//! profile of counted events (`WeightUnit::Events`) the events.

use std::collections::HashMap;

use crate::model::profile::{
    Frame, FunctionShare, HotStack, Profile, Stack, Summary, TruncatedStacks, WeightUnit,
};

/// The count of each stack, in the order of `profile.stacks`: weighted
/// samples, for an off-CPU profile microseconds blocked, for a profile of
/// counted events the events. Never rounds a stack that was seen away to 0.
pub fn weighted_counts(profile: &Profile) -> Vec<u64> {
    match profile.unit {
        WeightUnit::Nanoseconds => {
            return profile
                .stacks
                .iter()
                .map(|s| s.weight.saturating_add(500) / 1000)
                .map(|us| us.max(1))
                .collect();
        }
        // Counted, not sampled: the weight is the count.
        WeightUnit::Events => return profile.stacks.iter().map(|s| s.weight).collect(),
        WeightUnit::Samples => {}
    }
    let total = profile.total_weight();
    let samples: u64 = profile.stacks.iter().map(|s| s.samples).sum();
    profile
        .stacks
        .iter()
        .map(|s| {
            if total == 0 {
                s.samples
            } else {
                // Never round a sampled stack away.
                ((s.weight as f64 * samples as f64 / total as f64).round() as u64).max(1)
            }
        })
        .collect()
}

/// A frame name safe for the folded format: `;` separates frames and a line
/// ends the record, so neither may appear inside a name.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// A frame as folded output names it: kernel frames end in `_[k]`.
pub fn folded_frame(f: &Frame) -> String {
    let name = sanitize(&f.name);
    if f.kernel { name + "_[k]" } else { name }
}

/// The frame a folded name stands for (the reverse of `folded_frame`).
pub fn frame_of(folded: &str) -> Frame {
    match folded.strip_suffix("_[k]") {
        Some(k) => Frame::kernel(k),
        None => Frame::user(folded),
    }
}

/// `comm;outer;...;inner count` lines, sorted, identical stacks merged.
pub fn fold(profile: &Profile) -> Vec<String> {
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (stack, count) in profile.stacks.iter().zip(weighted_counts(profile)) {
        let mut key = sanitize(&stack.comm);
        for f in &stack.frames {
            key.push(';');
            key.push_str(&folded_frame(f));
        }
        *merged.entry(key).or_default() += count;
    }
    let mut lines: Vec<String> = merged
        .into_iter()
        .map(|(k, c)| format!("{k} {c}"))
        .collect();
    lines.sort();
    lines
}

/// The `n` heaviest of folded `lines` (by their count), sorted again, and
/// how many were left out: a bounded flame graph keeps its widest frames.
pub fn heaviest(mut lines: Vec<String>, n: usize) -> (Vec<String>, usize) {
    let count = |l: &String| -> u64 {
        l.rsplit_once(' ')
            .and_then(|(_, c)| c.parse().ok())
            .unwrap_or(0)
    };
    let left_out = lines.len().saturating_sub(n);
    if left_out > 0 {
        lines.sort_by(|a, b| count(b).cmp(&count(a)).then_with(|| a.cmp(b)));
        lines.truncate(n);
        lines.sort();
    }
    (lines, left_out)
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn ranked(map: HashMap<(String, bool), u64>, whole: u64, n: usize) -> Vec<FunctionShare> {
    let mut v: Vec<FunctionShare> = map
        .into_iter()
        .map(|((name, kernel), samples)| FunctionShare {
            name,
            kernel,
            samples,
            percent: percent(samples, whole),
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    v.truncate(n);
    v
}

/// Summarize `profile`: `n` entries in each top list.
pub fn summarize(profile: &Profile, n: usize) -> Summary {
    let counts = weighted_counts(profile);
    let whole: u64 = counts.iter().sum();
    let mut self_map: HashMap<(String, bool), u64> = HashMap::new();
    let mut total_map: HashMap<(String, bool), u64> = HashMap::new();
    let mut kernel = 0;
    // Per comm: (samples with user frames, of which truncated).
    let mut depth: HashMap<&str, (u64, u64)> = HashMap::new();
    for (stack, &c) in profile.stacks.iter().zip(&counts) {
        if let Some(leaf) = stack.frames.last() {
            *self_map
                .entry((leaf.name.clone(), leaf.kernel))
                .or_default() += c;
            if leaf.kernel {
                kernel += c;
            }
        }
        // Count a recursive function once per stack.
        let mut seen: Vec<(&str, bool)> = Vec::new();
        for f in &stack.frames {
            if !seen.contains(&(f.name.as_str(), f.kernel)) {
                seen.push((f.name.as_str(), f.kernel));
                *total_map.entry((f.name.clone(), f.kernel)).or_default() += c;
            }
        }
        if stack.user_depth > 0 {
            let d = depth.entry(&stack.comm).or_default();
            d.0 += c;
            if stack.user_depth <= 2 {
                d.1 += c;
            }
        }
    }
    let mut hottest: Vec<HotStack> = profile
        .stacks
        .iter()
        .zip(&counts)
        .map(|(s, &c)| hot(s, c, whole))
        .collect();
    hottest.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.frames.cmp(&b.frames))
    });
    hottest.truncate(n);
    let mut truncated: Vec<TruncatedStacks> = depth
        .into_iter()
        // Mostly shallow, and enough samples to tell.
        .filter(|(_, (all, short))| *all >= 10 && *short * 2 > *all)
        .map(|(comm, (all, short))| TruncatedStacks {
            comm: comm.to_string(),
            percent: percent(short, all),
        })
        .collect();
    truncated.sort_by(|a, b| a.comm.cmp(&b.comm));
    Summary {
        samples: whole,
        kernel_percent: percent(kernel, whole),
        top_self: ranked(self_map, whole, n),
        top_total: ranked(total_map, whole, n),
        hottest,
        truncated,
    }
}

fn hot(s: &Stack, samples: u64, whole: u64) -> HotStack {
    HotStack {
        comm: s.comm.clone(),
        frames: s.frames.iter().map(folded_frame).collect(),
        samples,
        percent: percent(samples, whole),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(comm: &str, frames: &[&str], samples: u64, weight: u64, depth: u16) -> Stack {
        Stack {
            comm: comm.into(),
            frames: frames.iter().map(|f| frame_of(f)).collect(),
            samples,
            weight,
            user_depth: depth,
            state: None,
            waker: None,
            ongoing: false,
        }
    }

    fn profile(stacks: Vec<Stack>) -> Profile {
        Profile {
            samples: stacks.iter().map(|s| s.samples).sum(),
            stacks,
            ..Default::default()
        }
    }

    #[test]
    fn heaviest_keeps_the_widest_stacks_sorted() {
        let lines = ["a;x 5", "a;y 50", "b;z 7", "c 1"]
            .map(String::from)
            .to_vec();
        assert_eq!(heaviest(lines.clone(), 9), (lines.clone(), 0));
        let (kept, left_out) = heaviest(lines, 2);
        assert_eq!(kept, ["a;y 50", "b;z 7"]);
        assert_eq!(left_out, 2);
    }

    #[test]
    fn folds_outermost_first_with_kernel_marks() {
        let p = profile(vec![
            stack("burn", &["main", "hot_a"], 3, 3000, 4),
            stack(
                "burn",
                &[
                    "main",
                    "getppid",
                    "entry_SYSCALL_64_[k]",
                    "do_syscall_64_[k]",
                ],
                1,
                1000,
                4,
            ),
            stack("burn", &["main", "hot_a"], 1, 1000, 4),
            stack("a;b", &["x;y"], 1, 1000, 1),
        ]);
        assert_eq!(
            fold(&p),
            [
                "a:b;x:y 1",
                "burn;main;getppid;entry_SYSCALL_64_[k];do_syscall_64_[k] 1",
                "burn;main;hot_a 4",
            ]
        );
    }

    #[test]
    fn weights_by_period_not_sample_count() {
        // Two samples each, but b's periods are three times longer.
        let p = profile(vec![
            stack("c", &["a"], 2, 1000, 3),
            stack("c", &["b"], 2, 3000, 3),
        ]);
        assert_eq!(weighted_counts(&p), [1, 3]);
        let s = summarize(&p, 10);
        assert_eq!(s.top_self[0].name, "b");
        assert!((s.top_self[0].percent - 75.0).abs() < 1e-9);
    }

    #[test]
    fn off_cpu_counts_are_microseconds() {
        let mut p = profile(vec![
            stack("c", &["main", "lock"], 3, 3_000_400, 4),
            stack("c", &["main", "read_[k]"], 1, 200, 2),
        ]);
        p.unit = WeightUnit::Nanoseconds;
        assert_eq!(weighted_counts(&p), [3000, 1]);
        assert_eq!(fold(&p), ["c;main;lock 3000", "c;main;read_[k] 1"]);
    }

    /// Counted events fold as counted: a stack's count is its weight.
    #[test]
    fn event_counts_are_the_events() {
        let mut p = profile(vec![
            stack("c", &["main", "touch"], 512, 512, 2),
            stack("c", &["main"], 3, 3, 1),
        ]);
        p.unit = WeightUnit::Events;
        p.event = "page-faults".into();
        assert_eq!(weighted_counts(&p), [512, 3]);
        assert_eq!(fold(&p), ["c;main 3", "c;main;touch 512"]);
        assert_eq!(summarize(&p, 10).samples, 515);
        assert_eq!(p.unit.count_name(&p.event), "page-faults");
        assert_eq!(WeightUnit::Samples.count_name("cycles"), "samples");
        assert_eq!(WeightUnit::Nanoseconds.count_name("sched_switch"), "us");
    }

    #[test]
    fn self_and_total_shares() {
        let p = profile(vec![
            stack("c", &["main", "outer", "hot"], 6, 6, 4),
            stack("c", &["main", "outer"], 2, 2, 3),
            stack("c", &["main", "rec", "rec", "write_[k]"], 2, 2, 4),
        ]);
        let s = summarize(&p, 10);
        assert_eq!(s.samples, 10);
        assert_eq!(
            (s.top_self[0].name.as_str(), s.top_self[0].samples),
            ("hot", 6)
        );
        let total: HashMap<_, _> = s
            .top_total
            .iter()
            .map(|f| (f.name.as_str(), f.samples))
            .collect();
        assert_eq!(total["main"], 10);
        assert_eq!(total["outer"], 8);
        assert_eq!(
            total["rec"], 2,
            "a recursive function counts once per stack"
        );
        assert!((s.kernel_percent - 20.0).abs() < 1e-9);
        assert_eq!(s.hottest[0].frames, ["main", "outer", "hot"]);
        assert_eq!(s.hottest[2].frames.last().unwrap(), "write_[k]");
        assert!(s.truncated.is_empty());
    }

    #[test]
    fn detects_truncated_user_stacks() {
        let p = profile(vec![
            stack("nofp", &["0x1234", "hot"], 18, 18, 2),
            stack("nofp", &["main", "hot"], 2, 2, 5),
            stack("fp", &["_start", "main", "hot"], 20, 20, 6),
            stack("kthread", &["worker_[k]"], 20, 20, 0),
        ]);
        let s = summarize(&p, 10);
        assert_eq!(s.truncated.len(), 1);
        assert_eq!(s.truncated[0].comm, "nofp");
        assert!((s.truncated[0].percent - 90.0).abs() < 1e-9);
    }

    #[test]
    fn empty_profile_summarizes_to_nothing() {
        let s = summarize(&Profile::default(), 5);
        assert_eq!(s.samples, 0);
        assert!(s.top_self.is_empty() && s.hottest.is_empty());
        assert!(fold(&Profile::default()).is_empty());
    }
}
