//! Who a submission is graded as, decided in one place. The submission's
//! manifest names its learner (`kdiag lab submit` writes it); the platform
//! that collected it says who handed it in (Gradescope's
//! `submission_metadata.json` beside the upload, a class folder's entry
//! name, `--learner`); the roster, when given, must know the learner and
//! says which of its columns (id, email, login) are the same person. The
//! two must agree, or the submission is not gradable: a learner who hands
//! in a friend's bundle is refused, not graded as the friend.

use crate::course::roster::{Learner, Roster};
use crate::course::token::normalise_id;

/// Gradescope writes this beside the submission folder.
pub const GRADESCOPE_METADATA: &str = "submission_metadata.json";

/// One platform's word on who handed a submission in.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Where it comes from, for messages ("submission_metadata.json").
    pub source: String,
    /// The names it gives: an email and a student id, or an entry's name
    /// and the learner part of `lab submit`'s file name.
    pub names: Vec<String>,
    /// Names that are file names: they compare as `lab submit` writes an
    /// id into a file name, and the roster's folder column maps them.
    pub file_name: bool,
}

impl Claim {
    /// A class folder's entry `name` (without `.tar`) for lab `lab`.
    pub fn entry(lab: &str, name: &str) -> Claim {
        let mut names = vec![name.to_string()];
        if let Some(id) = name.strip_prefix(&format!("kdiag-{lab}-")) {
            names.push(id.to_string());
        }
        Claim {
            source: format!("the submission's name {name:?}"),
            names,
            file_name: true,
        }
    }

    /// Whether this claim names the learner known by `ids` (id and
    /// aliases) whose submission folder the roster names `folder`: a file
    /// name is that folder when the roster names one.
    fn fits(&self, ids: &[&str], folder: Option<&str>) -> bool {
        if let (true, Some(f)) = (self.file_name, folder) {
            return self.names[0] == f;
        }
        self.names.iter().any(|n| {
            ids.iter().any(|id| {
                normalise_id(id) == normalise_id(n) || (self.file_name && same_file_name(id, n))
            })
        })
    }
}

/// `id` as `lab submit` puts it in a file name: every character but ASCII
/// letters, digits, `-` and `_` as `_`.
pub fn safe_name(id: &str) -> String {
    id.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn same_file_name(id: &str, name: &str) -> bool {
    safe_name(id).eq_ignore_ascii_case(&safe_name(name))
}

/// The learner a submission is graded as: the one its manifest names
/// (`manifest`), who must be in the roster and fit every platform claim;
/// without a manifest (answers handed in as a plain file), the first
/// claim's learner. The learner's roster id when there is a roster (their
/// seed is derived from it).
pub fn resolve(
    manifest: Option<&str>,
    claims: &[Claim],
    roster: Option<&Roster>,
) -> Result<String, String> {
    let Some(named) = manifest else {
        return from_claim(claims, roster);
    };
    let (id, ids, folder): (String, Vec<&str>, Option<&str>) = match roster {
        Some(r) => {
            let l = r.by_any(named).ok_or_else(|| {
                format!(
                    "the submission's manifest names learner {named:?}, who is not in the roster \
                     (matched on every id column: id, email, login, ...)"
                )
            })?;
            (l.id.clone(), ids_of(l), l.folder.as_deref())
        }
        None => (named.to_string(), vec![named], None),
    };
    if let Some(c) = claims.iter().find(|c| !c.fits(&ids, folder)) {
        return Err(format!(
            "the submission's manifest names learner {named:?}, but {} says it was handed in by {}: \
             a submission is graded only as the learner who made it",
            c.source,
            c.names.join(" / ")
        ));
    }
    Ok(id)
}

fn ids_of(l: &Learner) -> Vec<&str> {
    std::iter::once(l.id.as_str())
        .chain(l.aliases.iter().map(String::as_str))
        .collect()
}

fn from_claim(claims: &[Claim], roster: Option<&Roster>) -> Result<String, String> {
    let Some(claim) = claims.first() else {
        return Err(
            "the submission has no manifest.toml naming its learner: hand in what kdiag lab \
             submit writes, or name the learner with --learner"
                .into(),
        );
    };
    let Some(r) = roster else {
        return Ok(claim.names[0].clone());
    };
    let found = r
        .learners
        .iter()
        .find(|l| claim.fits(&ids_of(l), l.folder.as_deref()));
    match found {
        Some(l)
            if claims
                .iter()
                .all(|c| c.fits(&ids_of(l), l.folder.as_deref())) =>
        {
            Ok(l.id.clone())
        }
        Some(l) => Err(format!(
            "{} says learner {}, which other names of the submission contradict",
            claim.source, l.id
        )),
        None => Err(format!(
            "{} ({}) is not a learner or folder of the roster",
            claim.source,
            claim.names.join(" / ")
        )),
    }
}

/// Gradescope's `submission_metadata.json`: every submitter's email and
/// student id (`sid`). Its parse error when it is not the JSON Gradescope
/// writes.
pub fn gradescope_claim(source: &str, metadata: &str) -> Result<Claim, String> {
    let v: serde_json::Value =
        serde_json::from_str(metadata).map_err(|e| format!("{source}: not JSON: {e}"))?;
    let users = v
        .get("users")
        .and_then(|u| u.as_array())
        .ok_or_else(|| format!("{source}: no \"users\" list"))?;
    let field = |user: &serde_json::Value, k: &str| {
        user.get(k)
            .and_then(|x| match x {
                serde_json::Value::String(s) => Some(s.trim().to_string()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
    };
    let names: Vec<String> = users
        .iter()
        .flat_map(|u| ["email", "sid"].map(|k| field(u, k)))
        .flatten()
        .collect();
    if names.is_empty() {
        return Err(format!(
            "{source}: its \"users\" name no submitter (no email or sid)"
        ));
    }
    Ok(Claim {
        source: source.to_string(),
        names,
        file_name: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roster() -> Roster {
        Roster::parse(
            "r.csv",
            "id,email,folder\n1234,ada@example.org,\n77,bob@example.org,sub-b\n",
            &Default::default(),
        )
        .unwrap()
    }

    fn claim(names: &[&str]) -> Claim {
        Claim {
            source: "submission_metadata.json".into(),
            names: names.iter().map(|s| s.to_string()).collect(),
            file_name: false,
        }
    }

    #[test]
    fn the_manifest_names_the_learner_and_the_platform_must_agree() {
        let r = roster();
        // Roster keyed by id, the platform knows the email: the same learner.
        let ok = resolve(Some("1234"), &[claim(&["Ada@Example.org"])], Some(&r));
        assert_eq!(ok.as_deref(), Ok("1234"));
        let ok = resolve(Some("ada@example.org"), &[claim(&["1234"])], Some(&r));
        assert_eq!(ok.as_deref(), Ok("1234"), "graded by the roster's id");
        // A borrowed bundle: Bob hands in Ada's.
        let e = resolve(Some("1234"), &[claim(&["bob@example.org"])], Some(&r)).unwrap_err();
        assert!(e.contains("handed in by bob@example.org"), "{e}");
        let e = resolve(Some("zed"), &[], Some(&r)).unwrap_err();
        assert!(e.contains("not in the roster"), "{e}");
        // Without a roster the names themselves must agree.
        assert_eq!(
            resolve(Some("ada"), &[claim(&["ADA"])], None).as_deref(),
            Ok("ada")
        );
        assert!(resolve(Some("ada"), &[claim(&["bob"])], None).is_err());
    }

    #[test]
    fn a_class_folder_s_names_agree_as_lab_submit_writes_them() {
        let r = roster();
        let entry = Claim::entry("0-demo", "kdiag-0-demo-ada_example_org");
        assert_eq!(
            resolve(Some("ada@example.org"), std::slice::from_ref(&entry), None).as_deref(),
            Ok("ada@example.org")
        );
        assert_eq!(
            resolve(Some("1234"), std::slice::from_ref(&entry), Some(&r)).as_deref(),
            Ok("1234")
        );
        let folder = Claim::entry("0-demo", "sub-b");
        assert_eq!(
            resolve(Some("77"), std::slice::from_ref(&folder), Some(&r)).as_deref(),
            Ok("77")
        );
        assert!(resolve(Some("1234"), std::slice::from_ref(&folder), Some(&r)).is_err());
        // No manifest: the entry's name (or the roster's mapping of it).
        assert_eq!(resolve(None, &[folder], Some(&r)).as_deref(), Ok("77"));
        assert_eq!(
            resolve(None, &[Claim::entry("0-demo", "cy")], None).as_deref(),
            Ok("cy")
        );
        let e = resolve(None, &[Claim::entry("0-demo", "cy")], Some(&r)).unwrap_err();
        assert!(e.contains("not a learner or folder of the roster"), "{e}");
        let e = resolve(None, &[], None).unwrap_err();
        assert!(e.contains("no manifest.toml"), "{e}");
    }

    #[test]
    fn gradescope_metadata_gives_every_submitter_or_its_parse_error() {
        let m = r#"{"users": [{"email": "ada@x.org", "sid": 123, "name": "Ada"}, {"email": "b@x.org"}]}"#;
        let c = gradescope_claim("m.json", m).unwrap();
        assert_eq!(c.names, ["ada@x.org", "123", "b@x.org"]);
        let e = gradescope_claim("m.json", "{\"users\": [").unwrap_err();
        assert!(e.starts_with("m.json: not JSON: EOF while parsing"), "{e}");
        let e = gradescope_claim("m.json", "{}").unwrap_err();
        assert!(e.contains("no \"users\""), "{e}");
        let e = gradescope_claim("m.json", r#"{"users": [{"name": "x"}]}"#).unwrap_err();
        assert!(e.contains("no submitter"), "{e}");
    }
}
