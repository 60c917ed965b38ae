//! One real Kubernetes node for the end-to-end tests: containerd and runc run the pods' containers, the kubelet,
//! kube-proxy, kube-scheduler and kube-controller-manager are Kubernetes' own (built by `tests/tools/build-tools.sh`
//! at the apiserver's version), pods get addresses from the bridge CNI plugin with host-local IPAM, Service names
//! resolve through CoreDNS's kubernetes plugin (the cluster DNS, on the node's address), and claims bind to
//! pre-created hostPath volumes of a default StorageClass.
//!
//! The node lives in a network namespace of its own, joined to the host by a veth pair: the host's end is the
//! apiserver's address ([`ControlPlane::start_for_node`]), the node's end is the node's InternalIP. containerd, the
//! kubelet and kube-proxy run in that namespace (`nsenter --net`, so they keep the host's mounts and cgroups), so the
//! bridge, the pods' veths and kube-proxy's iptables rules never touch the host's network. The scheduler and the
//! controller-manager only talk to the apiserver and run on the host.
//!
//! Needs root, containerd, runc, the CNI plugins and iptables (Debian's packages; `tests/tools/node-packages.sh`
//! installs them), and the pause image from `image/build.sh --pause`. Nothing is pulled, and nothing could be: the
//! node's namespace has no route beyond the host's end of its veth, and every image a test uses is imported with
//! [`RealNode::import_image`].

use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::control_plane::{ControlPlane, HarnessError, Supervised, Tool};

/// The node's name in the API.
pub const NODE_NAME: &str = "llmbench-node";
/// The default StorageClass whose claims bind to the node's hostPath volumes.
pub const STORAGE_CLASS: &str = "llmbench-local";
/// The cluster domain CoreDNS serves and the kubelet writes into pods' search paths.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// Where pods get their addresses.
const POD_CIDR: &str = "10.244.0.0/24";
/// The sandbox image `image/build.sh --pause` makes, imported as `<PAUSE_REPOSITORY>:<PAUSE_TAG>` (the archive's
/// own ref holds only the tag; the script caches it in `pause-<PAUSE_TAG>/` of the tools cache).
pub const PAUSE_REPOSITORY: &str = "llmbench.local/pause";
pub const PAUSE_TAG: &str = "3.10";
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(180);
const CONTAINERD_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// What can go wrong while building or running the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(
        "the real node needs root (it creates network namespaces and runs containerd); running as uid {uid}"
    )]
    NotRoot { uid: String },

    #[error("{program} is not installed ({hint})")]
    Missing { program: String, hint: &'static str },

    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },

    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(transparent)]
    Harness(#[from] HarnessError),

    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },

    #[error("the node did not become Ready within {waited:?} ({last}); kubelet log tail:\n{tail}")]
    NotReady {
        waited: Duration,
        last: String,
        tail: String,
    },
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> NodeError + use<> {
    let path = path.to_path_buf();
    move |source| NodeError::Io { what, path, source }
}

/// Run a command to completion; its stderr is the error.
fn run(program: &str, args: &[&str]) -> Result<String, NodeError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| NodeError::Command {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NodeError::Command {
            command,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// Whether the real-node tests can run here: root, and the node packages installed. `Err` says what is missing.
pub fn preflight() -> Result<(), NodeError> {
    let uid = run("id", &["-u"])?.trim().to_owned();
    if uid != "0" {
        return Err(NodeError::NotRoot { uid });
    }
    for program in ["containerd", "runc", "ctr", "nsenter", "ip", "iptables"] {
        if run("sh", &["-c", &format!("command -v {program}")]).is_err() {
            return Err(NodeError::Missing {
                program: program.to_owned(),
                hint: "run `bash tests/tools/node-packages.sh` as root",
            });
        }
    }
    if !Path::new(CNI_BIN_DIR).join("bridge").exists() {
        return Err(NodeError::Missing {
            program: format!("{CNI_BIN_DIR}/bridge"),
            hint: "run `bash tests/tools/node-packages.sh` as root",
        });
    }
    Ok(())
}

/// Debian's containernetworking-plugins install here.
const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// The node's network namespace and the veth pair that joins it to the host.
#[derive(Debug)]
pub struct NodeNetwork {
    name: String,
    host_ip: Ipv4Addr,
    node_ip: Ipv4Addr,
}

impl NodeNetwork {
    /// A new namespace `llmbench-node-<pid>` on its own /24 (picked from the pid, so two test processes differ).
    pub fn create() -> Result<Self, NodeError> {
        let pid = std::process::id();
        let subnet = 16 + (pid % 200) as u8;
        let host_ip = Ipv4Addr::new(10, 213, subnet, 1);
        let node_ip = Ipv4Addr::new(10, 213, subnet, 2);
        let name = format!("llmbench-node-{pid}");
        let (host_if, node_if) = (format!("lbh{pid}"), format!("lbn{pid}"));
        // A namespace left by a killed run of the same pid would make `add` fail.
        let _ = run("ip", &["netns", "del", &name]);
        let _ = run("ip", &["link", "del", &host_if]);
        run("ip", &["netns", "add", &name])?;
        let network = Self {
            name,
            host_ip,
            node_ip,
        };
        let host_cidr = format!("{host_ip}/24");
        let node_cidr = format!("{node_ip}/24");
        let steps: [(&str, Vec<&str>); 6] = [
            (
                "ip",
                vec![
                    "link", "add", &host_if, "type", "veth", "peer", "name", &node_if,
                ],
            ),
            ("ip", vec!["link", "set", &node_if, "netns", &network.name]),
            ("ip", vec!["addr", "add", &host_cidr, "dev", &host_if]),
            ("ip", vec!["link", "set", &host_if, "up"]),
            (
                "ip",
                vec![
                    "-n",
                    &network.name,
                    "addr",
                    "add",
                    &node_cidr,
                    "dev",
                    &node_if,
                ],
            ),
            (
                "ip",
                vec!["-n", &network.name, "link", "set", &node_if, "up"],
            ),
        ];
        for (program, args) in &steps {
            run(program, args)?;
        }
        run("ip", &["-n", &network.name, "link", "set", "lo", "up"])?;
        // No default route: the node reaches the host's end (the apiserver) on the link and nothing beyond it,
        // so containerd can never pull an image and no test traffic leaves the namespaces we made.
        // Pods reach the apiserver through the node (forwarding), and Services between pods on the one bridge
        // need bridged traffic to pass iptables (both are per-namespace settings).
        network.in_namespace_sh(
            "echo 1 > /proc/sys/net/ipv4/ip_forward && \
             echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables",
        )?;
        Ok(network)
    }

    /// The host's end: the apiserver listens here.
    pub fn host_ip(&self) -> Ipv4Addr {
        self.host_ip
    }

    /// The node's InternalIP.
    pub fn node_ip(&self) -> Ipv4Addr {
        self.node_ip
    }

    fn netns_path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    fn in_namespace_sh(&self, script: &str) -> Result<String, NodeError> {
        run(
            "nsenter",
            &[&format!("--net={}", self.netns_path()), "sh", "-c", script],
        )
    }
}

impl Drop for NodeNetwork {
    fn drop(&mut self) {
        // Deleting the namespace deletes the node's veth end and with it the host's.
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// A running node. Dropping it stops every pod's containers, the node's processes, and removes its directory.
pub struct RealNode {
    // Drop order matters and is spelled out in `Drop`.
    kubelet: Option<Supervised>,
    kube_proxy: Option<Supervised>,
    coredns: Option<Supervised>,
    scheduler: Option<Supervised>,
    controller_manager: Option<Supervised>,
    containerd: Option<Supervised>,
    containerd_socket: PathBuf,
    dir: PathBuf,
    keep_dir: bool,
    netns_before: Vec<String>,
    network: Option<NodeNetwork>,
}

impl std::fmt::Debug for RealNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNode")
            .field("dir", &self.dir)
            .field("network", &self.network)
            .finish_non_exhaustive()
    }
}

impl RealNode {
    /// Start containerd, the kubelet, kube-proxy, the scheduler and the controller-manager for `cp` (started with
    /// [`ControlPlane::start_for_node`] on `network`'s host address), import the pause image, and wait until the
    /// node is Ready. `LLMBENCH_E2E_KEEP=1` keeps the node's directory (logs, configs).
    pub async fn start(
        cp: &ControlPlane,
        network: NodeNetwork,
        pause_archive: &Path,
    ) -> Result<Self, NodeError> {
        preflight()?;
        let dir = std::env::temp_dir().join(format!("llmbench-node-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        let keep_dir = std::env::var("LLMBENCH_E2E_KEEP").is_ok_and(|v| v == "1");
        let mut node = RealNode {
            kubelet: None,
            kube_proxy: None,
            coredns: None,
            scheduler: None,
            controller_manager: None,
            containerd: None,
            containerd_socket: dir.join("containerd/containerd.sock"),
            dir,
            keep_dir,
            netns_before: pod_namespaces(),
            network: None,
        };
        let netns = network.netns_path();
        let node_ip = network.node_ip();
        node.network = Some(network);
        let tools = cp.tools();
        let node_dir = node.dir.clone();
        let write = |name: &str, text: String| -> Result<PathBuf, NodeError> {
            let path = node_dir.join(name);
            fs::write(&path, text).map_err(io_err("writing", &path))?;
            Ok(path)
        };

        // containerd: its own root, state and socket; the sandbox image is ours and nothing is pulled.
        let containerd_dir = node.dir.join("containerd");
        let cni_conf_dir = node.dir.join("cni/net.d");
        fs::create_dir_all(&cni_conf_dir).map_err(io_err("creating", &cni_conf_dir))?;
        let containerd_config = write(
            "containerd.toml",
            containerd_config(&containerd_dir, &node.containerd_socket, &cni_conf_dir),
        )?;
        write(
            "cni/net.d/10-llmbench.conflist",
            cni_config(&node.dir.join("cni/ipam")),
        )?;
        let nsenter_net = format!("--net={netns}");
        let in_node = |binary: &Path, args: Vec<String>| -> Vec<String> {
            let mut all = vec![nsenter_net.clone(), "--".to_owned(), path_str(binary)];
            all.extend(args);
            all
        };
        let containerd_bin = which("containerd")?;
        node.containerd = Some(Supervised::spawn(
            "containerd",
            Path::new("/usr/bin/nsenter"),
            &in_node(
                &containerd_bin,
                vec![format!("--config={}", path_str(&containerd_config))],
            ),
            node.dir.join("containerd.log"),
            None,
        )?);
        node.wait_for_containerd().await?;
        node.import_image(pause_archive, PAUSE_REPOSITORY)?;

        // The cluster DNS: CoreDNS's kubernetes plugin on the node's address, which pods reach over their bridge.
        let corefile = write(
            "Corefile",
            format!(
                ".:53 {{\n    bind {node_ip}\n    errors\n    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n        \
                 kubeconfig {}\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n}}\n",
                path_str(cp.kubeconfig_path())
            ),
        )?;
        node.coredns = Some(Supervised::spawn(
            "coredns",
            Path::new("/usr/bin/nsenter"),
            &in_node(
                &tools.path(Tool::Coredns)?,
                vec!["-conf".to_owned(), path_str(&corefile)],
            ),
            node.dir.join("coredns.log"),
            None,
        )?);

        // The kubelet: cgroupfs on this cgroup v1 host, eviction thresholds relaxed to what a shared test disk has,
        // authentication by our CA (the apiserver presents the admin certificate for exec and logs).
        let resolv = write("resolv.conf", "nameserver 127.0.0.1\n".to_owned())?;
        let kubelet_config = write(
            "kubelet.yaml",
            kubelet_config(&node.containerd_socket, cp.ca_cert_path(), node_ip, &resolv),
        )?;
        node.kubelet = Some(Supervised::spawn(
            "kubelet",
            Path::new("/usr/bin/nsenter"),
            &in_node(
                &tools.path(Tool::Kubelet)?,
                vec![
                    format!("--config={}", path_str(&kubelet_config)),
                    format!("--kubeconfig={}", path_str(cp.kubeconfig_path())),
                    format!("--root-dir={}", path_str(&node.dir.join("kubelet"))),
                    format!("--cert-dir={}", path_str(&node.dir.join("kubelet-pki"))),
                    format!("--hostname-override={NODE_NAME}"),
                    format!("--node-ip={node_ip}"),
                    "--v=2".to_owned(),
                ],
            ),
            node.dir.join("kubelet.log"),
            None,
        )?);

        let proxy_config = write(
            "kube-proxy.yaml",
            kube_proxy_config(cp.kubeconfig_path(), node_ip),
        )?;
        node.kube_proxy = Some(Supervised::spawn(
            "kube-proxy",
            Path::new("/usr/bin/nsenter"),
            &in_node(
                &tools.path(Tool::KubeProxy)?,
                vec![format!("--config={}", path_str(&proxy_config))],
            ),
            node.dir.join("kube-proxy.log"),
            None,
        )?);

        let kubeconfig = format!("--kubeconfig={}", path_str(cp.kubeconfig_path()));
        node.scheduler = Some(Supervised::spawn(
            "kube-scheduler",
            &tools.path(Tool::KubeScheduler)?,
            &[
                kubeconfig.clone(),
                "--leader-elect=false".to_owned(),
                "--secure-port=0".to_owned(),
            ],
            node.dir.join("kube-scheduler.log"),
            None,
        )?);
        node.controller_manager = Some(Supervised::spawn(
            "kube-controller-manager",
            &tools.path(Tool::KubeControllerManager)?,
            &[
                kubeconfig,
                "--leader-elect=false".to_owned(),
                "--secure-port=0".to_owned(),
                format!(
                    "--service-account-private-key-file={}",
                    path_str(cp.service_account_key())
                ),
                // Publishes kube-root-ca.crt, which every pod's ServiceAccount volume projects.
                format!("--root-ca-file={}", path_str(cp.ca_cert_path())),
                "--use-service-account-credentials=false".to_owned(),
            ],
            node.dir.join("kube-controller-manager.log"),
            None,
        )?);

        let admin = cp.admin_client().await?;
        node.wait_until_ready(&admin).await?;
        create_local_storage(&admin, &node.dir.join("volumes")).await?;
        Ok(node)
    }

    /// The node's directory: configs and every component's log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Import an OCI archive (`image/build.sh`) into containerd's CRI namespace as `<base_name>:<tag>`.
    pub fn import_image(&self, archive: &Path, base_name: &str) -> Result<(), NodeError> {
        let archive = path_str(archive);
        self.ctr(&["images", "import", "--base-name", base_name, &archive])
            .map(drop)
    }

    /// `ctr` on this node's containerd, in the CRI's `k8s.io` namespace.
    fn ctr(&self, args: &[&str]) -> Result<String, NodeError> {
        let socket = path_str(&self.containerd_socket);
        let mut all = vec!["--address", socket.as_str(), "-n", "k8s.io"];
        all.extend_from_slice(args);
        run("ctr", &all)
    }

    /// The last lines of each component's log, for a failing test's message.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        for (name, p) in self.components() {
            out.push_str(&format!("--- {name}:\n{}\n", p.log_tail()));
        }
        out
    }

    /// What a failing test needs to say why: every pod's phase, conditions and container states, the cluster's
    /// Warning events, then the error and warning lines of each node component's log. Compact on purpose: CI shows
    /// only the end of a failing test's output.
    pub async fn diagnosis(&self, admin: &Client) -> String {
        let mut out = String::from("=== node\n");
        match Api::<Node>::all(admin.clone()).get_opt(NODE_NAME).await {
            Ok(Some(node)) => {
                let status = node.status.clone().unwrap_or_default();
                for c in status.conditions.iter().flatten() {
                    out.push_str(&format!(
                        "  {}={} {}\n",
                        c.type_,
                        c.status,
                        c.message.as_deref().unwrap_or_default()
                    ));
                }
                for t in node.spec.iter().flat_map(|s| s.taints.iter().flatten()) {
                    out.push_str(&format!("  taint {}:{}\n", t.key, t.effect));
                }
            }
            Ok(None) => out.push_str("  not registered\n"),
            Err(e) => out.push_str(&format!("  reading the node: {e}\n")),
        }
        out.push_str(&format!(
            "  free disk under {}: {}\n",
            self.dir.display(),
            free_disk(&self.dir)
        ));
        out.push_str("=== pods\n");
        match Api::<Pod>::all(admin.clone())
            .list(&ListParams::default())
            .await
        {
            Ok(pods) => {
                for pod in &pods.items {
                    out.push_str(&describe_pod(pod));
                    out.push_str(&unready_container_logs(admin, pod).await);
                }
            }
            Err(e) => out.push_str(&format!("listing pods: {e}\n")),
        }
        out.push_str("=== warning events\n");
        match Api::<Event>::all(admin.clone())
            .list(&ListParams::default().fields("type=Warning"))
            .await
        {
            Ok(events) => {
                for e in events.items.iter().rev().take(25).rev() {
                    out.push_str(&format!(
                        "{} {}/{}: {} {} (x{})\n",
                        e.involved_object.kind.as_deref().unwrap_or("?"),
                        e.involved_object.namespace.as_deref().unwrap_or("-"),
                        e.involved_object.name.as_deref().unwrap_or("?"),
                        e.reason.as_deref().unwrap_or_default(),
                        e.message.as_deref().unwrap_or_default().trim(),
                        e.count.unwrap_or(1),
                    ));
                }
            }
            Err(e) => out.push_str(&format!("listing events: {e}\n")),
        }
        for (name, p) in self.components() {
            let text = fs::read_to_string(p.log_path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| is_problem_line(l)).collect();
            out.push_str(&format!(
                "=== {name}: last problem lines of {}\n{}\n",
                p.log_path().display(),
                lines[lines.len().saturating_sub(12)..].join("\n")
            ));
        }
        out
    }

    fn components(&self) -> impl Iterator<Item = (&'static str, &Supervised)> {
        [
            ("kubelet", &self.kubelet),
            ("containerd", &self.containerd),
            ("kube-proxy", &self.kube_proxy),
            ("coredns", &self.coredns),
            ("kube-scheduler", &self.scheduler),
            ("kube-controller-manager", &self.controller_manager),
        ]
        .into_iter()
        .filter_map(|(name, p)| p.as_ref().map(|p| (name, p)))
    }

    async fn wait_for_containerd(&mut self) -> Result<(), NodeError> {
        let start = Instant::now();
        let mut last = String::from("not checked yet");
        while start.elapsed() < CONTAINERD_READY_TIMEOUT {
            if let Some(p) = self.containerd.as_mut()
                && let Some(status) = p.exited()
            {
                return Err(p.exited_error(status).into());
            }
            match self.ctr(&["version"]) {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let p = self.containerd.as_ref();
        Err(NodeError::NotReady {
            waited: start.elapsed(),
            last: format!("containerd: {last}"),
            tail: p.map(Supervised::log_tail).unwrap_or_default(),
        })
    }

    async fn wait_until_ready(&mut self, admin: &Client) -> Result<(), NodeError> {
        let nodes: Api<Node> = Api::all(admin.clone());
        let start = Instant::now();
        let mut last = String::from("not registered yet");
        while start.elapsed() < NODE_READY_TIMEOUT {
            for p in [
                &mut self.kubelet,
                &mut self.kube_proxy,
                &mut self.coredns,
                &mut self.scheduler,
                &mut self.controller_manager,
                &mut self.containerd,
            ]
            .into_iter()
            .flatten()
            {
                if let Some(status) = p.exited() {
                    return Err(p.exited_error(status).into());
                }
            }
            if let Ok(Some(node)) = nodes.get_opt(NODE_NAME).await {
                let ready = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
                match ready {
                    Some(c) if c.status == "True" => return Ok(()),
                    Some(c) => {
                        last = format!(
                            "Ready={} {}: {}",
                            c.status,
                            c.reason.as_deref().unwrap_or_default(),
                            c.message.as_deref().unwrap_or_default()
                        )
                    }
                    None => last = "registered, no Ready condition yet".to_owned(),
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(NodeError::NotReady {
            waited: start.elapsed(),
            last,
            tail: self.log_tails(),
        })
    }

    /// Kill every container and sandbox, then containerd and its shims, and undo the mounts and namespaces the
    /// pods left.
    fn stop_runtime(&mut self) {
        if let Ok(tasks) = self.ctr(&["tasks", "ls", "-q"]) {
            let tasks: Vec<&str> = tasks
                .lines()
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect();
            for task in &tasks {
                let _ = self.ctr(&["tasks", "kill", "-a", "-s", "SIGKILL", task]);
            }
            std::thread::sleep(Duration::from_millis(300));
            for task in &tasks {
                let _ = self.ctr(&["tasks", "delete", "-f", task]);
            }
        }
        if let Some(mut p) = self.containerd.take() {
            p.stop();
        }
        // Shims that outlived containerd hold our socket path on their command line.
        let socket = path_str(&self.containerd_socket);
        if let Ok(entries) = fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline);
                if cmdline.starts_with("/usr/bin/containerd-shim")
                    && cmdline.contains(&socket)
                    && let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>()
                {
                    let _ = run("kill", &["-KILL", &pid.to_string()]);
                }
            }
        }
        // Pod network namespaces containerd made and did not remove.
        for ns in pod_namespaces() {
            if !self.netns_before.contains(&ns) {
                let _ = run("ip", &["netns", "del", &ns]);
            }
        }
        unmount_under(&self.dir);
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        // The kubelet first, so it does not restart what we kill; then the runtime and its pods; then the rest.
        if let Some(mut p) = self.kubelet.take() {
            p.stop();
        }
        self.stop_runtime();
        for p in [
            self.kube_proxy.take(),
            self.coredns.take(),
            self.scheduler.take(),
            self.controller_manager.take(),
        ]
        .into_iter()
        .flatten()
        {
            let mut p = p;
            p.stop();
        }
        drop(self.network.take());
        if !self.keep_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// `df -h`'s answer for `dir`'s filesystem: size, used, available.
fn free_disk(dir: &Path) -> String {
    run("df", &["-h", "--output=size,used,avail", &path_str(dir)])
        .map(|t| t.lines().last().unwrap_or_default().trim().to_owned())
        .unwrap_or_else(|e| e.to_string())
}

/// klog's error and warning lines (`E1124 …`, `W1124 …`), containerd's and CoreDNS's `level=error|warning` and
/// `[ERROR]`/`[WARNING]` lines.
fn is_problem_line(line: &str) -> bool {
    let klog = matches!(line.as_bytes(), [b'E' | b'W', d0, d1, d2, d3, ..] if [d0, d1, d2, d3].iter().all(|d| d.is_ascii_digit()));
    klog || line.contains("level=error")
        || line.contains("level=warning")
        || line.contains("[ERROR]")
        || line.contains("[WARNING]")
}

/// The last lines each container of `pod` that is not ready logged (its previous run's, if it restarted).
async fn unready_container_logs(admin: &Client, pod: &Pod) -> String {
    let api: Api<Pod> = Api::namespaced(admin.clone(), &pod.namespace().unwrap_or_default());
    let mut out = String::new();
    let statuses = pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten());
    for c in statuses.filter(|c| !c.ready) {
        let params = LogParams {
            container: Some(c.name.clone()),
            tail_lines: Some(8),
            previous: c.restart_count > 0,
            ..LogParams::default()
        };
        match api.logs(&pod.name_any(), &params).await {
            Ok(text) => {
                for line in text.lines() {
                    out.push_str(&format!("    | {line}\n"));
                }
            }
            Err(e) => out.push_str(&format!("    (no log of {}: {e})\n", c.name)),
        }
    }
    out
}

/// One pod in a few lines: phase, conditions that are not True, and each container's state.
fn describe_pod(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let mut out = format!(
        "{}/{} on {}: {}\n",
        pod.namespace().unwrap_or_default(),
        pod.name_any(),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("(unscheduled)"),
        status.phase.as_deref().unwrap_or("?")
    );
    for c in status
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.status != "True")
    {
        out.push_str(&format!(
            "  {}={} {} {}\n",
            c.type_,
            c.status,
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default()
        ));
    }
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    for c in containers {
        let state = c.state.clone().unwrap_or_default();
        let said = if let Some(w) = state.waiting {
            format!(
                "waiting {} {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            )
        } else if let Some(t) = state.terminated {
            format!(
                "terminated {} exit {} {}",
                t.reason.unwrap_or_default(),
                t.exit_code,
                t.message.unwrap_or_default()
            )
        } else {
            "running".to_owned()
        };
        out.push_str(&format!(
            "  container {}: {said}, ready {}, restarts {}\n",
            c.name, c.ready, c.restart_count
        ));
    }
    out
}

/// `cni-*` entries under /run/netns: the pods' network namespaces.
fn pod_namespaces() -> Vec<String> {
    fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("cni-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Unmount everything mounted under `dir`, deepest first (the kubelet's volume tmpfs, containerd's rootfs and shm).
fn unmount_under(dir: &Path) {
    let prefix = path_str(dir);
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let _ = run("umount", &["-l", point]);
    }
}

fn path_str(path: &Path) -> String {
    path.display().to_string()
}

fn which(program: &'static str) -> Result<PathBuf, NodeError> {
    let path =
        run("sh", &["-c", &format!("command -v {program}")]).map_err(|_| NodeError::Missing {
            program: program.to_owned(),
            hint: "run `bash tests/tools/node-packages.sh` as root",
        })?;
    Ok(PathBuf::from(path.trim()))
}

fn containerd_config(dir: &Path, socket: &Path, cni_conf_dir: &Path) -> String {
    let (root, state) = (path_str(&dir.join("root")), path_str(&dir.join("state")));
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_REPOSITORY}:{PAUSE_TAG}"
  # This sandbox lacks CAP_SYS_RESOURCE, so lowering a process's oom_score_adj (the kubelet asks -998 for sandboxes)
  # fails with EACCES; keep scores at or above our own, as containerd does for rootless nodes.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni}"
"#,
        socket = path_str(socket),
        cni = path_str(cni_conf_dir),
    )
}

fn cni_config(ipam_dir: &Path) -> String {
    json!({
        "cniVersion": "0.4.0",
        "name": "llmbench",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": true,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": path_str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

fn kubelet_config(socket: &Path, ca: &Path, node_ip: Ipv4Addr, resolv: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{socket}
imageServiceEndpoint: unix://{socket}
cgroupDriver: cgroupfs
# This VM runs cgroup v1, which kubelet 1.34 still supports when asked to.
failCgroupV1: false
failSwapOn: false
address: {node_ip}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {ca}
authorization:
  mode: AlwaysAllow
resolvConf: {resolv}
clusterDNS: [{node_ip}]
clusterDomain: {CLUSTER_DOMAIN}
# The test disk is shared with the build (a clean clone's target of many GB): thresholds in percent of a large disk
# taint the node with disk-pressure and evict our pods while gigabytes are free. Absolute floors instead.
evictionHard:
  memory.available: 50Mi
  nodefs.available: 256Mi
  nodefs.inodesFree: 1%
  imagefs.available: 256Mi
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
"#,
        socket = path_str(socket),
        ca = path_str(ca),
        resolv = path_str(resolv),
    )
}

fn kube_proxy_config(kubeconfig: &Path, node_ip: Ipv4Addr) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
mode: iptables
hostnameOverride: {NODE_NAME}
clusterCIDR: 10.244.0.0/16
bindAddress: {node_ip}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the host's conntrack table size and timeouts alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        kubeconfig = path_str(kubeconfig),
    )
}

/// A default StorageClass and hostPath volumes for its claims, bound by the controller-manager's PV binder as a
/// static provisioner's volumes are on a real cluster. The directories are world-writable, as local-path
/// provisioners make them, since a hostPath volume gets no fsGroup.
async fn create_local_storage(admin: &Client, dir: &Path) -> Result<(), NodeError> {
    let api_err = |what: String| move |source| NodeError::Api { what, source };
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }))
    .map_err(|e| NodeError::Command {
        command: "building the StorageClass".to_owned(),
        detail: e.to_string(),
    })?;
    Api::<StorageClass>::all(admin.clone())
        .create(&PostParams::default(), &class)
        .await
        .map_err(api_err(format!("creating StorageClass {STORAGE_CLASS}")))?;
    let volumes: Api<PersistentVolume> = Api::all(admin.clone());
    for i in 0..6 {
        let path = dir.join(format!("pv{i}"));
        fs::create_dir_all(&path).map_err(io_err("creating", &path))?;
        run("chmod", &["0777", &path_str(&path)])?;
        let pv: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": format!("llmbench-local-{i}")},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "hostPath": {"path": path_str(&path), "type": "Directory"},
            },
        }))
        .map_err(|e| NodeError::Command {
            command: "building a PersistentVolume".to_owned(),
            detail: e.to_string(),
        })?;
        let name = pv.name_any();
        volumes
            .create(&PostParams::default(), &pv)
            .await
            .map_err(api_err(format!("creating PersistentVolume {name}")))?;
    }
    Ok(())
}
