//! What a class's grading tells the instructor: every output records the
//! version of the checks that graded it (a hash that follows the lab's
//! files), and `--summary` shows the class at a glance, checked on a
//! generated class with known mistakes.

mod common;

use std::path::{Path, PathBuf};

use common::{kdiag, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn course(dir: &Path) -> PathBuf {
    let course = dir.join("course.toml");
    let out = kdiag()
        .args(["course", "init", "--labs", "0-demo", "--out", s(&course)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    course
}

/// Learner `id`'s reference answers without the profile (no evidence file),
/// with `wrong` keys (as `kdiag lab solution` prints them) given a wrong value.
fn answers(course: &Path, id: &str, wrong: &[&str]) -> String {
    common::lab_solution(course, id)
        .lines()
        .filter(|l| !l.starts_with("profile ="))
        .map(|l| match l.split_once(" = ") {
            Some((k, _)) if wrong.contains(&k) => format!("{k} = \"not-it\"\n"),
            _ => format!("{l}\n"),
        })
        .collect()
}

fn grade(args: &[&str]) -> (String, String) {
    let out = kdiag().arg("grade").args(args).output().unwrap();
    assert!(
        out.status.code().unwrap() <= 1,
        "{args:?}: {}",
        stderr(&out)
    );
    (stdout(&out), stderr(&out))
}

/// A copy of the repository's labs/ and checks/ under `to`.
fn copy_labs(to: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for top in ["labs", "checks"] {
        let out = std::process::Command::new("cp")
            .arg("-r")
            .arg(root.join(top))
            .arg(to)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

#[test]
fn every_output_records_the_checks_version_and_it_follows_the_checks_file() {
    let d = tempfile::tempdir().unwrap();
    let course = course(d.path());
    let subs = d.path().join("subs");
    let ada = subs.join("ada");
    std::fs::create_dir_all(&ada).unwrap();
    std::fs::write(ada.join("answers.toml"), answers(&course, "ada", &[])).unwrap();
    let class = |extra: &[&str]| {
        let mut args = vec![
            "0-demo",
            s(&subs),
            "--course",
            s(&course),
            "--format",
            "json",
        ];
        args.extend(extra);
        let (out, _) = grade(&args);
        let g: serde_json::Value = serde_json::from_str(&out).unwrap();
        g["checks_version"].as_str().unwrap().to_string()
    };
    let version = class(&[]);
    assert!(
        version.len() == 12 && version.chars().all(|c| c.is_ascii_hexdigit()),
        "{version}"
    );
    for format in ["text", "json", "gradescope", "prairielearn", "junit", "csv"] {
        let (one, _) = grade(&[
            "0-demo",
            s(&ada),
            "--course",
            s(&course),
            "--learner",
            "ada",
            "--format",
            format,
        ]);
        assert!(one.contains(&version), "{format} lacks {version}: {one}");
    }
    for format in ["csv", "junit"] {
        let (all, _) = grade(&[
            "0-demo",
            s(&subs),
            "--course",
            s(&course),
            "--format",
            format,
        ]);
        assert!(all.contains(&version), "{format} lacks {version}: {all}");
    }
    // The same files read from a folder: the same version; one check's
    // hint edited: another.
    let labs = d.path().join("labs-copy");
    std::fs::create_dir(&labs).unwrap();
    copy_labs(&labs);
    assert_eq!(class(&["--labs", s(&labs)]), version);
    let file = labs.join("checks/0-demo.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen("hint = \"", "hint = \"Edited. ", 1);
    assert_ne!(edited, text);
    std::fs::write(&file, edited).unwrap();
    let other = class(&["--labs", s(&labs)]);
    assert_ne!(other, version, "an edited checks file has another version");
}

#[test]
fn the_summary_shows_the_distribution_the_most_missed_checks_and_what_went_wrong() {
    let d = tempfile::tempdir().unwrap();
    let course = course(d.path());
    let subs = d.path().join("subs");
    // 40 learners hand in: half miss the region's size, a quarter the
    // function, and s000 copies s020's answers. s040 hands in broken TOML;
    // s041 and s042 hand in nothing.
    let ids: Vec<String> = (0..43).map(|n| format!("s{n:03}")).collect();
    std::fs::write(
        d.path().join("roster.csv"),
        format!("id\n{}\n", ids.join("\n")),
    )
    .unwrap();
    for (n, id) in ids.iter().enumerate().take(41) {
        let mut wrong = Vec::new();
        if n % 2 == 1 {
            wrong.push("region_bytes");
        }
        if n % 4 == 1 {
            wrong.push("function");
        }
        let text = match n {
            0 => answers(&course, &ids[20], &[]),
            40 => "[[[ not toml".to_string(),
            _ => answers(&course, id, &wrong),
        };
        std::fs::create_dir_all(subs.join(id)).unwrap();
        std::fs::write(subs.join(id).join("answers.toml"), text).unwrap();
    }
    let roster = d.path().join("roster.csv");
    let class = |extra: &[&str]| {
        let mut args = vec!["0-demo", s(&subs), "--course", s(&course)];
        args.extend(extra);
        args.extend(["--roster", s(&roster)]);
        grade(&args).0
    };
    let out = class(&["--summary"]);
    let json = class(&["--format", "json"]);
    let g: serde_json::Value = serde_json::from_str(&json).unwrap();
    let version = g["checks_version"].as_str().unwrap();
    assert!(
        out.starts_with(&format!(
            "Lab 0-demo, checks version {version}: 40 graded, 1 could not be graded, 2 missing."
        )),
        "{out}"
    );
    // The distribution, recomputed from the JSON's scores.
    let max = g["max_score"].as_f64().unwrap();
    let mut bins = [0usize; 10];
    for r in g["submissions"].as_array().unwrap() {
        if r["error"].is_null() {
            let score = r["score"].as_f64().unwrap();
            bins[((score / max * 10.0) as usize).min(9)] += 1;
        }
    }
    assert_eq!(bins.iter().sum::<usize>(), 40);
    let rows: Vec<usize> = out
        .lines()
        .skip_while(|l| !l.starts_with("Scores (of"))
        .skip(1)
        .take(10)
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(rows, bins, "{out}");
    // Most missed first, each count as the JSON's rows have it: the
    // profile nobody handed in, then the region's size (20 of 40, and
    // s000's copy when s020's variant differs), then the function (10, +1).
    let mut missed: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in g["submissions"].as_array().unwrap() {
        for c in r["checks"].as_array().unwrap() {
            if c["graded"] == true && c["status"] != "passed" {
                *missed.entry(c["id"].as_str().unwrap()).or_default() += 1;
            }
        }
    }
    let lines: Vec<(usize, &str)> = out
        .lines()
        .skip_while(|l| !l.starts_with("Checks, the most missed first"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[4].parse().unwrap(), w[5])
        })
        .collect();
    assert_eq!(lines.len(), 9, "{out}");
    for (n, id) in &lines {
        assert_eq!(*n, missed.get(id).copied().unwrap_or(0), "{id}: {out}");
    }
    assert!(lines.windows(2).all(|w| w[0].0 >= w[1].0), "{out}");
    let ids: Vec<&str> = lines.iter().map(|l| l.1).collect();
    assert_eq!(
        ids[..3],
        ["artifacts.profile", "trend.region_bytes", "why.function"],
        "{out}"
    );
    assert!(
        lines[0].0 == 40 && lines[1].0 >= 20 && lines[2].0 >= 10,
        "{out}"
    );
    // Every flag, as the JSON lists them (s000's copy, when its variant
    // and s020's differ enough to tell), the broken submission's reason,
    // the missing.
    let flags = g["suspicious"].as_array().unwrap();
    assert!(out.contains(&format!("Flags ({}):", flags.len())), "{out}");
    for f in flags {
        assert!(out.contains(f["detail"].as_str().unwrap()), "{out}");
    }
    let broken = out
        .lines()
        .skip_while(|l| !l.starts_with("Not gradable (1)"))
        .nth(1);
    assert!(
        broken.is_some_and(|b| b.starts_with("  s040: ") && b.contains("answers.toml:1:")),
        "{out}"
    );
    assert!(out.contains("Missing (2): s041, s042"), "{out}");
    // The same as one self-contained page.
    let page = class(&["--summary", "--format", "html"]);
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    for want in [version, "<svg", "trend.region_bytes", "s040", "s042"] {
        assert!(page.contains(want), "the page lacks {want}: {page}");
    }
    for never in ["<script", "src=", "href=", "<link"] {
        assert!(
            !page.contains(never),
            "the page is not self-contained ({never})"
        );
    }
    let row = |id: &str| page.find(&format!("<code>{id}</code>")).unwrap();
    assert!(row("artifacts.profile") < row("trend.region_bytes"));
    assert!(row("trend.region_bytes") < row("why.function"));
    drawn_by_chromium(&page, &bins);
    // A summary is of a class, in text or html; html is for a summary.
    let one = subs.join("s001");
    for (path, extra) in [(&one, &[][..]), (&subs, &["--format", "csv"][..])] {
        let out = kdiag()
            .args([
                "grade",
                "0-demo",
                s(path),
                "--course",
                s(&course),
                "--summary",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    }
    let out = kdiag()
        .args([
            "grade",
            "0-demo",
            s(&subs),
            "--course",
            s(&course),
            "--format",
            "html",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// The page as headless Chromium reads it: no console message, a column
/// per tenth of the maximum with the class's counts, every check a row.
fn drawn_by_chromium(page: &str, bins: &[usize]) {
    let test = "the_summary_shows_the_distribution_the_most_missed_checks_and_what_went_wrong";
    let Some(browser) = common::chromium::browser(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("summary.html");
    std::fs::write(&file, page).unwrap();
    let (dom, console) = common::chromium::headless(browser, &file, &["--dump-dom"]);
    assert!(console.is_empty(), "console messages: {console:#?}");
    let drawn: Vec<usize> = dom
        .split("<rect class=\"column\"")
        .skip(1)
        .map(|r| {
            let title = &r[r.find("<title>").unwrap() + 7..r.find("</title>").unwrap()];
            title.rsplit(": ").next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(drawn, bins, "{dom}");
    assert_eq!(dom.matches("<tr>").count(), 1 + 9, "{dom}");
}
