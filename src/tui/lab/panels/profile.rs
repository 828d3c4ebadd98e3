//! why: where the chosen process's CPU time went in the last seconds: its
//! top functions by self time, and a text flame graph: the call tree
//! (outermost first) with every branch of at least 2% of the samples, runs
//! of single callees merged onto one line and split where the stack
//! crosses from the program into the kernel.

use std::collections::VecDeque;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::analysis::fold;
use crate::model::profile::{Frame as StackFrame, Profile, Stack};
use crate::tui::lab::markdown::code_style;

/// Windows kept (each about two seconds).
pub const KEEP: usize = 5;
/// Branches below this share of the samples are left out.
const MIN_SHARE: f64 = 0.02;

#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// (PID profiled, one window of its profile), oldest first.
    pub list: VecDeque<(i32, Profile)>,
    /// Lines scrolled off the top of the panel.
    pub scroll: super::Scroll,
}

impl Windows {
    pub fn absorb(&mut self, pid: i32, p: Profile) {
        self.list.push_back((pid, p));
        while self.list.len() > KEEP {
            self.list.pop_front();
        }
    }

    /// Every window of `pid` as one profile, identical stacks merged.
    pub fn merged(&self, pid: i32) -> Profile {
        let mut out = Profile::default();
        for (_, p) in self.list.iter().filter(|(p, _)| *p == pid) {
            out.samples += p.samples;
            out.lost += p.lost;
            out.cost.wall_secs += p.cost.wall_secs;
            out.freq_hz = p.freq_hz;
            out.event.clone_from(&p.event);
            out.target.clone_from(&p.target);
            for s in &p.stacks {
                match out
                    .stacks
                    .iter_mut()
                    .find(|o| o.comm == s.comm && o.frames == s.frames)
                {
                    Some(o) => {
                        o.samples += s.samples;
                        o.weight += s.weight;
                    }
                    None => out.stacks.push(s.clone()),
                }
            }
        }
        out
    }

    /// The evidence this panel saves: folded stacks of the last seconds.
    pub fn folded(&self, pid: i32) -> String {
        let mut text = fold::fold(&self.merged(pid)).join("\n");
        text.push('\n');
        text
    }

    pub fn draw(&self, f: &mut Frame, area: Rect, pid: i32, status: &str) {
        let p = self.merged(pid);
        let mut lines = vec![Line::from(format!(
            "{} samples in the last {:.0} s{}{}",
            p.samples,
            p.cost.wall_secs,
            if p.samples == 0 {
                " (the first window comes after two seconds)"
            } else {
                ""
            },
            if status.is_empty() {
                String::new()
            } else {
                format!(" · {status}")
            }
        ))];
        if p.samples > 0 {
            let s = fold::summarize(&p, 5);
            lines.push(Line::styled(
                "Top functions by self time (where the CPU was)",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            for fs in &s.top_self {
                let mark = if fs.kernel { " [k]" } else { "" };
                let room = (area.width as usize).saturating_sub(8 + mark.len());
                lines.push(Line::from(format!(
                    "{:5.1}%  {}{mark}",
                    fs.percent,
                    keep_end(&fs.name, room)
                )));
            }
            lines.push(Line::styled(
                "Call tree, outermost first (› calls, [k] kernel, ↑ ↓ scroll)",
                Style::new().add_modifier(Modifier::BOLD),
            ));
            lines.extend(flame_lines(&p.stacks, area.width as usize));
        }
        super::scrolled(f, area, lines, &self.scroll);
    }
}

/// A node of the call tree.
#[derive(Debug, Default)]
struct Node {
    frame: Option<StackFrame>,
    samples: u64,
    children: Vec<Node>,
}

impl Node {
    fn add(&mut self, frames: &[StackFrame], samples: u64) {
        self.samples += samples;
        let Some((first, rest)) = frames.split_first() else {
            return;
        };
        let i = match self
            .children
            .iter()
            .position(|c| c.frame.as_ref() == Some(first))
        {
            Some(i) => i,
            None => {
                self.children.push(Node {
                    frame: Some(first.clone()),
                    ..Default::default()
                });
                self.children.len() - 1
            }
        };
        self.children[i].add(rest, samples);
    }
}

/// The call tree of `stacks` as lines no wider than `width`.
pub fn flame_lines(stacks: &[Stack], width: usize) -> Vec<Line<'static>> {
    let mut root = Node::default();
    for s in stacks {
        let mut frames = vec![StackFrame::user(s.comm.clone())];
        frames.extend(s.frames.iter().cloned());
        root.add(&frames, s.samples);
    }
    let total = root.samples.max(1);
    let mut out = Vec::new();
    let mut kids: Vec<&Node> = root.children.iter().collect();
    kids.sort_by_key(|k| std::cmp::Reverse(k.samples));
    for k in kids {
        walk(k, 0, total, width, &mut out);
    }
    out
}

fn walk(node: &Node, depth: usize, total: u64, width: usize, out: &mut Vec<Line<'static>>) {
    if (node.samples as f64) < MIN_SHARE * total as f64 {
        return;
    }
    // Follow single callees with (nearly) all the samples, on the same side
    // of the user/kernel line.
    let mut chain = vec![node];
    let mut at = node;
    loop {
        let shown: Vec<&Node> = at
            .children
            .iter()
            .filter(|c| c.samples as f64 >= MIN_SHARE * total as f64)
            .collect();
        let [only] = shown.as_slice() else { break };
        let side = |n: &Node| n.frame.as_ref().map(|f| f.kernel);
        if side(only) != side(at) || only.samples * 100 < at.samples * 98 {
            break;
        }
        chain.push(only);
        at = only;
    }
    let pct = 100.0 * node.samples as f64 / total as f64;
    let indent = "  ".repeat(depth.min(8));
    let lead = format!("{pct:5.1}% {indent}");
    let cont = " ".repeat(lead.chars().count() + 2);
    let kernel = chain[0].frame.as_ref().is_some_and(|f| f.kernel);
    let names: Vec<String> = chain
        .iter()
        .filter_map(|n| n.frame.as_ref())
        .map(|f| f.name.clone())
        .collect();
    let style = if kernel { Style::new() } else { code_style() };
    let mut line = vec![Span::raw(lead.clone())];
    let mut used = lead.chars().count();
    let mark = if kernel { 4 } else { 0 };
    for (i, name) in names.iter().enumerate() {
        let piece = if i == 0 {
            keep_end(name, width.saturating_sub(used + mark))
        } else {
            format!(" › {name}")
        };
        let len = piece.chars().count();
        if i > 0 && used + len > width {
            out.push(Line::from(std::mem::take(&mut line)));
            line.push(Span::raw(cont.clone()));
            used = cont.chars().count();
            let room = width.saturating_sub(used + 2 + mark);
            let piece = format!("› {}", keep_end(name, room));
            used += piece.chars().count();
            line.push(Span::styled(piece, style));
            continue;
        }
        used += len;
        line.push(Span::styled(piece, style));
    }
    if kernel {
        line.push(Span::raw(" [k]"));
    }
    out.push(Line::from(line));
    let mut kids: Vec<&Node> = at.children.iter().collect();
    kids.sort_by_key(|k| std::cmp::Reverse(k.samples));
    for k in kids {
        walk(k, depth + 1, total, width, out);
    }
}

/// `name` in `room` characters: a name too long loses its start, not its
/// end, where the function is (`…buffered::spool_file_copy`).
pub fn keep_end(name: &str, room: usize) -> String {
    let n = name.chars().count();
    if n <= room || room < 8 {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (room - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[(&str, bool)], samples: u64) -> Stack {
        Stack {
            comm: "app".into(),
            frames: frames
                .iter()
                .map(|(n, k)| StackFrame {
                    name: n.to_string(),
                    kernel: *k,
                    module: None,
                })
                .collect(),
            samples,
            weight: samples * 1000,
            user_depth: 3,
            state: None,
            waker: None,
            ongoing: false,
        }
    }

    #[test]
    fn chains_merge_and_split_at_the_kernel() {
        let stacks = [
            stack(
                &[
                    ("main", false),
                    ("run", false),
                    ("write", false),
                    ("sys_write", true),
                    ("copy", true),
                ],
                90,
            ),
            stack(
                &[
                    ("main", false),
                    ("run", false),
                    ("write", false),
                    ("sys_write", true),
                    ("wait", true),
                ],
                8,
            ),
            stack(&[("main", false), ("idle", false)], 1),
        ];
        let text: Vec<String> = flame_lines(&stacks, 60)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(
            text,
            [
                "100.0% app › main › run › write",
                " 99.0%   sys_write [k]",
                " 90.9%     copy [k]",
                "  8.1%     wait [k]",
            ]
        );
        // Narrow: the chain wraps under itself.
        let text: Vec<String> = flame_lines(&stacks, 24)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(text[0], "100.0% app › main › run");
        assert_eq!(text[1], "         › write");
    }

    #[test]
    fn long_names_keep_the_function() {
        let name = "kdiag_workloads::memory::buffered::spool_file_copy";
        let stacks = [stack(&[("main", false), (name, false)], 10)];
        let text: Vec<String> = flame_lines(&stacks, 40)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert!(text.iter().all(|l| l.chars().count() <= 40), "{text:?}");
        assert!(text[1].starts_with("         › …"), "{text:?}");
        assert!(text[1].ends_with("::buffered::spool_file_copy"), "{text:?}");
        assert_eq!(keep_end(name, 100), name);
    }
}
