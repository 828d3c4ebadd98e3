//! A class list: a CSV file with a header row, one learner per row. The
//! roster names its own columns: the learner id is the column
//! `--id-column` names, else the left-most column whose header is one of
//! [`ID_COLUMNS`] (an LMS export `student_id,name,email,login` is keyed by
//! `student_id`); the login (the learner's account on a course server) is
//! the column `--login-column` names, else the one headed `login` or
//! `username`. An optional `folder` (or `submission`) column names the
//! learner's submission folder when it is not the id itself. The other id
//! columns (an `email` beside the `id`, the login) are the learner's
//! aliases: a platform that names learners by email finds them by it.

use std::collections::HashSet;
use std::path::Path;

use anyhow::Context;

use crate::user_files::{self, Limits};

/// Header names a learner id column may have (the left-most one is the id).
pub const ID_COLUMNS: &[&str] = &[
    "id",
    "learner",
    "learner_id",
    "student_id",
    "sid",
    "email",
    "username",
    "login",
];
/// Header names of the column mapping a submission folder to the learner.
pub const FOLDER_COLUMNS: &[&str] = &["folder", "submission"];
/// Header names of the column holding each learner's account (login).
pub const LOGIN_COLUMNS: &[&str] = &["login", "username"];

/// Which columns are what, when the header alone does not say
/// (`--id-column`, `--login-column`); by header name, any case.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Columns {
    /// The roster's learner id column (default: the left-most of id,
    /// learner, learner_id, student_id, sid, email, username, login)
    #[arg(long, value_name = "HEADER")]
    pub id_column: Option<String>,
    /// The roster's column of account names on the course server
    /// (default: the column headed login or username)
    #[arg(long, value_name = "HEADER")]
    pub login_column: Option<String>,
}

/// Rosters of whole universities fit; a file far larger is not a roster.
const MAX_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learner {
    /// As written in the roster (normalised only when deriving tokens).
    pub id: String,
    /// The submission folder's name, if the roster maps one.
    pub folder: Option<String>,
    /// The learner's values in the other id columns (email, login, ...).
    pub aliases: Vec<String>,
    /// Their account on a course server, when the roster has a login column.
    pub login: Option<String>,
}

impl Learner {
    /// Whether `name` is this learner's id or one of their aliases.
    pub fn is(&self, name: &str) -> bool {
        let norm = super::token::normalise_id(name);
        std::iter::once(&self.id)
            .chain(&self.aliases)
            .any(|v| super::token::normalise_id(v) == norm)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Roster {
    pub learners: Vec<Learner>,
}

impl Roster {
    pub fn load(path: &Path, columns: &Columns) -> anyhow::Result<Roster> {
        let text = user_files::read_to_string(path, &Limits::input().max(MAX_BYTES))
            .map_err(anyhow::Error::from)
            .context("cannot read the roster")?;
        Roster::parse(&path.display().to_string(), &text, columns)
    }

    pub fn parse(name: &str, text: &str, columns: &Columns) -> anyhow::Result<Roster> {
        let mut rows = csv_rows(text).into_iter().enumerate();
        let Some((_, header)) = rows.next() else {
            anyhow::bail!("{name} is empty: it needs a header row and one learner per row");
        };
        let lower: Vec<String> = header.iter().map(|h| h.trim().to_lowercase()).collect();
        // The file's order decides, not the order of a list.
        let find = |names: &[&str]| lower.iter().position(|h| names.contains(&h.as_str()));
        let named = |flag: &str, col: &str| {
            lower
                .iter()
                .position(|h| *h == col.trim().to_lowercase())
                .ok_or_else(|| {
                    crate::error::usage(format!(
                        "{name}:1: no column {col:?} ({flag}); its columns are: {}",
                        header.join(", ")
                    ))
                })
        };
        let id_col = match &columns.id_column {
            Some(c) => named("--id-column", c)?,
            None => find(ID_COLUMNS).ok_or_else(|| {
                crate::error::usage(format!(
                    "{name}:1: no learner id column; name one of: {}, or choose it with \
                     --id-column HEADER",
                    ID_COLUMNS.join(", ")
                ))
            })?,
        };
        let login_col = match &columns.login_column {
            Some(c) => Some(named("--login-column", c)?),
            None => find(LOGIN_COLUMNS),
        };
        let folder_col = find(FOLDER_COLUMNS);
        let alias_cols: Vec<usize> = (0..lower.len())
            .filter(|&c| {
                c != id_col && (ID_COLUMNS.contains(&lower[c].as_str()) || Some(c) == login_col)
            })
            .collect();
        let mut learners = Vec::new();
        let mut seen = HashSet::new();
        for (n, row) in rows {
            if row.iter().all(|f| f.trim().is_empty()) {
                continue;
            }
            let id = row.get(id_col).map(|s| s.trim()).unwrap_or_default();
            if id.is_empty() {
                anyhow::bail!(
                    "{name}:{}: no learner id in column {:?}",
                    n + 1,
                    header[id_col]
                );
            }
            if !seen.insert(super::token::normalise_id(id)) {
                anyhow::bail!("{name}:{}: learner {id:?} is listed twice", n + 1);
            }
            let folder = folder_col
                .and_then(|c| row.get(c))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
            let field = |c: usize| {
                row.get(c)
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            let aliases = alias_cols.iter().filter_map(|&c| field(c)).collect();
            learners.push(Learner {
                id: id.to_string(),
                folder,
                aliases,
                login: login_col.and_then(field),
            });
        }
        Ok(Roster { learners })
    }

    /// The learner whose submission folder is `folder`: the folder column
    /// when the roster has one, else the id itself (case-insensitive).
    pub fn by_folder(&self, folder: &str) -> Option<&Learner> {
        let norm = super::token::normalise_id(folder);
        self.learners.iter().find(|l| match &l.folder {
            Some(f) => f == folder,
            None => super::token::normalise_id(&l.id) == norm,
        })
    }

    /// The learner with id `id`, compared as the course compares ids.
    pub fn by_id(&self, id: &str) -> Option<&Learner> {
        let norm = super::token::normalise_id(id);
        self.learners
            .iter()
            .find(|l| super::token::normalise_id(&l.id) == norm)
    }
}

impl Roster {
    /// The learner `name` names in any id column (id, email, login, ...):
    /// the id first, so an alias never hides another learner's id.
    pub fn by_any(&self, name: &str) -> Option<&Learner> {
        self.by_id(name)
            .or_else(|| self.learners.iter().find(|l| l.is(name)))
    }

    /// Which learner id each login is (`course install` records it): an
    /// error when the roster has no login column, or two rows share one.
    pub fn logins(&self, name: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        let mut map = std::collections::BTreeMap::new();
        for l in &self.learners {
            let Some(login) = &l.login else {
                return Err(crate::error::usage(format!(
                    "{name}: learner {:?} has no login: a course server knows learners by their \
                     account, so the roster needs a login column (headed login or username, or \
                     named with --login-column HEADER)",
                    l.id
                )));
            };
            if let Some(other) = map.insert(login.clone(), l.id.clone()) {
                return Err(crate::error::usage(format!(
                    "{name}: login {login:?} is both learner {other:?} and {:?}",
                    l.id
                )));
            }
        }
        Ok(map)
    }
}

/// RFC 4180 fields: commas, double quotes with "" inside, CRLF or LF.
pub fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text); // Excel's BOM
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// A CSV field, quoted when it needs to be.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lms_exports_with_quotes_and_a_folder_column() {
        let text = "\u{feff}Name,Email,Folder\r\n\"Lovelace, Ada\",ADA@example.org,sub-1\r\n\
                    \"Bob \"\"B\"\"\",bob@example.org,\r\n\r\n";
        let r = Roster::parse("r.csv", text, &Columns::default()).unwrap();
        assert_eq!(r.learners.len(), 2);
        assert_eq!(r.learners[0].id, "ADA@example.org");
        assert_eq!(r.learners[0].folder.as_deref(), Some("sub-1"));
        assert_eq!(r.learners[1].folder, None);
        assert_eq!(r.by_folder("sub-1").unwrap().id, "ADA@example.org");
        assert_eq!(
            r.by_folder("BOB@example.org").unwrap().id,
            "bob@example.org"
        );
        assert!(
            r.by_folder("ada@example.org").is_none(),
            "Ada's folder is sub-1"
        );
        assert_eq!(r.by_id("ada@example.org").unwrap().id, "ADA@example.org");
    }

    #[test]
    fn other_id_columns_are_aliases() {
        let r = Roster::parse(
            "r.csv",
            "id,Email,name
1234,ada@example.org,Ada
55,,Bob
",
            &Columns::default(),
        )
        .unwrap();
        assert_eq!(r.learners[0].aliases, ["ada@example.org"]);
        assert_eq!(r.by_any("ADA@example.org").unwrap().id, "1234");
        assert_eq!(r.by_any("1234").unwrap().id, "1234");
        assert!(r.by_any("Ada").is_none(), "a name is not an id");
        assert!(r.learners[1].aliases.is_empty());
    }

    #[test]
    fn says_what_is_wrong() {
        let e = Roster::parse("r.csv", "name,age\nx,1\n", &Columns::default()).unwrap_err();
        assert!(
            e.to_string().contains("r.csv:1: no learner id column"),
            "{e}"
        );
        let e = Roster::parse("r.csv", "id\na\nA\n", &Columns::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("r.csv:3: learner \"A\" is listed twice"),
            "{e}"
        );
        let e = Roster::parse("r.csv", "", &Columns::default()).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn an_lms_export_names_its_columns() {
        let text = "student_id,name,email,login\n1001,Ada,ada@x.org,ada\n1002,Bob,bob@x.org,bob\n";
        let r = Roster::parse("r.csv", text, &Columns::default()).unwrap();
        assert_eq!(r.learners[0].id, "1001");
        assert_eq!(r.learners[0].login.as_deref(), Some("ada"));
        assert_eq!(r.by_any("bob").unwrap().id, "1002");
        assert_eq!(r.logins("r.csv").unwrap()["ada"], "1001");
        // The file's order decides: email first is the id.
        let r = Roster::parse("r.csv", "email,id\na@x,7\n", &Columns::default()).unwrap();
        assert_eq!(r.learners[0].id, "a@x");
        // Chosen by flag, any case; a column that is not there says which are.
        let cols = Columns {
            id_column: Some("Email".into()),
            login_column: Some("name".into()),
        };
        let r = Roster::parse("r.csv", text, &cols).unwrap();
        assert_eq!(
            (r.learners[1].id.as_str(), r.learners[1].login.as_deref()),
            ("bob@x.org", Some("Bob"))
        );
        let cols = Columns {
            id_column: Some("matric".into()),
            login_column: None,
        };
        let e = Roster::parse("r.csv", text, &cols).unwrap_err();
        assert!(
            e.to_string().contains("no column \"matric\" (--id-column)"),
            "{e}"
        );
        let r = Roster::parse("r.csv", "id\n7\n", &Columns::default()).unwrap();
        assert!(
            r.logins("r.csv")
                .unwrap_err()
                .to_string()
                .contains("login column")
        );
    }

    #[test]
    fn fields_round_trip() {
        let row = ["a,b", "c\"d", "plain"];
        let line: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        assert_eq!(
            csv_rows(&line.join(",")),
            vec![row.map(String::from).to_vec()]
        );
    }
}
