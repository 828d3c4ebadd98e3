//! SVG flame graphs, rendered in-process with inferno from folded stacks:
//! CPU flame graphs (samples, warm colours), off-CPU flame graphs
//! (microseconds blocked, blue, as in Brendan Gregg's off-CPU graphs) and
//! flame graphs of counted events (the event, green, as in his memory
//! flame graphs).

use inferno::flamegraph::color::{BasicPalette, Palette};
use inferno::flamegraph::{self, Options};

use crate::model::flame::Flame;
use crate::model::profile::{Profile, WeightUnit};

/// Render `folded` (from `analysis::fold::fold(profile)`) as an SVG. Fails,
/// saying why, when there is nothing to draw: an empty flame graph helps no
/// one, and the caller then writes no file.
pub fn svg(profile: &Profile, folded: &[String]) -> anyhow::Result<Vec<u8>> {
    if folded.is_empty() {
        anyhow::bail!("{}", no_samples_reason(profile));
    }
    draw(&Flame::of(profile, Vec::new(), 0), folded)
}

/// The flame graph of a kept `Flame` (diagnose's drill-downs).
pub fn svg_of(flame: &Flame) -> anyhow::Result<Vec<u8>> {
    if flame.lines.is_empty() {
        anyhow::bail!("no stacks of {} to draw", flame.target);
    }
    draw(flame, &flame.lines)
}

/// Draw `lines` with the titles `flame`'s facts give.
fn draw(flame: &Flame, lines: &[String]) -> anyhow::Result<Vec<u8>> {
    let lost = |what: &str| {
        if flame.lost > 0 {
            format!(", {} {what} lost", flame.lost)
        } else {
            String::new()
        }
    };
    let kept = if flame.left_out > 0 {
        format!(
            " · the {} heaviest of {} stacks",
            lines.len(),
            lines.len() + flame.left_out
        )
    } else {
        String::new()
    };
    // A drill-down's profile may carry no start time of its own.
    let started = if flame.started.is_empty() {
        String::new()
    } else {
        format!("{} · ", flame.started)
    };
    let mut opts = Options::default();
    match flame.unit {
        WeightUnit::Samples => {
            opts.title = format!("CPU profile of {}", flame.target);
            opts.subtitle = Some(format!(
                "{started}{:.1} s at {} Hz ({}) · {} samples{}{kept}",
                flame.wall_s,
                flame.freq_hz,
                flame.event,
                flame.samples,
                lost("records")
            ));
            opts.count_name = "samples".into();
        }
        WeightUnit::Nanoseconds => {
            opts.title = format!("Off-CPU time of {}", flame.target);
            opts.subtitle = Some(format!(
                "{started}{:.1} s · {:.3} s blocked in {} blocks{}{kept} · width = time off the CPU",
                flame.wall_s,
                flame.total_weight as f64 / 1e9,
                flame.samples,
                lost("stacks")
            ));
            opts.count_name = "us".into();
            opts.colors = Palette::Basic(BasicPalette::Blue);
        }
        WeightUnit::Events => {
            let event = flame.unit.count_name(&flame.event);
            opts.title = format!("{} of {}", crate::render::capitalized(event), flame.target);
            opts.subtitle = Some(format!(
                "{started}{:.1} s · {} {event}{}{kept} · width = {event}",
                flame.wall_s,
                flame.total_weight,
                lost(event)
            ));
            opts.count_name = event.into();
            opts.colors = Palette::Basic(BasicPalette::Green);
        }
    }
    // Same input, same picture: tests and diffs stay stable.
    opts.deterministic = true;
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)?;
    Ok(out)
}

/// Why a profile has no samples, and what to try.
pub fn no_samples_reason(profile: &Profile) -> String {
    if profile.unit == WeightUnit::Events {
        return format!(
            "no {} of {} were counted in {:.1} s, so no flame graph was written",
            profile.event, profile.target, profile.cost.wall_secs
        );
    }
    let mut why = format!(
        "no samples of {} in {:.1} s, so no flame graph was written",
        profile.target, profile.cost.wall_secs
    );
    if profile.idle_samples > 0 {
        why += &format!(
            ": the CPUs were idle ({} idle samples left out; add --include-idle to see them)",
            profile.idle_samples
        );
    } else {
        why += ": the target did not run on a CPU while sampling (sleeping or blocked?); \
                profile longer (-d), raise the rate (-F), or profile what is busy";
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::{Frame, Stack};

    #[test]
    fn renders_titles_with_counts() {
        let p = Profile {
            target: "burn".into(),
            samples: 4,
            stacks: vec![Stack {
                comm: "burn".into(),
                frames: vec![Frame::user("main"), Frame::user("hot_a")],
                samples: 4,
                weight: 4,
                user_depth: 2,
                state: None,
                waker: None,
                ongoing: false,
            }],
            ..Default::default()
        };
        let lines = crate::analysis::fold::fold(&p);
        let svg = String::from_utf8(svg(&p, &lines).unwrap()).unwrap();
        assert!(svg.contains("CPU profile of burn"));
        assert!(
            svg.contains("<title>hot_a (4 samples, 100.00%)</title>"),
            "{svg}"
        );
    }

    #[test]
    fn off_cpu_graphs_count_microseconds_in_blue() {
        let p = Profile {
            target: "PID 7 (locker)".into(),
            unit: WeightUnit::Nanoseconds,
            samples: 2,
            stacks: vec![Stack {
                comm: "locker".into(),
                frames: vec![Frame::user("take_lock"), Frame::kernel("schedule")],
                samples: 2,
                weight: 1_500_000,
                user_depth: 1,
                state: Some(crate::model::profile::OffState::S),
                waker: None,
                ongoing: false,
            }],
            ..Default::default()
        };
        let lines = crate::analysis::fold::fold(&p);
        assert_eq!(lines, ["locker;take_lock;schedule_[k] 1500"]);
        let svg = String::from_utf8(svg(&p, &lines).unwrap()).unwrap();
        assert!(svg.contains("Off-CPU time of PID 7 (locker)"), "{svg}");
        assert!(
            svg.contains("<title>take_lock (1,500 us, 100.00%)</title>"),
            "{svg}"
        );
        // The blue palette: inferno's Blue gives rgb(r,g,255-ish) fills.
        assert!(
            !svg.contains("fill=\"rgb(2"),
            "warm colours in an off-CPU graph"
        );
    }

    #[test]
    fn event_graphs_count_the_event() {
        let p = Profile {
            target: "PID 7 (toucher)".into(),
            unit: WeightUnit::Events,
            event: "page-faults".into(),
            samples: 3,
            stacks: vec![Stack {
                comm: "toucher".into(),
                frames: vec![Frame::user("main"), Frame::user("touch")],
                samples: 3,
                weight: 3,
                user_depth: 2,
                state: None,
                waker: None,
                ongoing: false,
            }],
            ..Default::default()
        };
        let lines = crate::analysis::fold::fold(&p);
        assert_eq!(lines, ["toucher;main;touch 3"]);
        let svg = String::from_utf8(svg(&p, &lines).unwrap()).unwrap();
        assert!(svg.contains("Page-faults of PID 7 (toucher)"), "{svg}");
        assert!(svg.contains("3 page-faults"), "{svg}");
        assert!(
            svg.contains("<title>touch (3 page-faults, 100.00%)</title>"),
            "{svg}"
        );
        let none = Profile {
            stacks: vec![],
            ..p
        };
        assert_eq!(
            no_samples_reason(&none),
            "no page-faults of PID 7 (toucher) were counted in 0.0 s, so no flame graph was written"
        );
    }

    #[test]
    fn refuses_to_draw_nothing() {
        let p = Profile {
            target: "PID 1".into(),
            idle_samples: 7,
            ..Default::default()
        };
        let err = svg(&p, &[]).unwrap_err().to_string();
        assert!(
            err.contains("no samples of PID 1") && err.contains("--include-idle"),
            "{err}"
        );
    }
}
