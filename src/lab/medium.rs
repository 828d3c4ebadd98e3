//! A step's text for the medium it is read in. The app draws panels and
//! reads keys; `--plain` has neither, and says the same with commands. In
//! a step's markdown a block fenced `::: app` … `:::` is the app's alone,
//! `::: plain` … `:::` plain mode's alone (pandoc's fenced divs); the rest
//! reads the same in both. A check's hint is written the same way, and
//! read as one line. `runnable` makes a text's commands name the kdiag
//! that runs it when `kdiag` alone would not find it. A block fenced
//! `::: if FACT=VALUE` … `:::` is for the variants whose fact has that value
//! (`::: if expect.defect=congruence`): `for_variant` keeps or drops it
//! when the lab starts for a seed, before the medium is chosen.

use crate::grade::Facts;

/// Where a lab is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    App,
    Plain,
}

impl Medium {
    fn name(self) -> &'static str {
        match self {
            Medium::App => "app",
            Medium::Plain => "plain",
        }
    }
}

/// `md` with the other medium's blocks and every fence line left out (and
/// the blank lines around a block left out, one kept).
pub fn text_for(md: &str, medium: Medium) -> String {
    let mut out = String::new();
    // The medium of the block the line is in, None outside blocks.
    let mut block: Option<&str> = None;
    for line in md.lines() {
        let fence = line.trim_end();
        if let Some(name) = fence.strip_prefix(":::") {
            block = match name.trim() {
                "" => None,
                name => Some(name),
            };
            continue;
        }
        let blank_again = line.trim().is_empty() && (out.is_empty() || out.ends_with("\n\n"));
        if block.is_none_or(|b| b == medium.name()) && !blank_again {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `md` for the variant whose truth is `facts`: each `::: if FACT=VALUE`
/// block kept when the fact is VALUE (as `Facts::get` reads it), dropped
/// otherwise, its fence lines dropped either way; other blocks, which may
/// hold or sit in a variant block, stay as they are.
pub fn for_variant(md: &str, facts: &Facts) -> String {
    let mut out = String::new();
    // Every open block: whether it is a variant block, and whether it holds.
    let mut open: Vec<(bool, bool)> = Vec::new();
    for line in md.lines() {
        // Whether the line is a variant block's fence, left out.
        let variant_fence = match line.trim_end().strip_prefix(":::").map(str::trim) {
            Some("") => open.pop().is_some_and(|(variant, _)| variant),
            Some(name) => {
                let holds = name.strip_prefix("if ").map(|cond| {
                    let (fact, value) = cond.split_once('=').unwrap_or((cond, ""));
                    facts.get(fact.trim()).as_deref() == Some(value.trim())
                });
                open.push((holds.is_some(), holds.unwrap_or(true)));
                holds.is_some()
            }
            None => false,
        };
        if !variant_fence && open.iter().all(|&(_, holds)| holds) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A one-line text (a check's hint) for `medium`: its lines joined by
/// spaces.
pub fn line_for(text: &str, medium: Medium) -> String {
    text_for(text, medium)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// How the learner starts kdiag from a shell.
#[derive(Debug, Clone, Copy, Default)]
pub struct Launch<'a> {
    /// This kdiag's path, when a shell would not find it as `kdiag`.
    pub exe: Option<&'a str>,
    /// Through a course server's service (`kdiag serve`): kdiag asks it
    /// for what needs root, so the texts' `sudo kdiag` is `kdiag`.
    pub served: bool,
}

impl<'a> Launch<'a> {
    /// How this kdiag was started (by `kdiag serve` or not), `exe` as above.
    pub fn here(exe: Option<&'a str>) -> Launch<'a> {
        Launch {
            exe,
            served: crate::sys::process::privilege::served(),
        }
    }

    /// The words that start kdiag with root's rights: `sudo kdiag`, or
    /// `kdiag` alone when served.
    pub fn as_root(&self) -> String {
        let exe = self.exe.unwrap_or("kdiag");
        match self.served {
            true => exe.to_string(),
            false => format!("sudo {exe}"),
        }
    }
}

/// `text` with its commands runnable as printed: the word `kdiag` before
/// arguments, in code spans and code lines (indented by four), becomes
/// the launch's `exe`, wherever it is in the command (`kdiag time kdiag
/// workload ...`), and loses its `sudo` when served.
pub fn runnable(text: &str, launch: Launch) -> String {
    if launch.exe.is_none() && !launch.served {
        return text.to_string();
    }
    let mut in_span = false;
    text.lines()
        .map(|l| {
            if l.starts_with("    ") {
                return commands(l, launch, false);
            }
            if l.trim().is_empty() {
                // A span never crosses paragraphs.
                in_span = false;
            }
            let mut out = String::new();
            let parts: Vec<&str> = l.split('`').collect();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('`');
                    in_span = !in_span;
                }
                match in_span {
                    // A span open at the end of the line goes on.
                    true => out.push_str(&commands(part, launch, i == parts.len() - 1)),
                    false => out.push_str(part),
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `code` with every `kdiag` followed by an argument (on the next line
/// when the code `goes_on`) launched as `launch` says.
fn commands(code: &str, launch: Launch, goes_on: bool) -> String {
    let words: Vec<&str> = code.split(' ').collect();
    let last = words.len() - 1;
    let command = |i: usize| words.get(i) == Some(&"kdiag") && (i < last || goes_on);
    words
        .iter()
        .enumerate()
        .filter(|&(i, w)| !(launch.served && *w == "sudo" && command(i + 1)))
        .map(|(i, w)| match command(i) {
            true => launch.exe.unwrap_or("kdiag"),
            false => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::LabSource;

    #[test]
    fn each_medium_keeps_its_blocks_and_the_shared_text() {
        let md = "Both.\n\n::: app\nThe **profile** panel.\n:::\n\n::: plain\nIn a shell.\n:::\nBoth again.\n";
        assert_eq!(
            text_for(md, Medium::App),
            "Both.\n\nThe **profile** panel.\n\nBoth again.\n"
        );
        assert_eq!(
            text_for(md, Medium::Plain),
            "Both.\n\nIn a shell.\nBoth again.\n"
        );
    }

    #[test]
    fn a_variant_keeps_its_blocks_only() {
        let truth = serde_json::json!({"expect": {"defect": "congruence"}});
        let facts = Facts::from_truth(&crate::course::Token::parse("t").unwrap(), &truth);
        let md = "All.\n::: if expect.defect=congruence\nAligned.\n::: app\nPanel.\n:::\n:::\n\
                  ::: if expect.defect=huge-memsz\nToo big.\n::: plain\nShell.\n:::\n:::\n\
                  ::: app\nKeys.\n:::\nEnd.\n";
        assert_eq!(
            for_variant(md, &facts),
            "All.\nAligned.\n::: app\nPanel.\n:::\n::: app\nKeys.\n:::\nEnd.\n"
        );
    }

    /// Every `::: if` block of the built-in labs is shown to some variant
    /// (a misspelt fact or value never would be).
    #[test]
    fn every_variant_block_is_some_variants() {
        let source = LabSource::default();
        for id in source.ids().unwrap() {
            let (lab, _) = crate::lab::load(&source, &id).unwrap();
            let seeds = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
            let facts: Vec<Facts> = seeds
                .iter()
                .map(|s| crate::lab::facts(&lab, &crate::course::Token::parse(s).unwrap()).unwrap())
                .collect();
            for step in &lab.steps {
                for md in [&step.text, &step.explain] {
                    for line in md.lines().filter(|l| l.starts_with("::: if ")) {
                        let block = format!("{line}\nshown\n:::\n");
                        assert!(
                            facts.iter().any(|f| for_variant(&block, f) == "shown\n"),
                            "{id} step {}: no variant of 12 shows {line:?}",
                            step.id
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_hint_is_one_line_of_its_medium() {
        let hint = "::: app\nThe trend panel.\n:::\n::: plain\nsudo kdiag diagnose\n-p PID.\n:::\n";
        assert_eq!(line_for(hint, Medium::App), "The trend panel.");
        assert_eq!(line_for(hint, Medium::Plain), "sudo kdiag diagnose -p PID.");
        assert_eq!(line_for("Both.", Medium::Plain), "Both.");
    }

    /// What only the app has: its panels and the keys that drive them.
    const APP_ONLY: [&str; 8] = [
        "panel",
        "Panel",
        "↑",
        "↓",
        "Enter",
        "highlight",
        "Highlight",
        "switches to",
    ];

    /// Every built-in lab's steps and hints, read in plain mode by any of
    /// a few variants, mention no panel or key of the app; every fence
    /// names a medium and is closed.
    #[test]
    fn plain_texts_never_mention_the_apps_panels_or_keys() {
        let source = LabSource::default();
        for (id, seed) in source
            .ids()
            .unwrap()
            .iter()
            .flat_map(|id| ["a", "b", "c", "d", "e", "f"].map(|s| (id.clone(), s)))
        {
            let (lab, checks) = crate::lab::load(&source, &id).unwrap();
            let facts =
                crate::lab::facts(&lab, &crate::course::Token::parse(seed).unwrap()).unwrap();
            for step in &lab.steps {
                let hints = checks.checks.iter().filter(|c| c.step == step.id);
                let texts = [&step.text, &step.explain]
                    .into_iter()
                    .chain(hints.map(|c| &c.hint))
                    .map(|md| for_variant(md, &facts));
                for md in texts {
                    let mut open: Option<&str> = None;
                    for line in md.lines() {
                        if let Some(name) = line.trim_end().strip_prefix(":::") {
                            let name = name.trim();
                            match open {
                                None => assert!(
                                    ["app", "plain"].contains(&name),
                                    "{id} {}: a block of no medium: {line:?}",
                                    step.id
                                ),
                                Some(_) => assert!(name.is_empty(), "{id} {}: nested", step.id),
                            }
                            open = (!name.is_empty()).then_some(name);
                        }
                    }
                    assert!(open.is_none(), "{id} {}: a block never closed", step.id);
                    let plain = text_for(&md, Medium::Plain);
                    for word in APP_ONLY {
                        let found = plain.lines().find(|l| l.contains(word));
                        assert!(
                            found.is_none(),
                            "{id} step {} in plain mode says {word:?}: {:?}",
                            step.id,
                            found
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn commands_become_runnable_wherever_kdiag_is() {
        let text = "Run `sudo kdiag top` or `kdiag\nps -e`; kdiag is a tool, `kdiag`.\n\n    \
                    kdiag time -v kdiag workload run x --seed s\n";
        let exe = Launch {
            exe: Some("/b/kdiag"),
            served: false,
        };
        assert_eq!(
            runnable(text, exe),
            "Run `sudo /b/kdiag top` or `/b/kdiag\nps -e`; kdiag is a tool, `kdiag`.\n\n    \
             /b/kdiag time -v /b/kdiag workload run x --seed s"
        );
        assert_eq!(runnable(text, Launch::default()), text);
        // Through the service, no sudo: kdiag asks the service itself.
        let served = Launch {
            exe: None,
            served: true,
        };
        assert_eq!(
            runnable("Run `sudo kdiag top`, not `sudo ls` or sudo.\n", served),
            "Run `kdiag top`, not `sudo ls` or sudo."
        );
    }
}
