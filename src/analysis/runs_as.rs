//! Who a process runs as, from its cgroup path alone (no container
//! runtime's API): a Docker, Podman, containerd or CRI-O container, a
//! Kubernetes pod's container, an LXC container, a systemd service, a
//! login session or another scope. The names each runtime and systemd give
//! their cgroups are data: one table of patterns, tried on every part of
//! the path, innermost first.

/// What the path says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunsAs {
    /// "Docker container", "Kubernetes pod", "systemd service", ...
    pub what: &'static str,
    /// The container id (12 characters, as `docker ps` shows it), the
    /// unit's name or the session's number.
    pub name: String,
    /// A Kubernetes pod's uid, when the path has one.
    pub pod: Option<String>,
}

/// How one part of a cgroup path is named: `prefix` + the name + `suffix`.
struct Pattern {
    prefix: &'static str,
    suffix: &'static str,
    what: &'static str,
    /// The name is a container id (64 hex digits).
    id: bool,
}

const fn p(prefix: &'static str, suffix: &'static str, what: &'static str, id: bool) -> Pattern {
    Pattern {
        prefix,
        suffix,
        what,
        id,
    }
}

/// Innermost match wins; within one part, the first pattern that fits.
const PATTERNS: &[Pattern] = &[
    // systemd cgroup driver: <runtime>-<id>.scope.
    p("docker-", ".scope", "Docker container", true),
    p("cri-containerd-", ".scope", "containerd container", true),
    p("crio-conmon-", ".scope", "CRI-O container monitor", true),
    p("crio-", ".scope", "CRI-O container", true),
    p("libpod-conmon-", ".scope", "Podman container monitor", true),
    p("libpod-", ".scope", "Podman container", true),
    // cgroupfs driver: the bare id, under /docker/ or a pod (below).
    p("libpod-", "", "Podman container", true),
    p("lxc.payload.", "", "LXC container", false),
    // systemd.
    p("session-", ".scope", "login session", false),
    p("user@", ".service", "user manager of UID", false),
    p("", ".service", "systemd service", false),
    p("", ".scope", "systemd scope", false),
];

/// Who runs in the cgroup at `path` (a path in its hierarchy, as
/// /proc/PID/cgroup gives it); None when it says nothing (the root, a
/// slice of its own).
pub fn runs_as(path: &str) -> Option<RunsAs> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let pod = parts.iter().find_map(|p| pod_uid(p));
    for (i, part) in parts.iter().enumerate().rev() {
        let parent = i.checked_sub(1).map(|j| parts[j]);
        // cgroupfs drivers: /docker/<id>, /kubepods/.../pod<uid>/<id>, /lxc/<name>.
        if is_id(part) {
            let what = match parent {
                Some("docker") => "Docker container",
                Some(p) if pod_uid(p).is_some() => "container",
                _ => continue,
            };
            return Some(found(what, &part[..12], pod));
        }
        if parent == Some("lxc") {
            return Some(found("LXC container", part, None));
        }
        for pat in PATTERNS {
            let Some(name) = part
                .strip_prefix(pat.prefix)
                .and_then(|r| r.strip_suffix(pat.suffix))
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            if pat.id && !is_id(name) {
                continue;
            }
            let name = if pat.id { &name[..12] } else { name };
            // In a pod, the pod says more than the runtime.
            let what = if pod.is_some() && pat.id {
                "container"
            } else {
                pat.what
            };
            return Some(found(what, name, pod.filter(|_| pat.id)));
        }
    }
    None
}

/// The container (or Kubernetes pod) whose own cgroup is `path` (its
/// innermost part is the container's: `docker-<id>.scope`, `/docker/<id>`,
/// `pod<uid>`), as `--container` lists it: "Docker container 3b6190394e67";
/// None for any other cgroup, a container's monitor or one inside a
/// container.
pub fn container_at(path: &str) -> Option<String> {
    let last = path.rsplit('/').find(|p| !p.is_empty())?;
    if let Some(uid) = pod_uid(last) {
        return Some(format!("Kubernetes pod {uid}"));
    }
    let r = runs_as(path)?;
    let own = full_id(last).is_some_and(|id| id.starts_with(&r.name))
        || (r.what == "LXC container" && last.ends_with(&r.name));
    (own && r.what.ends_with("container")).then(|| format!("{} {}", r.what, r.name))
}

/// Whether `name` names the container or pod whose own cgroup is `path`
/// (`container_at`), as the path shows it: its id's first 12 characters
/// (`docker ps`), a longer prefix of its id or the whole id, an LXC
/// container's name, a pod's uid.
pub fn names_container(path: &str, name: &str) -> bool {
    let Some(last) = path.rsplit('/').find(|p| !p.is_empty()) else {
        return false;
    };
    if container_at(path).is_none() || name.is_empty() {
        return false;
    }
    if let Some(uid) = pod_uid(last) {
        return uid == name.replace('_', "-");
    }
    match full_id(last) {
        Some(id) => name.len() >= 12 && id.starts_with(name),
        None => runs_as(path).is_some_and(|r| r.name == name),
    }
}

/// The 64 hex digits of a container id in one part of a path, bare or in
/// a runtime's `<prefix><id><suffix>`.
fn full_id(part: &str) -> Option<&str> {
    if is_id(part) {
        return Some(part);
    }
    PATTERNS.iter().filter(|p| p.id).find_map(|p| {
        part.strip_prefix(p.prefix)
            .and_then(|r| r.strip_suffix(p.suffix))
            .filter(|n| is_id(n))
    })
}

fn found(what: &'static str, name: &str, pod: Option<String>) -> RunsAs {
    RunsAs {
        what,
        name: name.to_string(),
        pod,
    }
}

fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod's uid from "pod<uid>" (cgroupfs) or "kubepods-burstable-pod<uid
/// with _ for ->.slice" (systemd).
fn pod_uid(part: &str) -> Option<String> {
    let p = part.strip_suffix(".slice").unwrap_or(part);
    let uid = p
        .rsplit_once("-pod")
        .map_or_else(|| p.strip_prefix("pod"), |(_, u)| Some(u))?;
    (uid.len() >= 32
        && uid
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_'))
    .then(|| uid.replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3b6190394e67de965155417a11013ebc3b6190394e67de965155417a11013ebc";

    fn text(path: &str) -> Option<String> {
        // As `render::verdict` words it.
        runs_as(path).map(|r| match r.pod {
            Some(pod) => format!("{} in Kubernetes pod {pod}: {}", r.what, r.name),
            None => format!("{} {}", r.what, r.name),
        })
    }

    #[test]
    fn containers_by_runtime_and_driver() {
        let cases = [
            (format!("/docker/{ID}"), "Docker container 3b6190394e67"),
            (
                format!("/system.slice/docker-{ID}.scope"),
                "Docker container 3b6190394e67",
            ),
            (
                format!("/system.slice/cri-containerd-{ID}.scope"),
                "containerd container 3b6190394e67",
            ),
            (
                format!("/machine.slice/libpod-{ID}.scope/container"),
                "Podman container 3b6190394e67",
            ),
            (
                format!(
                    "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope"
                ),
                "Podman container 3b6190394e67",
            ),
            (
                format!("/machine.slice/crio-{ID}.scope"),
                "CRI-O container 3b6190394e67",
            ),
            ("/lxc/web1".to_string(), "LXC container web1"),
            ("/lxc.payload.web1".to_string(), "LXC container web1"),
        ];
        for (path, want) in cases {
            assert_eq!(text(&path).as_deref(), Some(want), "{path}");
        }
    }

    #[test]
    fn kubernetes_pods_with_either_driver() {
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7b1f2c3d_4e5f_6789_abcd_ef0123456789.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(
            text(&systemd).as_deref(),
            Some("container in Kubernetes pod 7b1f2c3d-4e5f-6789-abcd-ef0123456789: 3b6190394e67")
        );
        let crio = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod7b1f2c3d_4e5f_6789_abcd_ef0123456789.slice/crio-{ID}.scope"
        );
        assert!(
            text(&crio)
                .unwrap()
                .starts_with("container in Kubernetes pod 7b1f2c3d")
        );
        let cgroupfs = format!("/kubepods/burstable/pod7b1f2c3d-4e5f-6789-abcd-ef0123456789/{ID}");
        assert_eq!(
            text(&cgroupfs).as_deref(),
            Some("container in Kubernetes pod 7b1f2c3d-4e5f-6789-abcd-ef0123456789: 3b6190394e67")
        );
    }

    #[test]
    fn systemd_units_and_sessions() {
        assert_eq!(
            text("/system.slice/nginx.service").as_deref(),
            Some("systemd service nginx")
        );
        assert_eq!(
            text("/user.slice/user-1000.slice/session-3.scope").as_deref(),
            Some("login session 3")
        );
        assert_eq!(
            text("/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-1234.scope")
                .as_deref(),
            Some("systemd scope app-firefox-1234")
        );
        assert_eq!(
            text("/system.slice/postgresql@15-main.service").as_deref(),
            Some("systemd service postgresql@15-main")
        );
        assert_eq!(text("/"), None);
        assert_eq!(text("/user.slice"), None);
        assert_eq!(text("/kdiag-4242-0"), None);
        // A bare id outside a runtime's folder is nobody's.
        assert_eq!(text(&format!("/{ID}")), None);
    }

    #[test]
    fn containers_by_name_where_their_own_cgroup_is() {
        let docker = format!("/system.slice/docker-{ID}.scope");
        assert_eq!(
            container_at(&docker).as_deref(),
            Some("Docker container 3b6190394e67")
        );
        for name in ["3b6190394e67", &ID[..20], ID] {
            assert!(names_container(&docker, name), "{name}");
        }
        // Too short a prefix, another id, a unit's name.
        for name in ["3b61", "3b6190394e68", "docker", ""] {
            assert!(!names_container(&docker, name), "{name}");
        }
        // Inside the container, or its monitor: not the container's own.
        assert_eq!(container_at(&format!("{docker}/init")), None);
        assert_eq!(
            container_at(&format!("/machine.slice/libpod-conmon-{ID}.scope")),
            None
        );
        assert!(names_container(&format!("/docker/{ID}"), "3b6190394e67"));
        assert!(names_container("/lxc/web1", "web1"));
        assert!(names_container("/lxc.payload.web1", "web1"));
        assert_eq!(container_at("/system.slice/nginx.service"), None);
        assert!(!names_container("/system.slice/nginx.service", "nginx"));
        let pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7b1f2c3d_4e5f_6789_abcd_ef0123456789.slice";
        assert_eq!(
            container_at(pod).as_deref(),
            Some("Kubernetes pod 7b1f2c3d-4e5f-6789-abcd-ef0123456789")
        );
        assert!(names_container(pod, "7b1f2c3d-4e5f-6789-abcd-ef0123456789"));
        assert!(names_container(
            &format!("{pod}/cri-containerd-{ID}.scope"),
            "3b6190394e67"
        ));
    }
}
