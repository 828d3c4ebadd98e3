//! The members that carry a verdict: in a tree, the drill-downs trace the
//! processes in the verdict's state (the busiest on CPU for `cpu`, those
//! waiting on storage for `io`, those blocked for `lock`), never a parent
//! that only waits for them. Several members when the time is spread.
//! Pure.

use crate::model::diagnosis::{Carrier, Class, Member, Observation, Scope, Weight};

/// Members kept at most.
const MOST: usize = 8;
/// A member with less than this share of the state's time is left out.
const LEAST_SHARE: f64 = 0.05;
/// Members are taken, most first, until they cover this share.
const COVER: f64 = 0.9;

/// The members in `verdict`'s state, most first; empty for one process,
/// or when no member was seen in that state (the drill-downs then take
/// the target as given).
pub fn carriers(o: &Observation, verdict: Class) -> Vec<Carrier> {
    if o.scope == Scope::Process {
        return Vec::new();
    }
    let weights: Vec<(&Member, f64)> = o
        .members
        .iter()
        .map(|m| (m, weight(m, verdict)))
        .filter(|(_, w)| *w > 0.0)
        .collect();
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    let mut v: Vec<Carrier> = weights
        .into_iter()
        .map(|(m, w)| Carrier {
            pid: m.pid,
            comm: m.comm.clone(),
            share: w / total,
        })
        .filter(|c| c.share >= LEAST_SHARE)
        .collect();
    v.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.pid.cmp(&b.pid)));
    let mut covered = 0.0;
    let n = v
        .iter()
        .take_while(|c| {
            let before = covered;
            covered += c.share;
            before < COVER
        })
        .count();
    v.truncate(n.min(MOST));
    v
}

/// A member's part in the verdict, as its row says (`Weight`).
fn weight(m: &Member, verdict: Class) -> f64 {
    match verdict.spec().weight {
        Weight::Cpu => m.user_s + m.system_s,
        Weight::RunDelay => m.run_delay_s.unwrap_or(m.user_s + m.system_s),
        Weight::States(states) => states
            .iter()
            .map(|s| m.states.get(s).copied().unwrap_or(0) as f64)
            .sum(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::diagnosis::ThreadState;

    pub(crate) fn member(pid: i32, cpu: f64, states: &[(ThreadState, u64)]) -> Member {
        Member {
            pid,
            comm: format!("p{pid}"),
            user_s: cpu,
            states: states.iter().copied().collect(),
            ..Default::default()
        }
    }

    pub(crate) fn tree(members: Vec<Member>) -> Observation {
        Observation {
            scope: Scope::Tree,
            members,
            ..Default::default()
        }
    }

    fn pids(c: &[Carrier]) -> Vec<i32> {
        c.iter().map(|c| c.pid).collect()
    }

    #[test]
    fn a_sleeping_parent_never_carries_the_verdict() {
        use ThreadState::*;
        let o = tree(vec![
            member(1, 0.0, &[(Sleeping, 100)]),
            member(2, 0.9, &[(OnCpu, 50), (Storage, 40)]),
            member(3, 0.8, &[(OnCpu, 45), (Storage, 10)]),
            member(4, 0.01, &[(Lock, 30)]),
        ]);
        assert_eq!(pids(&carriers(&o, Class::Cpu)), [2, 3]);
        assert_eq!(pids(&carriers(&o, Class::Io)), [2, 3]);
        assert_eq!(carriers(&o, Class::Io)[0].share, 0.8);
        assert_eq!(pids(&carriers(&o, Class::Lock)), [4]);
        assert_eq!(pids(&carriers(&o, Class::Idle)), [1]);
    }

    #[test]
    fn the_few_that_hold_most_of_the_time_are_kept() {
        // One member with 95%: the others are not needed.
        let o = tree(vec![
            member(1, 9.5, &[]),
            member(2, 0.3, &[]),
            member(3, 0.2, &[]),
        ]);
        assert_eq!(pids(&carriers(&o, Class::Cpu)), [1]);
        // Spread evenly over sixteen: MOST of them.
        let o = tree((1..=16).map(|p| member(p, 1.0, &[])).collect());
        assert_eq!(pids(&carriers(&o, Class::Cpu)), [1, 2, 3, 4, 5, 6, 7, 8]);
        // Spread over two, with a third under LEAST_SHARE.
        let o = tree(vec![
            member(1, 5.0, &[]),
            member(2, 4.8, &[]),
            member(3, 0.2, &[]),
        ]);
        assert_eq!(pids(&carriers(&o, Class::Cpu)), [1, 2]);
    }

    #[test]
    fn one_process_or_nothing_in_the_state_leaves_the_target_as_given() {
        let mut o = tree(vec![member(1, 1.0, &[])]);
        assert!(carriers(&o, Class::Lock).is_empty());
        o.scope = Scope::Process;
        assert!(carriers(&o, Class::Cpu).is_empty());
    }
}
