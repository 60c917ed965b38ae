//! The security settings of every pod llmbench starts from its image (launchers, the merge pod, the results reader):
//! the restricted Pod Security Standard, as the image's non-root user. One definition, so the operator's pods and
//! `llmbench results fetch`'s reader cannot drift apart.

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext,
};

/// The image's non-root user and group (`USER 65532:65532` in the Dockerfile, `nonroot` in image/build.sh).
pub const IMAGE_UID: i64 = 65532;

/// The pod's: non-root as [`IMAGE_UID`], the runtime's default seccomp profile. Callers that write to a volume add
/// `fs_group`; a reader leaves it out, so the kubelet does not chown a whole claim to mount it.
pub fn restricted_pod() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(IMAGE_UID),
        run_as_group: Some(IMAGE_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// The container's: no privilege escalation, a read-only root filesystem, every capability dropped.
pub fn restricted_container() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}
