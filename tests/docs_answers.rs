//! What a learner reads before answering never names an answer: docs/lab.md,
//! every lab's welcome, step titles and texts, question names, hints and
//! "not yet" messages. The answers are the reference solutions'
//! (checks/solutions/, their `{fact}`s filled from a seed's truth by the
//! same code `kdiag lab solution` and `kdiag check --self-test` use), plus
//! the synonyms an `equals` check accepts, for several seeds so that every
//! variant's answers are looked for, the self-study seed of each learner
//! name below among them.
//!
//! The rule: an answer leaks when a text contains it as a whole word,
//! ignoring case. Not looked for, because finding them would say nothing:
//! - numbers, in digits or words, with or without a unit (a phdr index, a
//!   count, "two", a size like "64K"), and answers under three characters
//!   ("R", "D"): every text is full of them, and a number is a leak only
//!   beside what it counts, which no word test can tell;
//! - the answers of choice questions: the question lists every choice;
//! - the workload's name (`who.comm`): `kdiag lab list` shows it, and the
//!   question is which process it is, found by its behaviour.
//!
//! Where a text may name answers: a step's write-up (shown once the step is
//! done) names that step's answers; the lab's final text (shown once all
//! are done) names any; and docs/lab.md walks through 0-demo, the tour, on
//! screens captured from a real run (docs/capture), so its answers show
//! there. Answers stay in checks/solutions/ and docs/instructor.md.

use std::collections::BTreeSet;

use kdiag::course::token::self_study_token;
use kdiag::grade::checks::Kind;
use kdiag::lab::{self, LabSource, solution};
use kdiag::model::lab::Input;

const LEARNERS: [&str; 8] = [
    "kdiag-learner",
    "student",
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
];

/// One lab's answers worth looking for, by step id.
struct Answer {
    step: String,
    key: String,
    value: String,
}

fn answers_of(source: &LabSource, id: &str) -> Vec<Answer> {
    let (lab, checks) = lab::load(source, id).unwrap();
    let sol = solution::load(source, id).unwrap();
    let mut values: BTreeSet<(String, String)> = BTreeSet::new();
    for learner in LEARNERS {
        let facts = lab::facts(&lab, &self_study_token(learner)).unwrap();
        let (answers, _live) = solution::answers(&sol, &facts).unwrap();
        for key in answers.keys() {
            if let Some(v) = answers.get(&key) {
                values.insert((key, v));
            }
        }
    }
    for c in checks.checks.iter().filter(|c| c.kind == Kind::Equals) {
        for v in &c.accept {
            values.insert((c.id.clone(), v.clone()));
        }
    }
    values
        .into_iter()
        .filter(|(key, value)| {
            let check = checks.checks.iter().find(|c| &c.id == key);
            let is_choice = lab
                .steps
                .iter()
                .any(|s| matches!(s.inputs.get(key), Some(Input::Choice { .. })));
            let generic = value.len() < 3 || is_number(value);
            let workload_name = check.and_then(|c| c.fact.as_deref()) == Some("workload.name");
            check.is_some_and(|c| !c.is_artifact()) && !is_choice && !generic && !workload_name
        })
        .map(|(key, value)| Answer {
            step: key.split('.').next().unwrap_or_default().to_string(),
            key,
            value,
        })
        .collect()
}

/// A number in digits, perhaps with a unit (`64K`, `30 s`), or in words.
fn is_number(value: &str) -> bool {
    const WORDS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let digits = value.trim_end_matches(|c: char| c.is_alphabetic() || c == ' ');
    digits.parse::<f64>().is_ok() || WORDS.contains(&value.to_lowercase().as_str())
}

/// Whether `text` holds `word` as a whole word (no letter, digit or `_`
/// right before or after it), ignoring case.
fn has_word(text: &str, word: &str) -> bool {
    let (text, word) = (text.to_lowercase(), word.to_lowercase());
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(&word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// A student-facing text: where it is, which step's answers it may name
/// (None: none), and the text.
struct Text {
    place: String,
    own_step: Option<String>,
    body: String,
}

fn texts_of(source: &LabSource, id: &str) -> Vec<Text> {
    let (lab, checks) = lab::load(source, id).unwrap();
    let text = |place: String, own: Option<&str>, body: &str| Text {
        place,
        own_step: own.map(str::to_string),
        body: body.to_string(),
    };
    let mut out = vec![
        text(format!("{id} welcome"), None, &lab.welcome),
        text(format!("{id} title"), None, &lab.title),
    ];
    for s in &lab.steps {
        out.push(text(format!("{id} step {} title", s.id), None, &s.title));
        out.push(text(format!("{id} step {} text", s.id), None, &s.text));
        out.push(text(
            format!("{id} step {} write-up", s.id),
            Some(&s.id),
            &s.explain,
        ));
    }
    for c in &checks.checks {
        let said = format!("{} {} {}", c.name, c.hint, c.fail);
        out.push(text(format!("{id} check {}", c.id), None, &said));
    }
    out
}

fn leaks() -> Vec<String> {
    let source = LabSource::default();
    let ids = source.ids().unwrap();
    let manual = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/lab.md"))
        .expect("docs/lab.md");
    let mut found = Vec::new();
    for id in &ids {
        let answers = answers_of(&source, id);
        let mut texts = texts_of(&source, id);
        if id != "0-demo" {
            texts.push(Text {
                place: "docs/lab.md".into(),
                own_step: None,
                body: manual.clone(),
            });
        }
        for t in &texts {
            for a in &answers {
                if t.own_step.as_deref() != Some(a.step.as_str()) && has_word(&t.body, &a.value) {
                    found.push(format!(
                        "{}: names {:?}, the answer of {id} {}",
                        t.place, a.value, a.key
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_student_text_names_an_answer() {
    let found = leaks();
    assert!(
        found.is_empty(),
        "{} answers given away:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The test finds what it looks for: every lab has answers to look for, and
/// a text naming one is caught.
#[test]
fn the_answers_are_found_in_a_text_that_names_them() {
    let source = LabSource::default();
    for id in source.ids().unwrap() {
        let answers = answers_of(&source, &id);
        assert!(!answers.is_empty(), "{id}: no answer to look for");
        let a = &answers[0];
        let text = format!("Hint: it is {}.", a.value.to_uppercase());
        assert!(has_word(&text, &a.value), "{id}: {:?} not found", a.value);
    }
    assert!(has_word("in syncfs(2)", "syncfs"));
    assert!(!has_word("ksys_syncfs", "syncfs"));
    assert!(!has_word("syncfsx", "syncfs"));
}
