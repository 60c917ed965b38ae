//! A test kubelet: the part of a node the operator's end-to-end tests need, and nothing more.
//!
//! The control plane has no nodes, so nothing would ever run a launcher pod. This kubelet watches the pods that
//! match a label selector, binds each to its node name, materialises the pod's volumes as local directories
//! (ConfigMap keys as files; a PVC as one directory per claim that outlives the pods, as a real volume does;
//! emptyDir as a fresh directory), runs the container's command with its args and env (mount paths mapped to those
//! directories, the binary mapped to a local build), and writes the status back the way a kubelet does: `Running`,
//! then `Succeeded` or `Failed` with the exit code and the termination message — falling back to the log tail when
//! the container asked for `FallbackToLogsOnError`. A pod deleted while it runs is killed and then removed with a
//! zero grace period, which is the kubelet's half of graceful deletion.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Where the kernel would read a container's termination message by default.
const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";
/// The kubelet's cap on a termination message, and on the log tail it falls back to.
const TERMINATION_MESSAGE_MAX_BYTES: usize = 4096;
const FALLBACK_LOG_LINES: usize = 80;
const FALLBACK_LOG_MAX_BYTES: usize = 2048;
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Why the test kubelet could not run a pod. Recorded as the pod's failure and in [`TestKubelet::errors`].
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("pod {pod}: {what}: {source}")]
    Api {
        pod: String,
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("pod {pod}: {path}: {source}")]
    Io {
        pod: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("pod {pod}: {problem}")]
    Unsupported { pod: String, problem: String },
}

/// What the kubelet runs and where it keeps its files.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// The node pods are bound to.
    pub node_name: String,
    /// Pods, volumes and logs live under this directory.
    pub root: PathBuf,
    /// Only pods matching this label selector are run.
    pub label_selector: String,
    /// A container command's first word mapped to a local executable, e.g. `llmbench` → the built binary. Commands
    /// not in the map are looked up on `PATH`.
    pub binaries: BTreeMap<String, PathBuf>,
}

/// A running test kubelet; dropping it stops the loop and kills the pods it runs.
pub struct TestKubelet {
    task: JoinHandle<()>,
    root: PathBuf,
    errors: Arc<Mutex<Vec<String>>>,
}

impl TestKubelet {
    /// Start watching pods through `client` (which needs pods, pods/status, pods/binding, configmaps and secrets).
    pub fn start(client: Client, config: KubeletConfig) -> Self {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let root = config.root.clone();
        let mut node = Node {
            client,
            config,
            running: HashMap::new(),
            finished: HashMap::new(),
            errors: Arc::clone(&errors),
        };
        let task = tokio::spawn(async move {
            loop {
                node.sync_once().await;
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        });
        Self { task, root, errors }
    }

    /// The directory that holds PVC `claim` of `namespace`: what a launcher wrote to its workload volume.
    pub fn pvc_dir(&self, namespace: &str, claim: &str) -> PathBuf {
        pvc_dir(&self.root, namespace, claim)
    }

    /// The combined stdout and stderr of pod `name`.
    pub fn log_path(&self, namespace: &str, name: &str) -> PathBuf {
        pod_dir(&self.root, namespace, name).join("log")
    }

    /// Everything that went wrong inside the kubelet so far, for a failing test's message.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl Drop for TestKubelet {
    fn drop(&mut self) {
        // Aborting drops the loop's state, and with it every child (spawned with kill_on_drop).
        self.task.abort();
    }
}

struct RunningPod {
    child: Child,
    started_at: String,
    termination_file: PathBuf,
    log_file: PathBuf,
    fallback_to_logs: bool,
}

struct Node {
    client: Client,
    config: KubeletConfig,
    /// Keyed by pod uid, so a pod re-created under the same name is a new pod.
    running: HashMap<String, RunningPod>,
    /// Pods already run to completion (uid → namespace/name), never started twice.
    finished: HashMap<String, String>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Node {
    async fn sync_once(&mut self) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let list = match pods
            .list(&ListParams::default().labels(&self.config.label_selector))
            .await
        {
            Ok(list) => list,
            Err(e) => {
                self.record(format!("listing pods: {e}"));
                return;
            }
        };
        for pod in list.items {
            let Some(uid) = pod.uid() else { continue };
            // A scheduler binds no pod that still has scheduling gates (Kueue's admission gate, for one).
            let gated = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|gates| !gates.is_empty());
            if gated {
                continue;
            }
            if let Err(e) = self.sync_pod(&uid, &pod).await {
                self.record(e.to_string());
                if let Some(mut running) = self.running.remove(&uid) {
                    let _ = running.child.start_kill();
                }
                self.finished.insert(uid.clone(), pod.name_any());
                let _ = self.report_failure(&pod, &e.to_string()).await;
            }
        }
    }

    fn record(&self, message: String) {
        tracing::warn!("test kubelet: {message}");
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(message);
        }
    }

    async fn sync_pod(&mut self, uid: &str, pod: &Pod) -> Result<(), KubeletError> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        if pod.metadata.deletion_timestamp.is_some() {
            if let Some(mut running) = self.running.remove(uid) {
                let _ = running.child.start_kill();
                let _ = running.child.wait().await;
            }
            self.finished.insert(uid.to_owned(), name.clone());
            // The kubelet's confirmation that the containers are gone: without it the pod stays Terminating.
            let zero = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            return match api.delete(&name, &zero).await {
                Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
                Err(source) => Err(KubeletError::Api {
                    pod: name,
                    what: "deleting",
                    source,
                }),
            };
        }
        if let Some(running) = self.running.get_mut(uid) {
            let status = running
                .child
                .try_wait()
                .map_err(|source| KubeletError::Io {
                    pod: name.clone(),
                    path: running.log_file.clone(),
                    source,
                })?;
            if let Some(status) = status {
                let running =
                    self.running
                        .remove(uid)
                        .ok_or_else(|| KubeletError::Unsupported {
                            pod: name.clone(),
                            problem: "lost track of its process".to_owned(),
                        })?;
                self.finished.insert(uid.to_owned(), name.clone());
                let exit_code = status.code().unwrap_or(137);
                let message = termination_message(&running, exit_code);
                self.report_terminated(&api, pod, &running.started_at, exit_code, &message)
                    .await?;
            }
            return Ok(());
        }
        if self.finished.contains_key(uid) || is_terminal(pod) {
            return Ok(());
        }
        self.start_pod(&api, pod).await
    }

    async fn start_pod(&mut self, api: &Api<Pod>, pod: &Pod) -> Result<(), KubeletError> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let uid = pod.uid().unwrap_or_default();
        let spec = pod.spec.as_ref().ok_or_else(|| KubeletError::Unsupported {
            pod: name.clone(),
            problem: "has no spec".to_owned(),
        })?;
        if spec.containers.len() != 1 {
            return Err(KubeletError::Unsupported {
                pod: name,
                problem: format!(
                    "has {} containers; the test kubelet runs exactly one",
                    spec.containers.len()
                ),
            });
        }
        let container = &spec.containers[0];
        if spec.node_name.is_none() {
            self.bind(api, &name).await?;
        }

        let dir = pod_dir(&self.config.root, &namespace, &name);
        let io = |path: &Path| {
            let path = path.to_owned();
            let pod = name.clone();
            move |source| KubeletError::Io { pod, path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mounts = self.materialise_volumes(pod, container, &dir).await?;
        let termination_path = container
            .termination_message_path
            .clone()
            .unwrap_or_else(|| DEFAULT_TERMINATION_MESSAGE_PATH.to_owned());
        let termination_file = dir.join("termination-log");
        std::fs::write(&termination_file, b"").map_err(io(&termination_file))?;
        let mut paths = mounts;
        paths.push((termination_path, termination_file.clone()));

        let mut argv: Vec<String> = container.command.clone().unwrap_or_default();
        argv.extend(container.args.clone().unwrap_or_default());
        let Some((program, args)) = argv.split_first() else {
            return Err(KubeletError::Unsupported {
                pod: name,
                problem: "has no command (the test kubelet does not read image entrypoints)"
                    .to_owned(),
            });
        };
        let program = self
            .config
            .binaries
            .get(program)
            .cloned()
            .unwrap_or_else(|| PathBuf::from(program));
        // Each pod its own loopback address, as each pod has its own IP on a node: launchers sharing this host's
        // network then bind the same ports side by side.
        let pod_ip = next_pod_ip();
        let env = self
            .container_env(pod, container, &paths, &pod_ip.to_string())
            .await?;

        let log_file = dir.join("log");
        let log = std::fs::File::create(&log_file).map_err(io(&log_file))?;
        let log_err = log.try_clone().map_err(io(&log_file))?;
        let mut command = Command::new(&program);
        command
            .args(args.iter().map(|a| map_path(&expand(a, &env), &paths)))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .kill_on_drop(true);
        let child = command.spawn().map_err(io(&program))?;
        let started_at = Timestamp::now().to_string();
        let status = json!({
            "status": {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "podIP": pod_ip.to_string(),
                "podIPs": [{"ip": pod_ip.to_string()}],
                "startTime": started_at,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": started_at},
                    {"type": "Ready", "status": "True", "lastTransitionTime": started_at},
                ],
                "containerStatuses": [{
                    "name": container.name,
                    "image": container.image.clone().unwrap_or_default(),
                    "imageID": "",
                    "ready": true,
                    "started": true,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": started_at}},
                }],
            }
        });
        self.running.insert(
            uid,
            RunningPod {
                child,
                started_at,
                termination_file,
                log_file,
                fallback_to_logs: container.termination_message_policy.as_deref()
                    == Some("FallbackToLogsOnError"),
            },
        );
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|source| KubeletError::Api {
                pod: name,
                what: "reporting Running",
                source,
            })?;
        Ok(())
    }

    async fn bind(&self, api: &Api<Pod>, name: &str) -> Result<(), KubeletError> {
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.config.node_name},
        });
        api.create_subresource::<Value, Value>("binding", name, &PostParams::default(), &binding)
            .await
            .map_err(|source| KubeletError::Api {
                pod: name.to_owned(),
                what: "binding",
                source,
            })?;
        Ok(())
    }

    /// Each volume mount of `container` as (mount path, local directory), its contents in place.
    async fn materialise_volumes(
        &self,
        pod: &Pod,
        container: &Container,
        dir: &Path,
    ) -> Result<Vec<(String, PathBuf)>, KubeletError> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let volumes = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = volumes
                .iter()
                .find(|v| v.name == mount.name)
                .ok_or_else(|| KubeletError::Unsupported {
                    pod: name.clone(),
                    problem: format!(
                        "mounts volume {:?}, which the pod does not declare",
                        mount.name
                    ),
                })?;
            let local = if let Some(claim) = &volume.persistent_volume_claim {
                pvc_dir(&self.config.root, &namespace, &claim.claim_name)
            } else if let Some(source) = &volume.config_map {
                let local = dir.join("volumes").join(&volume.name);
                let config_maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &namespace);
                let config_map =
                    config_maps
                        .get(&source.name)
                        .await
                        .map_err(|source| KubeletError::Api {
                            pod: name.clone(),
                            what: "reading its ConfigMap volume",
                            source,
                        })?;
                let data = config_map.data.unwrap_or_default();
                let files: Vec<(String, String)> = match &source.items {
                    Some(items) => items
                        .iter()
                        .filter_map(|item| {
                            data.get(&item.key).map(|v| (item.path.clone(), v.clone()))
                        })
                        .collect(),
                    None => data.into_iter().collect(),
                };
                for (path, contents) in files {
                    let file = local.join(path);
                    if let Some(parent) = file.parent() {
                        std::fs::create_dir_all(parent).map_err(|source| KubeletError::Io {
                            pod: name.clone(),
                            path: parent.to_owned(),
                            source,
                        })?;
                    }
                    std::fs::write(&file, contents).map_err(|source| KubeletError::Io {
                        pod: name.clone(),
                        path: file.clone(),
                        source,
                    })?;
                }
                local
            } else if volume.empty_dir.is_some() {
                dir.join("volumes").join(&volume.name)
            } else {
                return Err(KubeletError::Unsupported {
                    pod: name.clone(),
                    problem: format!(
                        "volume {:?} is neither a PVC, a ConfigMap nor an emptyDir",
                        volume.name
                    ),
                });
            };
            std::fs::create_dir_all(&local).map_err(|source| KubeletError::Io {
                pod: name.clone(),
                path: local.clone(),
                source,
            })?;
            let local = match &mount.sub_path {
                Some(sub) if !sub.is_empty() => local.join(sub),
                _ => local,
            };
            mounts.push((mount.mount_path.clone(), local));
        }
        // Longest mount path first, so a nested mount wins over its parent when paths are mapped.
        mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        Ok(mounts)
    }

    async fn container_env(
        &self,
        pod: &Pod,
        container: &Container,
        paths: &[(String, PathBuf)],
        pod_ip: &str,
    ) -> Result<Vec<(String, String)>, KubeletError> {
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let mut env = Vec::new();
        for var in container.env.iter().flatten() {
            let value = if let Some(value) = &var.value {
                map_path(&expand(value, &env), paths)
            } else if let Some(source) = &var.value_from {
                if let Some(field) = &source.field_ref {
                    match field.field_path.as_str() {
                        "metadata.name" => name.clone(),
                        "metadata.namespace" => namespace.clone(),
                        "metadata.uid" => pod.uid().unwrap_or_default(),
                        "spec.nodeName" => self.config.node_name.clone(),
                        "status.podIP" => pod_ip.to_owned(),
                        "status.hostIP" => "127.0.0.1".to_owned(),
                        other => {
                            return Err(KubeletError::Unsupported {
                                pod: name,
                                problem: format!("env {} uses fieldRef {other}", var.name),
                            });
                        }
                    }
                } else if let Some(key_ref) = &source.secret_key_ref {
                    let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
                    let secret =
                        secrets
                            .get(&key_ref.name)
                            .await
                            .map_err(|source| KubeletError::Api {
                                pod: name.clone(),
                                what: "reading a Secret for its env",
                                source,
                            })?;
                    let bytes = secret
                        .data
                        .unwrap_or_default()
                        .remove(&key_ref.key)
                        .ok_or_else(|| KubeletError::Unsupported {
                            pod: name.clone(),
                            problem: format!("Secret {} has no key {}", key_ref.name, key_ref.key),
                        })?;
                    String::from_utf8_lossy(&bytes.0).into_owned()
                } else {
                    return Err(KubeletError::Unsupported {
                        pod: name,
                        problem: format!(
                            "env {} has a valueFrom the test kubelet does not resolve",
                            var.name
                        ),
                    });
                }
            } else {
                String::new()
            };
            env.push((var.name.clone(), value));
        }
        Ok(env)
    }

    async fn report_terminated(
        &self,
        api: &Api<Pod>,
        pod: &Pod,
        started_at: &str,
        exit_code: i32,
        message: &str,
    ) -> Result<(), KubeletError> {
        let name = pod.name_any();
        let container = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .unwrap_or_default();
        let finished_at = Timestamp::now().to_string();
        let (phase, reason) = if exit_code == 0 {
            ("Succeeded", "Completed")
        } else {
            ("Failed", "Error")
        };
        let mut terminated = json!({
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": finished_at,
        });
        if !message.is_empty() {
            terminated["message"] = Value::String(message.to_owned());
        }
        let status = json!({
            "status": {
                "phase": phase,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": started_at},
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": finished_at},
                ],
                "containerStatuses": [{
                    "name": container.0,
                    "image": container.1,
                    "imageID": "",
                    "ready": false,
                    "started": false,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }],
            }
        });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|source| KubeletError::Api {
                pod: name,
                what: "reporting termination",
                source,
            })?;
        Ok(())
    }

    /// A pod the kubelet could not start fails as a real one with a broken spec would: phase Failed, and why.
    async fn report_failure(&self, pod: &Pod, why: &str) -> Result<(), kube::Error> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let status =
            json!({"status": {"phase": "Failed", "reason": "TestKubelet", "message": why}});
        api.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .map(|_| ())
    }
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The termination message as the kubelet reports it: the file the container wrote, or — with
/// `FallbackToLogsOnError` and a failure — the tail of its log.
fn termination_message(pod: &RunningPod, exit_code: i32) -> String {
    let written = std::fs::read(&pod.termination_file).unwrap_or_default();
    if !written.is_empty() || exit_code == 0 || !pod.fallback_to_logs {
        return truncate_utf8(&written, TERMINATION_MESSAGE_MAX_BYTES);
    }
    let log = std::fs::read(&pod.log_file).unwrap_or_default();
    log_tail(&log, FALLBACK_LOG_LINES, FALLBACK_LOG_MAX_BYTES)
}

/// The last `lines` lines of `log`, at most `max_bytes` of them (cut at the front).
fn log_tail(log: &[u8], lines: usize, max_bytes: usize) -> String {
    let text = String::from_utf8_lossy(log);
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    let start = tail.len().saturating_sub(max_bytes);
    let start = (start..=tail.len())
        .find(|i| tail.is_char_boundary(*i))
        .unwrap_or(tail.len());
    tail[start..].to_owned()
}

fn truncate_utf8(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A fresh loopback address per pod: 127.<pid>.<n>, so test processes running side by side rarely meet.
fn next_pod_ip() -> Ipv4Addr {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    Ipv4Addr::new(127, (pid % 250 + 1) as u8, (n >> 8) as u8, n as u8)
}

/// Kubernetes' `$(VAR)` expansion of a command, an argument or an env value: a reference to a variable defined
/// (earlier) in `env` becomes its value, `$$` is a literal `$`, and anything else stays as written.
fn expand(text: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(close) = inner.find(')')
            && let Some((_, value)) = env.iter().rev().find(|(name, _)| *name == inner[..close])
        {
            out.push_str(value);
            rest = &inner[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `value` with a leading container path replaced by its local directory.
fn map_path(value: &str, paths: &[(String, PathBuf)]) -> String {
    for (container_path, local) in paths {
        if value == container_path {
            return local.display().to_string();
        }
        if let Some(rest) = value.strip_prefix(container_path.as_str())
            && rest.starts_with('/')
        {
            return format!("{}{rest}", local.display());
        }
    }
    value.to_owned()
}

fn pod_dir(root: &Path, namespace: &str, name: &str) -> PathBuf {
    root.join("pods").join(namespace).join(name)
}

fn pvc_dir(root: &Path, namespace: &str, claim: &str) -> PathBuf {
    root.join("pvcs").join(namespace).join(claim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_paths_map_to_their_volume_directories_and_nothing_else() {
        let paths = vec![
            ("/etc/llmbench/profile".to_owned(), PathBuf::from("/tmp/p")),
            ("/workload".to_owned(), PathBuf::from("/tmp/w")),
        ];
        assert_eq!(
            map_path("/etc/llmbench/profile/profile.yaml", &paths),
            "/tmp/p/profile.yaml"
        );
        assert_eq!(map_path("/workload", &paths), "/tmp/w");
        assert_eq!(map_path("/workloads/x", &paths), "/workloads/x");
        assert_eq!(map_path("--output", &paths), "--output");
    }

    #[test]
    fn variable_references_expand_as_kubernetes_expands_them() {
        let env = vec![("POD_IP".to_owned(), "127.3.0.9".to_owned())];
        assert_eq!(expand("$(POD_IP):9465", &env), "127.3.0.9:9465");
        assert_eq!(expand("$$(POD_IP)", &env), "$(POD_IP)");
        assert_eq!(expand("$(UNSET):1", &env), "$(UNSET):1");
        assert_eq!(expand("a$b$(POD_IP", &env), "a$b$(POD_IP");
        assert_ne!(next_pod_ip(), next_pod_ip());
    }

    #[test]
    fn the_log_fallback_keeps_the_last_lines_within_the_byte_cap() {
        let log: String = (0..200).map(|i| format!("line {i}\n")).collect();
        let tail = log_tail(log.as_bytes(), 80, 2048);
        assert!(tail.starts_with("line 120"), "{tail}");
        assert!(tail.ends_with("line 199"));
        let capped = log_tail(log.as_bytes(), 80, 20);
        assert_eq!(capped.len(), 20);
        assert!(capped.ends_with("line 199"));
    }
}
