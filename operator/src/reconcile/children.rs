//! The one place where a reconciler makes, finds and removes the objects it owns, in the spirit of stackable
//! operator-rs's `ClusterResources`: every child goes through here, so the rules hold for every kind alike.
//!
//! - A child is made under the operator's field manager, and changed (server-side apply) or deleted only while
//!   the owner *controls* it (a controller owner reference with the owner's uid). A namesake someone else made —
//!   a user's, or an earlier namesake owner's still terminating — is refused ([`ChildError::NotOwned`]), never
//!   taken over.
//! - A deletion hits only the very object that was read (a uid precondition), so a namesake made since is never
//!   hit; one that is gone or replaced meanwhile counts as removed.
//! - The builders put the labels and the owner reference on each object; this module never edits them.
//!
//! Three ways of making a child, as each kind needs: [`Children::apply`] (read, then create or update: the
//! profile and plan ConfigMaps), [`Children::ensure`] (read, then create only where absent: the standalone
//! stack), [`Children::create`] (create, and read only when it exists: pods and runs, made once and never
//! changed). A shared object no owner controls (the workload claim) is [`Children::reuse_or_create`]d.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{is_already_exists, is_not_found};
use crate::builders::FIELD_MANAGER;
use crate::builders::names::controlled_by;

/// What a child's kind must be for the manager to handle it.
pub(crate) trait Child:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
{
}

impl<K> Child for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
{
}

/// Why a child could not be made or found. The reconcilers turn it into their own error, which names the object.
#[derive(Debug)]
pub(crate) enum ChildError {
    /// The API server refused or failed.
    Api(kube::Error),
    /// An object of that name exists and the owner does not control it.
    NotOwned,
}

impl From<kube::Error> for ChildError {
    fn from(e: kube::Error) -> Self {
        ChildError::Api(e)
    }
}

/// What [`Children::ensure`] found.
pub(crate) enum Ensured<K> {
    /// The owner's child was there already.
    Existing(K),
    /// Made now; the object as the API server returned it.
    Created(K),
}

/// What a removal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    Deleted,
    /// Gone, or replaced by a namesake, before the delete arrived (the precondition failed).
    AlreadyGone,
    /// Already being deleted: nothing to ask.
    AlreadyGoing,
    /// No object of that name.
    Absent,
    /// Not the owner's: left alone.
    NotOwned,
}

/// The children of one owner in its namespace.
pub(crate) struct Children {
    client: Client,
    namespace: String,
    owner_uid: String,
}

impl Children {
    pub(crate) fn new(client: Client, namespace: &str, owner_uid: &str) -> Self {
        Children {
            client,
            namespace: namespace.to_owned(),
            owner_uid: owner_uid.to_owned(),
        }
    }

    fn api<K: Child>(&self) -> Api<K> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Whether the owner controls the object of `meta`.
    pub(crate) fn controls(&self, meta: &ObjectMeta) -> bool {
        controlled_by(meta, &self.owner_uid)
    }

    /// The object `name` of kind `K`, whoever made it.
    pub(crate) async fn get<K: Child>(&self, name: &str) -> Result<Option<K>, kube::Error> {
        self.api::<K>().get_opt(name).await
    }

    /// The objects of kind `K` with the labels of `selector`, whoever made them.
    pub(crate) async fn list<K: Child>(&self, selector: &str) -> Result<Vec<K>, kube::Error> {
        Ok(self
            .api::<K>()
            .list(&ListParams::default().labels(selector))
            .await?
            .items)
    }

    /// Makes `desired` where absent, or server-side applies it over the owner's own child (its desired state may
    /// have changed since). A create fails if someone made one in between; the next pass then looks at whose it is.
    pub(crate) async fn apply<K: Child>(&self, desired: &K) -> Result<(), ChildError> {
        let api = self.api::<K>();
        let name = name_of(desired);
        match api.get_opt(&name).await? {
            Some(found) if !self.controls(found.meta()) => Err(ChildError::NotOwned),
            Some(_) => {
                api.patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(desired),
                )
                .await?;
                Ok(())
            }
            None => {
                api.create(&post_params(), desired).await?;
                Ok(())
            }
        }
    }

    /// Makes `desired` where absent; the owner's existing child is taken as it is.
    pub(crate) async fn ensure<K: Child>(&self, desired: &K) -> Result<Ensured<K>, ChildError> {
        let api = self.api::<K>();
        match api.get_opt(&name_of(desired)).await? {
            Some(found) if !self.controls(found.meta()) => Err(ChildError::NotOwned),
            Some(found) => Ok(Ensured::Existing(found)),
            None => Ok(Ensured::Created(api.create(&post_params(), desired).await?)),
        }
    }

    /// Creates `desired`: `Ok(true)` when made now, `Ok(false)` when the owner already has it. For children made
    /// once and never changed, whose create usually succeeds: the object is read only when it already exists.
    pub(crate) async fn create<K: Child>(&self, desired: &K) -> Result<bool, ChildError> {
        let api = self.api::<K>();
        match api.create(&post_params(), desired).await {
            Ok(_) => Ok(true),
            Err(e) if is_already_exists(&e) => match api.get_opt(&name_of(desired)).await? {
                Some(found) if self.controls(found.meta()) => Ok(false),
                Some(_) => Err(ChildError::NotOwned),
                // Gone in between: the next pass creates it.
                None => Err(ChildError::Api(e)),
            },
            Err(e) => Err(ChildError::Api(e)),
        }
    }

    /// A shared object no owner controls: the existing one as it is, whoever made it, else `desired` made now.
    /// It is never changed or deleted.
    pub(crate) async fn reuse_or_create<K: Child>(&self, desired: &K) -> Result<K, kube::Error> {
        let api = self.api::<K>();
        let name = name_of(desired);
        if let Some(existing) = api.get_opt(&name).await? {
            return Ok(existing);
        }
        match api.create(&post_params(), desired).await {
            Ok(created) => Ok(created),
            Err(e) if is_already_exists(&e) => {
                Ok(api.get_opt(&name).await?.unwrap_or_else(|| desired.clone()))
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes `found`, as read, if the owner controls it. `params` sets the propagation; the uid precondition
    /// is added here.
    pub(crate) async fn delete<K: Child>(
        &self,
        found: &K,
        params: DeleteParams,
    ) -> Result<Removal, kube::Error> {
        if !self.controls(found.meta()) {
            return Ok(Removal::NotOwned);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: found.meta().uid.clone(),
                resource_version: None,
            }),
            ..params
        };
        match self.api::<K>().delete(&name_of(found), &params).await {
            Ok(_) => Ok(Removal::Deleted),
            Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(Removal::AlreadyGone),
            Err(e) => Err(e),
        }
    }

    /// Reads the object `name` of kind `K` and deletes it if the owner controls it and it is not already going.
    pub(crate) async fn delete_named<K: Child>(
        &self,
        name: &str,
        params: DeleteParams,
    ) -> Result<Removal, kube::Error> {
        match self.api::<K>().get_opt(name).await? {
            None => Ok(Removal::Absent),
            Some(found) if !self.controls(found.meta()) => Ok(Removal::NotOwned),
            Some(found) if found.meta().deletion_timestamp.is_some() => Ok(Removal::AlreadyGoing),
            Some(found) => self.delete(&found, params).await,
        }
    }
}

fn name_of<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Whether `e` is the API's 409 Conflict: here, a uid precondition that no longer holds.
fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_conflict())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;
    use crate::reconcile::fixtures::{ApiServer, scripted};

    const CM_PATH: &str = "/api/v1/namespaces/team-a/configmaps";

    /// ConfigMap `plan` controlled by the owner with `owner_uid`, with `metadata` added.
    fn config_map(owner_uid: &str, metadata: serde_json::Value) -> serde_json::Value {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "plan", "namespace": "team-a", "uid": "cm-uid",
                "ownerReferences": [{"apiVersion": "llmbench.dev/v1alpha1", "kind": "BenchmarkRun",
                    "name": "bench-1", "uid": owner_uid, "controller": true}]}});
        for (key, value) in metadata.as_object().into_iter().flatten() {
            cm["metadata"][key] = value.clone();
        }
        cm
    }

    #[tokio::test]
    async fn a_namesake_the_owner_does_not_control_is_refused_and_never_written() {
        let desired: ConfigMap =
            serde_json::from_value(config_map("owner", json!({}))).expect("a ConfigMap");
        let result = scripted(
            |mut api: ApiServer| async move {
                api.expect("GET", &format!("{CM_PATH}/plan"))
                    .await
                    .ok(&config_map("someone-else", json!({})));
                api
            },
            |ctx| async move {
                let children = Children::new(ctx.client.clone(), "team-a", "owner");
                children.apply(&desired).await
            },
        )
        .await;
        assert!(matches!(result, Err(ChildError::NotOwned)), "{result:?}");
    }

    #[tokio::test]
    async fn a_child_already_being_deleted_is_not_deleted_again_and_a_live_one_only_as_read() {
        let removals = scripted(
            |mut api: ApiServer| async move {
                api.expect("GET", &format!("{CM_PATH}/plan"))
                    .await
                    .ok(&config_map(
                        "owner",
                        json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
                    ));
                api.expect("GET", &format!("{CM_PATH}/plan"))
                    .await
                    .ok(&config_map("owner", json!({})));
                let delete = api.expect("DELETE", &format!("{CM_PATH}/plan")).await;
                assert_eq!(delete.body["preconditions"]["uid"], "cm-uid");
                delete.ok(&config_map("owner", json!({})));
                api
            },
            |ctx| async move {
                let children = Children::new(ctx.client.clone(), "team-a", "owner");
                let mut removals = Vec::new();
                for _ in 0..2 {
                    removals.push(
                        children
                            .delete_named::<ConfigMap>("plan", DeleteParams::default())
                            .await
                            .expect("answered"),
                    );
                }
                removals
            },
        )
        .await;
        assert_eq!(removals, [Removal::AlreadyGoing, Removal::Deleted]);
    }
}
